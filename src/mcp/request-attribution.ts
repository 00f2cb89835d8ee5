/**
 * SDK boundary — attribution: which of our calls an upstream's server→client
 * request belongs to. Relies on Protocol.request passing `onresumptiontoken`
 * to transport.send (canary: test/unit/sdk-canaries.test.ts). See
 * docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { SseRequestTap } from "./sse-request-tap.js";

type Token = (resumptionToken: string) => void;

interface Call<O> {
  origin: O | undefined;
  /** The JSON-RPC id the SDK gave the call, once sent. */
  id?: RequestId;
}

/** One call being attributed: spread `options` into the SDK request's options; end() once it settles. */
export interface AttributedCall {
  readonly options: { onresumptiontoken: Token };
  end(): void;
}

export class RequestAttribution<O> {
  private readonly byToken = new Map<Token, Call<O>>();
  private readonly inflight = new Map<RequestId, Call<O>>();
  private readonly byTask = new Map<string, O>();

  /** `streams`: the Streamable HTTP transport's tap (stream rule); without it, the single-call rule. */
  constructor(private readonly streams?: SseRequestTap) {}

  /** Wraps `transport.send`; call before the transport is connected. */
  install(transport: Transport): void {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      const call = options?.onresumptiontoken ? this.byToken.get(options.onresumptiontoken) : undefined;
      // The SDK's own request (the token is ours): a structural check, not its zod guard (issue 27: a parse per call).
      if (call && call.id === undefined && "method" in message && "id" in message) {
        call.id = message.id;
        this.inflight.set(message.id, call);
      }
      return send(message, options);
    };
  }

  /** Starts attributing one call to `origin` (undefined: the call counts as in flight, but belongs to nobody). */
  begin(origin: O | undefined): AttributedCall {
    const call: Call<O> = { origin };
    const token: Token = () => undefined;
    this.byToken.set(token, call);
    return {
      options: { onresumptiontoken: token },
      end: () => {
        this.byToken.delete(token);
        if (call.id !== undefined && this.inflight.get(call.id) === call) this.inflight.delete(call.id);
      },
    };
  }

  /** The origin of the call the upstream's request `id` belongs to, or undefined when unknown. */
  attribute(id: RequestId): O | undefined {
    if (this.streams) {
      const ours = this.streams.take(id);
      return ours === undefined ? undefined : this.inflight.get(ours)?.origin;
    }
    if (this.inflight.size !== 1) return undefined;
    return this.inflight.values().next().value?.origin;
  }

  /** Calls in flight (sent and not yet settled). */
  get inFlight(): number {
    return this.inflight.size;
  }

  /** The origins of the calls in flight (undefined for calls that have none). */
  inFlightOrigins(): Array<O | undefined> {
    return [...this.inflight.values()].map((c) => c.origin);
  }

  /** The upstream task `upstreamTaskId` was created by a call from `origin`. */
  relateTask(upstreamTaskId: string, origin: O): void {
    this.byTask.set(upstreamTaskId, origin);
  }

  /** The origin of the call that created upstream task `upstreamTaskId`, while it is remembered. */
  taskOrigin(upstreamTaskId: string): O | undefined {
    return this.byTask.get(upstreamTaskId);
  }

  /** The upstream task ended for the gateway: forget it. */
  releaseTask(upstreamTaskId: string): void {
    this.byTask.delete(upstreamTaskId);
  }
}
