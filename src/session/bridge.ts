/**
 * DownstreamBridge: how a session reaches its own client natively (the
 * transparent face). When a session has no bridge, or the client lacks the
 * capability, server→client requests wait in the session's pending queue
 * instead (visible through the meta-tools face). Requests come with the
 * origin of the call they belong to, when known: the bridge sends them where
 * that call lives (ADR 0002 §8), else on its standalone route.
 * withVisibleRequests() lists the elicitations and sampling requests a bridge
 * sends while the client holds them (PendingRequests.forward), read-only for
 * the web console.
 */
import type {
  ClientCapabilities,
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult,
  ListRootsResult,
} from "@modelcontextprotocol/sdk/types.js";
import type { CallOrigin } from "../upstream/origin.js";
import type { PendingRequests } from "./pending-requests.js";

export interface DownstreamBridge {
  readonly clientCapabilities: ClientCapabilities;
  /** Whether this client's face shows `server` (a single-server face shows one; the aggregate, all). */
  serves(server: string): boolean;
  /** The aggregate face: its lists change when servers are added or removed. */
  readonly aggregate: boolean;
  /**
   * Whether the client is initialized, waiting up to `timeoutMs` (upstreams
   * may ask before it is). Requests go to the client only once it is.
   */
  whenInitialized(signal: AbortSignal, timeoutMs: number): Promise<boolean>;
  elicit(server: string, params: ElicitRequest["params"], signal: AbortSignal, origin?: CallOrigin): Promise<ElicitResult>;
  sample(server: string, params: CreateMessageRequest["params"], signal: AbortSignal, origin?: CallOrigin): Promise<CreateMessageResult>;
  listRoots(signal: AbortSignal, origin?: CallOrigin): Promise<ListRootsResult>;
  /** Forwards an upstream notification (list_changed, resources/updated, message, ...). */
  notify(server: string, method: string, params: Record<string, unknown> | undefined): void;
}

export function canElicit(caps: ClientCapabilities | undefined, mode: string): boolean {
  const e = caps?.elicitation as { form?: object; url?: object } | undefined;
  if (!e) return false;
  // An empty elicitation capability means form mode (2025-06-18 clients).
  if (mode === "url") return e.url !== undefined;
  return e.form !== undefined || (e.url === undefined && e.form === undefined);
}

/** The same bridge, whose elicitations and sampling requests are listed as forwarded while the client holds them. */
export function withVisibleRequests(bridge: DownstreamBridge, pending: PendingRequests): DownstreamBridge {
  return {
    ...bridge,
    elicit: (server, params, signal, origin) => pending.forward("elicitation", server, params, () => bridge.elicit(server, params, signal, origin)),
    sample: (server, params, signal, origin) => pending.forward("sampling", server, params, () => bridge.sample(server, params, signal, origin)),
  };
}
