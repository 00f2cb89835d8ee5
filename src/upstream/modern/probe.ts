/**
 * Which era a Streamable HTTP upstream speaks: `server/discover` sent once per
 * endpoint URL, the verdict kept (per gateway) so later connections skip the
 * probe. A refusal in the legacy manner (an HTTP 400/404/405, a JSON-RPC
 * error, a result without `supportedVersions`) means 2025 era; no answer, a
 * 401/403 or a 5xx gives no verdict (the connection falls back to
 * `initialize` and the next one asks again). See
 * docs/design/protocol-eras-upstream.md.
 */
import type { Implementation } from "@modelcontextprotocol/sdk/types.js";
import { systemClock, type Clock } from "../../clock.js";
import { GatewayError } from "../../errors.js";
import type { FetchLike } from "../../mcp/sse-request-tap.js";
import { CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, MODERN_UPSTREAM_VERSIONS, PROTOCOL_VERSION_KEY, modernHeaders, readMessages, type Json } from "./wire.js";

export type Era = "legacy" | "modern";

/** What a modern upstream said about itself. */
export interface Discovered {
  version: string;
  result: Json;
}

export type ProbeOutcome = { era: "modern"; discovered: Discovered } | { era: "legacy" } | { era: undefined; reason: string };

/** Verdicts per endpoint URL (bounded; the oldest are forgotten). */
export class EraVerdicts {
  private readonly byUrl = new Map<string, Era>();
  constructor(private readonly max = 1000) {}
  get(url: string): Era | undefined {
    return this.byUrl.get(url);
  }
  set(url: string, era: Era): void {
    this.byUrl.delete(url);
    this.byUrl.set(url, era);
    if (this.byUrl.size > this.max) this.byUrl.delete(this.byUrl.keys().next().value!);
  }
  forget(url: string): void {
    this.byUrl.delete(url);
  }
}

export interface DiscoverOptions {
  url: URL;
  fetch: FetchLike;
  headers?: Record<string, string> | undefined;
  clientInfo: Implementation;
  capabilities: Json;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  clock?: Clock | undefined;
}

/**
 * Sends `server/discover` and says what the answer shows. Throws only what
 * the fetch throws as a GatewayError (the caller's upstream authorization:
 * consent required, vault unavailable), as the legacy transport would.
 */
export async function discover(o: DiscoverOptions): Promise<ProbeOutcome> {
  const version = MODERN_UPSTREAM_VERSIONS[0]!;
  const params = { _meta: { [PROTOCOL_VERSION_KEY]: version, [CLIENT_CAPABILITIES_KEY]: o.capabilities, [CLIENT_INFO_KEY]: o.clientInfo } };
  const clock = o.clock ?? systemClock;
  const abort = new AbortController();
  const timer = clock.setTimeout(() => abort.abort(new Error(`no answer to server/discover within ${o.timeoutMs} ms`)), o.timeoutMs);
  const onAbort = () => abort.abort(o.signal?.reason);
  o.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const response = await o.fetch(o.url, {
      method: "POST",
      headers: modernHeaders(version, "server/discover", params, o.headers),
      body: JSON.stringify({ jsonrpc: "2.0", id: "emceepee-discover", method: "server/discover", params }),
      signal: abort.signal,
    });
    if (response.status === 401 || response.status === 403 || response.status >= 500) {
      await response.body?.cancel().catch(() => undefined);
      return { era: undefined, reason: `server/discover answered HTTP ${response.status}` };
    }
    let answer: Json | undefined;
    await readMessages(response, (m) => {
      if ("id" in m && m.id === "emceepee-discover" && answer === undefined) answer = m;
    }).catch(() => undefined);
    const result = answer?.result as Json | undefined;
    const supported = Array.isArray(result?.supportedVersions) ? (result.supportedVersions as unknown[]) : [];
    const common = MODERN_UPSTREAM_VERSIONS.find((v) => supported.includes(v));
    if (response.ok && result !== undefined && common !== undefined) return { era: "modern", discovered: { version: common, result } };
    return { era: "legacy" };
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    return { era: undefined, reason: err instanceof Error ? err.message : String(err) };
  } finally {
    clock.clearTimeout(timer);
    o.signal?.removeEventListener("abort", onAbort);
  }
}
