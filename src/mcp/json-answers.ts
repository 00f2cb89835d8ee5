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
 * `DirectJsonAnswers` goes further for the transparent faces (docs/adr/0037,
 * stage 1): such a POST skips the SDK's HTTP transport altogether — the
 * message goes straight to the transport's (tapped) `onmessage` and its
 * answer, taken from `transport.send`, is the JSON body. Relies on the SDK's
 * node transport forwarding `onmessage` to its Web transport and on the
 * Protocol sending each response through `transport.send` (no private
 * member). Test: test/integration/relay-fast-path.test.ts.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { SUPPORTED_PROTOCOL_VERSIONS, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";

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

/**
 * Plain requests of one transport answered without the SDK's HTTP transport
 * (see the header). Construct it before anything else wraps the transport's
 * `send` (it must be the innermost wrapper, so taps and onResponseSent still
 * see each answer) and before the transport is connected.
 */
export class DirectJsonAnswers {
  private readonly pending = new Map<RequestId, (answer: JSONRPCMessage) => void>();
  private closed = false;

  constructor(
    private readonly transport: StreamableHTTPServerTransport,
    private readonly sessionId: string,
  ) {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      if (this.pending.size > 0 && "id" in message && ("result" in message || "error" in message) && message.id !== undefined) {
        const answer = this.pending.get(message.id);
        if (answer) {
          this.pending.delete(message.id);
          answer(message);
          return Promise.resolve();
        }
      }
      return send(message, options);
    };
  }

  /**
   * Takes the POST if `body` (already parsed, and a plain request by the
   * caller's rule) is one well-formed JSON-RPC request whose headers need no
   * error answer: then true, and its answer will be `res`'s JSON body. false:
   * nothing was done, the SDK transport handles it (and answers any error).
   */
  answer(req: IncomingMessage, res: ServerResponse, body: unknown): boolean {
    const onmessage = this.transport.onmessage;
    if (this.closed || !onmessage) return false;
    const m = body as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    if (m.jsonrpc !== "2.0" || typeof m.method !== "string" || (typeof m.id !== "string" && typeof m.id !== "number")) return false;
    if (m.params !== undefined && (typeof m.params !== "object" || m.params === null || Array.isArray(m.params))) return false;
    if (this.pending.has(m.id) || !acceptable(req)) return false;
    this.pending.set(m.id, (answer) => {
      if (res.writableEnded || res.destroyed) return; // the client left: the answer is lost (docs/adr/0035 §3)
      res.writeHead(200, { "content-type": "application/json", "mcp-session-id": this.sessionId }).end(JSON.stringify(answer));
    });
    const authInfo = (req as IncomingMessage & { auth?: AuthInfo }).auth;
    onmessage(body as JSONRPCMessage, { ...(authInfo ? { authInfo } : {}), requestInfo: { headers: req.headers } });
    return true;
  }

  /**
   * `body` is being dispatched: if it cancels a request pending here, that request's HTTP response
   * ends now (the face sends no answer for a cancelled request, and the POST must not stay open).
   */
  cancelling(body: unknown): void {
    if (this.pending.size === 0) return;
    const m = body as { method?: unknown; params?: { requestId?: unknown } };
    const id = m.method === "notifications/cancelled" ? m.params?.requestId : undefined;
    if ((typeof id !== "string" && typeof id !== "number") || !this.pending.has(id)) return;
    // Through the transport's whole send (the taps and onResponseSent see it: the id is free again); it ends here.
    void this.transport.send({ jsonrpc: "2.0", id, error: { code: -32800, message: "Request cancelled: the client cancelled this request" } });
  }

  /** The transport closed: what is still pending gets an error answer, so no response stays open. */
  close(): void {
    this.closed = true;
    for (const id of [...this.pending.keys()]) {
      void this.transport.send({
        jsonrpc: "2.0",
        id,
        error: { code: -32000, message: "Connection closed: the session ended before this request was answered" },
      });
    }
  }
}

/** The headers the SDK transport would accept for a POST after initialize (else it answers 406, 415 or 400 itself). */
function acceptable(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  if (!accept?.includes("application/json") || !accept.includes("text/event-stream")) return false;
  const type = req.headers["content-type"];
  if (type === undefined || type.split(";", 1)[0]!.trim().toLowerCase() !== "application/json") return false;
  const version = req.headers["mcp-protocol-version"];
  return version === undefined || (typeof version === "string" && SUPPORTED_PROTOCOL_VERSIONS.includes(version));
}
