/**
 * The SDK v2 seam for the 2026-07-28 era (docs/adr/0032-two-protocol-eras.md):
 * the envelope/header rungs of the modern validation ladder and the envelope's
 * key names. Only this folder imports `@modelcontextprotocol/server`; the
 * behaviour relied on is pinned by test/unit/modern-sdk-canary.test.ts.
 *
 * The package is loaded at the first modern message, not at start (docs/adr/0039
 * §6): it is about 0.6 MB of code (with its own copy of ajv) that a gateway
 * serving 2025-era clients never runs. Its CommonJS build is required then, so
 * the ladder stays synchronous for its callers; the key names are literals here
 * (test/integration/start-ready.test.ts pins them to the SDK's).
 */
import type { IncomingMessage } from "node:http";
import { createRequire } from "node:module";
import type * as ModernSdk from "@modelcontextprotocol/server";
import type { InboundClassificationOutcome } from "@modelcontextprotocol/server";

let modernSdk: typeof ModernSdk | undefined;
/** `@modelcontextprotocol/server`, required once, at the first classification. */
function sdk(): typeof ModernSdk {
  return (modernSdk ??= createRequire(import.meta.url)("@modelcontextprotocol/server") as typeof ModernSdk);
}

/** The envelope's `_meta` keys (the SDK's PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY). */
export const PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion";
export const CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities";
export const CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo";

/** The modern revisions the gateway serves. */
export const MODERN_VERSIONS: readonly string[] = ["2026-07-28"];
/** The 2025 revisions served on the sessionful path (SDK 1.32). */
export const LEGACY_VERSIONS: readonly string[] = ["2025-11-25"];
export const ENVELOPE_KEYS = [PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY] as const;

/** A JSON-RPC error the edge answers with, and its HTTP status. */
export interface LadderError {
  httpStatus: number;
  code: number;
  message: string;
  data?: unknown;
}

export type ModernClassification =
  { kind: "request"; id: string | number; method: string; params: Record<string, unknown> } | { kind: "notification" } | { kind: "reject"; error: LadderError };

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A modern `MCP-Protocol-Version` header: a date-named revision from the first modern one on. */
export function hasModernVersionHeader(req: IncomingMessage): boolean {
  const value = header(req, "mcp-protocol-version")?.trim();
  return value !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(value) && value >= "2026-07-28";
}

/** The body claims the per-request envelope (`params._meta[protocolVersion]` present, whatever its value). */
export function hasEnvelopeClaim(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const meta = (body as { params?: { _meta?: unknown } }).params?._meta;
  return typeof meta === "object" && meta !== null && PROTOCOL_VERSION_META_KEY in meta;
}

/** Runs the SDK's era classifier (envelope, version, header rungs) on a POST already judged modern. */
export function classifyModern(req: IncomingMessage, body: unknown): ModernClassification {
  return classify(body, { version: header(req, "mcp-protocol-version"), method: header(req, "mcp-method"), name: header(req, "mcp-name") });
}

/** The same ladder for a message with no headers (the stdio face: the body is the only signal, so no header rung). */
export function classifyModernMessage(body: unknown): ModernClassification {
  return classify(body, undefined);
}

function classify(
  body: unknown,
  headers: { version: string | undefined; method: string | undefined; name: string | undefined } | undefined,
): ModernClassification {
  const protocolVersionHeader = headers?.version;
  const mcpMethodHeader = headers?.method;
  const mcpNameHeader = headers?.name;
  const outcome: InboundClassificationOutcome = sdk().classifyInboundRequest({
    httpMethod: "POST",
    body,
    ...(protocolVersionHeader !== undefined ? { protocolVersionHeader } : {}),
    ...(mcpMethodHeader !== undefined ? { mcpMethodHeader } : {}),
    ...(mcpNameHeader !== undefined ? { mcpNameHeader } : {}),
  });
  if (outcome.kind === "reject") {
    return {
      kind: "reject",
      error: { httpStatus: outcome.httpStatus, code: outcome.code, message: outcome.message, ...(outcome.data !== undefined ? { data: outcome.data } : {}) },
    };
  }
  if (outcome.kind === "legacy") {
    // A modern header on a body without the envelope (a notification, a batch, a response): not servable as modern.
    return {
      kind: "reject",
      error: {
        httpStatus: 400,
        code: -32602,
        message: `Invalid params: a request with MCP-Protocol-Version ${protocolVersionHeader ?? ""} must be a single JSON-RPC request carrying params._meta["${PROTOCOL_VERSION_META_KEY}"] (the per-request envelope); send the envelope, or drop the header to use the 2025-11-25 session path`,
      },
    };
  }
  // The classifier routes any claim to the modern path; which revisions are served is the server's to say.
  const requested = (outcome.message.params?._meta as Record<string, unknown> | undefined)?.[PROTOCOL_VERSION_META_KEY];
  if (typeof requested !== "string" || !MODERN_VERSIONS.includes(requested)) {
    return {
      kind: "reject",
      error: {
        httpStatus: 400,
        code: -32022,
        message: `Unsupported protocol version: ${String(requested)} is not served here; use one of ${[...MODERN_VERSIONS, ...LEGACY_VERSIONS].join(", ")} (the 2025 ones through initialize)`,
        data: { supported: [...MODERN_VERSIONS, ...LEGACY_VERSIONS], requested },
      },
    };
  }
  const mismatch = headers && standardHeaderMismatch(outcome.message.method, outcome.message.params, protocolVersionHeader, mcpMethodHeader, mcpNameHeader);
  if (outcome.messageKind === "request" && mismatch) {
    return { kind: "reject", error: { httpStatus: 400, code: -32020, message: `Header mismatch: ${mismatch}`, data: { header: mismatch } } };
  }
  if (outcome.messageKind === "notification") return { kind: "notification" };
  const { id, method, params } = outcome.message;
  return { kind: "request", id, method, params: params ?? {} };
}

/** The body field `Mcp-Name` mirrors, per method (SEP-2243; SEP-2663 for tasks). */
const NAME_SOURCES: Record<string, string> = {
  "tools/call": "name",
  "prompts/get": "name",
  "resources/read": "uri",
  "tasks/get": "taskId",
  "tasks/update": "taskId",
  "tasks/cancel": "taskId",
};

/**
 * The presence and `Mcp-Name` half of SEP-2243's standard-header rung (the SDK
 * keeps its own copy internal): what is wrong, or undefined when the headers agree.
 */
function standardHeaderMismatch(
  method: string,
  params: Record<string, unknown> | undefined,
  version: string | undefined,
  methodHeader: string | undefined,
  nameHeader: string | undefined,
): string | undefined {
  if (version === undefined) return "the body carries the per-request envelope but the required MCP-Protocol-Version header is absent";
  if (methodHeader === undefined) return `the body names method ${method} but the required Mcp-Method header is absent`;
  const field = NAME_SOURCES[method];
  const value = field !== undefined ? params?.[field] : undefined;
  if (typeof value !== "string") return undefined;
  if (nameHeader === undefined) return `the body carries params.${field}="${value}" but the required Mcp-Name header is absent`;
  const named = decodeHeaderValue(nameHeader.trim());
  if (named === undefined) return "the Mcp-Name header carries an invalid =?base64?...?= value";
  if (named !== value) return `the body carries params.${field}="${value}" but the Mcp-Name header names "${named}"`;
  return undefined;
}

/** A header value, or its `=?base64?<b64>?=` sentinel decoded (undefined when the sentinel is malformed). */
function decodeHeaderValue(value: string): string | undefined {
  const sentinel = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/i.exec(value);
  if (!value.toLowerCase().startsWith("=?base64?")) return value;
  if (!sentinel?.[1]) return undefined;
  return Buffer.from(sentinel[1], "base64").toString("utf8");
}
