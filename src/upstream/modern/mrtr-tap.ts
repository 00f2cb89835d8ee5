/**
 * The attribution tap of a Streamable HTTP upstream that may speak either era:
 * the legacy stream rule (SseRequestTap) plus, for a modern upstream, the
 * server→client requests the gateway itself makes out of an `input_required`
 * result (bridge 2: they arrive on no stream, so the era transport says whose
 * call they belong to). See docs/design/protocol-eras-upstream.md.
 */
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import { SseRequestTap } from "../../mcp/sse-request-tap.js";

/** Bound on relations nobody took (a request the client never handled). */
const MAX_RELATED = 1000;

export class MrtrRequestTap extends SseRequestTap {
  private readonly bridged = new Map<RequestId, RequestId>();

  /** The gateway's request `id` (made from an upstream's input request) belongs to our call `owner`. */
  relate(id: RequestId, owner: RequestId): void {
    this.bridged.set(id, owner);
    if (this.bridged.size > MAX_RELATED) this.bridged.delete(this.bridged.keys().next().value!);
  }

  override take(id: RequestId): RequestId | undefined {
    const owner = this.bridged.get(id);
    if (owner === undefined) return super.take(id);
    this.bridged.delete(id);
    return owner;
  }
}
