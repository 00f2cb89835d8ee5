/**
 * Bridge 1's link between the modern endpoint and the era transport under
 * the face: the 2026-07-28 client request being served, carried by async
 * context (not `_meta`, which a legacy client could forge and which would
 * reach legacy upstreams). A modern upstream's `input_required` for that
 * request is relayed to the client (requestState sealed) instead of being
 * asked of a 2025 session (bridge 2), and the client's retry brings its
 * answers and sealed state back. See docs/design/protocol-eras-upstream.md.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { RequestStateSealer } from "./sealed-state.js";

export interface ModernCall {
  /** The client request's method (only a request upstream with the same method relays). */
  method: string;
  /** The caller's principal id (undefined: no authentication). */
  principal: string | undefined;
  /** What the client declared of elicitation, sampling and roots (the envelope sent upstream carries these). */
  capabilities: Record<string, unknown>;
  sealer: RequestStateSealer;
  /** The retry's answers, as the client sent them. */
  inputResponses?: Record<string, unknown> | undefined;
  /** The retry's sealed state (bridge 1's), as the client sent it. */
  requestState?: string | undefined;
  /** Set by the first upstream request that relays this call (a call relays once). */
  taken?: boolean;
}

const current = new AsyncLocalStorage<ModernCall>();

/** Runs `fn` (the forwarding of one modern client request) with `call` as its context. */
export function runAsModernCall<T>(call: ModernCall, fn: () => T): T {
  return current.run(call, fn);
}

/** The modern client request an upstream request of `method` serves now, once (undefined: none, or it was taken). */
export function takeModernCall(method: string): ModernCall | undefined {
  const call = current.getStore();
  if (call === undefined || call.taken || call.method !== method) return undefined;
  call.taken = true;
  return call;
}
