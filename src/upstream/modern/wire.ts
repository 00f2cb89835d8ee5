/**
 * The 2026-07-28 wire as the gateway speaks it to an upstream: the
 * per-request envelope, the routing headers, how an answer (JSON or SSE) is
 * read, and how a modern result is shown to the gateway's 2025-era client.
 * Plain JSON, no SDK v2 import. See docs/design/protocol-eras-upstream.md.
 */
import { createParser } from "eventsource-parser";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { isMediaType } from "../../mcp/media-type.js";

/** The modern revisions the gateway speaks to upstreams, newest first. */
export const MODERN_UPSTREAM_VERSIONS: readonly string[] = ["2026-07-28"];
export const PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion";
export const CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities";
export const CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo";
export const LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel";
export const SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo";
/** JSON-RPC code of the modern ladder: the request's protocol version is not supported (data.supported lists those that are). */
export const UNSUPPORTED_VERSION = -32022;
/** Methods whose result may be `input_required` (SEP-2322). */
export const MRTR_METHODS: ReadonlySet<string> = new Set(["tools/call", "prompts/get", "resources/read"]);

export type Json = Record<string, unknown>;

/** The `Mcp-Name` of a request: the tool or prompt name, the resource URI, the task id. */
export function mcpName(method: string, params: Json | undefined): string | undefined {
  const pick = (key: string) => (typeof params?.[key] === "string" ? params[key] : undefined);
  if (method === "tools/call" || method === "prompts/get") return pick("name");
  if (method === "resources/read") return pick("uri");
  if (method.startsWith("tasks/")) return pick("taskId");
  return undefined;
}

/** HTTP headers of one modern request (the config's own headers first). */
export function modernHeaders(version: string, method: string, params: Json | undefined, extra: Record<string, string> = {}): Record<string, string> {
  const name = mcpName(method, params);
  return {
    ...extra,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": version,
    "mcp-method": method,
    // Header values are ASCII: a name outside it goes percent-encoded rather than breaking the request.
    ...(name !== undefined ? { "mcp-name": /^[\x20-\x7e]*$/.test(name) ? name : encodeURIComponent(name) } : {}),
  };
}

/**
 * Reads an answer body: one JSON message, or an SSE stream of them.
 * `onMessage` sees each message in order; resolves when the body ends.
 */
export async function readMessages(response: Response, onMessage: (message: JSONRPCMessage) => void): Promise<void> {
  if (!response.body) return;
  if (!isMediaType(response.headers.get("content-type"), "text/event-stream")) {
    const text = await response.text();
    if (text.trim() === "") return;
    const parsed = JSON.parse(text) as JSONRPCMessage | JSONRPCMessage[];
    for (const message of Array.isArray(parsed) ? parsed : [parsed]) onMessage(message);
    return;
  }
  const parser = createParser({
    onEvent: (event) => {
      if (event.data.trim() === "") return;
      onMessage(JSON.parse(event.data) as JSONRPCMessage);
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
}

/** A modern result as a 2025-era client expects it: without `resultType: "complete"`, `ttlMs` and `cacheScope`. */
export function toLegacyResult(result: Json): Json {
  const { resultType, ttlMs, cacheScope, ...rest } = result;
  void resultType;
  void ttlMs;
  void cacheScope;
  return rest;
}
