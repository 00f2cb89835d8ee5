/**
 * SDK seam — plain requests answered with one JSON body instead of an SSE
 * stream (issue 27, docs/adr/0035): nothing is framed as SSE, stored for
 * replay or kept alive for them. The SDK transport picks JSON or SSE per
 * transport; this makes it pick per POST, for the bodies `plain` accepts
 * (the caller decides that nothing related to them can be sent: no progress
 * token, no task, no client capability a server→client request needs).
 *
 * Relies on private members of the SDK's WebStandardStreamableHTTPServerTransport
 * (1.32): `_enableJsonResponse`, read synchronously from the start of
 * `handlePostRequest` (with a parsed body) to its JSON-or-SSE choice and from
 * the start of `send` to a JSON stream's answer; `_requestToStreamMapping`
 * and `_streamMapping` (a JSON stream has `resolveJson`). If they are missing,
 * nothing is installed and every request keeps its SSE stream.
 * Canary: test/integration/json-answers.test.ts.
 *
 * The transparent faces go further (docs/adr/0037): such a POST skips the
 * SDK's HTTP transport altogether (direct-answers.ts).
 */
import type { IncomingMessage } from "node:http";
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { SUPPORTED_PROTOCOL_VERSIONS, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import { accepts, isMediaType } from "./media-type.js";

interface WebTransportInternals {
  _enableJsonResponse?: unknown;
  _requestToStreamMapping?: Map<RequestId, string>;
  _streamMapping?: Map<string, { resolveJson?: unknown }>;
  handlePostRequest?: (req: Request, options?: { parsedBody?: unknown }) => Promise<Response>;
  send?: (message: JSONRPCMessage, options?: { relatedRequestId?: RequestId }) => Promise<void>;
}

/** Answers the POSTs whose parsed body `plain` accepts with JSON. Returns false (nothing installed) if the SDK's internals are not as expected. */
export function answerPlainWithJson(transport: StreamableHTTPServerTransport, plain: (body: unknown) => boolean): boolean {
  const web = (transport as unknown as { _webStandardTransport?: WebTransportInternals })._webStandardTransport;
  if (
    !web ||
    web._enableJsonResponse !== false ||
    !(web._requestToStreamMapping instanceof Map) ||
    !(web._streamMapping instanceof Map) ||
    typeof web.handlePostRequest !== "function" ||
    typeof web.send !== "function"
  )
    return false;
  const requests = web._requestToStreamMapping;
  const streams = web._streamMapping;
  // true only inside the synchronous part of one handlePostRequest or send call (see the header).
  let json = false;
  Object.defineProperty(web, "_enableJsonResponse", { get: () => json, set: () => undefined, configurable: true });
  const handlePost = web.handlePostRequest.bind(web);
  web.handlePostRequest = (req, options) => {
    json = options?.parsedBody !== undefined && plain(options.parsedBody);
    try {
      return handlePost(req, options);
    } finally {
      json = false;
    }
  };
  const send = web.send.bind(web);
  web.send = (message, options) => {
    const id = options?.relatedRequestId ?? ("id" in message && ("result" in message || "error" in message) ? message.id : undefined);
    const streamId = id === undefined ? undefined : requests.get(id);
    json = streamId !== undefined && streams.get(streamId)?.resolveJson !== undefined;
    try {
      return send(message, options);
    } finally {
      json = false;
    }
  };
  return true;
}

/** Client capabilities under which the gateway may send a request to the client related to one of its requests. */
const ASKABLE = ["elicitation", "sampling", "roots"] as const;

/**
 * Whether `body` is one plain request: not initialize, no progress token, not
 * task-augmented, from a client that cannot be asked anything (`capabilities`
 * without elicitation, sampling or roots) — so only its response can follow.
 */
export function isPlainRequest(body: unknown, capabilities: Record<string, unknown> | undefined): boolean {
  if (!capabilities || ASKABLE.some((c) => capabilities[c] !== undefined)) return false;
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const m = body as { id?: unknown; method?: unknown; params?: { task?: unknown; _meta?: { progressToken?: unknown } } };
  if (m.id === undefined || typeof m.method !== "string" || m.method === "initialize") return false;
  const params = m.params;
  if (params === undefined) return true;
  if (typeof params !== "object" || params === null) return false;
  return params.task === undefined && params._meta?.progressToken === undefined;
}

/** The headers the SDK transport would accept for a POST after initialize (else it answers 406, 415 or 400 itself). */
export function acceptable(req: IncomingMessage): boolean {
  // Only what the SDK transport would take too (it wants both types named): anything else goes its way and gets its error.
  const accept = req.headers.accept;
  if (!accepts(accept, "application/json", { wildcards: false }) || !accepts(accept, "text/event-stream", { wildcards: false })) return false;
  if (!isMediaType(req.headers["content-type"], "application/json")) return false;
  const version = req.headers["mcp-protocol-version"];
  return version === undefined || (typeof version === "string" && SUPPORTED_PROTOCOL_VERSIONS.includes(version));
}
