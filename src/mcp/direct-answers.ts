/**
 * The relay fast path's HTTP leg (docs/adr/0037): a plain request on a
 * transparent face skips the SDK's Streamable HTTP transport. The message
 * goes straight to the transport's (tapped) `onmessage`; its answer, taken
 * from `transport.send`, is written by the endpoint itself — as one JSON body
 * (`gateway.http.plainJsonResponses`, ADR 0035) or as one SSE event on the
 * POST's own stream (the default), stored for Last-Event-ID replay first as
 * the SDK transport stores it (a priming event, then the answer), so a stream
 * cut before the answer resumes as before.
 *
 * Relies on the SDK's node transport forwarding `onmessage` to its Web
 * transport and on the Protocol sending each response through
 * `transport.send`; a client that resumed a cut stream before its answer came
 * holds a GET stream the SDK registered (private `_streamMapping`,
 * `writeSSEEvent`): the answer goes there. Test:
 * test/integration/relay-fast-path.test.ts (its canary names these members).
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { EventStore, StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isJSONRPCRequest, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, TimerHandle } from "../clock.js";
import { acceptable } from "./json-answers.js";

export interface DirectAnswersOptions {
  /** The Mcp-Session-Id every answer carries. */
  sessionId: string;
  /** Answer with one JSON body (gateway.http.plainJsonResponses); else with one SSE event. */
  json: boolean;
  /** Where SSE events are stored for replay (the binding's store, as the SDK transport's `eventStore`). */
  replay: Pick<EventStore, "storeEvent">;
  /** An SSE comment this often on each SSE answer still waiting (gateway.http.sseKeepAliveMs; 0: none). */
  keepAliveMs: number;
  clock: Clock;
}

/** One request answered here: its HTTP response and, for SSE, its stream id and whether its events are stored for replay. */
interface Pending {
  res: ServerResponse;
  streamId?: string | undefined;
  stored?: boolean;
}

/** The SDK transport's private members a resumed stream is reached through (SDK 1.32). */
interface ResumedStreams {
  _streamMapping?: Map<string, { controller?: unknown; encoder?: unknown; replayedEventIds?: Set<string>; cleanup(): void }>;
  writeSSEEvent?: (controller: unknown, encoder: unknown, message: JSONRPCMessage, eventId?: string) => boolean;
}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache, no-transform", connection: "keep-alive", "x-accel-buffering": "no" };
/** Clients before this version get no priming event (they cannot resume a POST stream), as from the SDK transport. */
const PRIMING_VERSION = "2025-11-25";
/** What the SDK transport assumes without an MCP-Protocol-Version header. */
const DEFAULT_VERSION = "2025-03-26";

/**
 * Plain requests of one transport answered without the SDK's HTTP transport
 * (see the header). Construct it before anything else wraps the transport's
 * `send` (it must be the innermost wrapper, so taps and onResponseSent still
 * see each answer) and before the transport is connected.
 */
export class DirectAnswers {
  private readonly pending = new Map<RequestId, Pending>();
  private closed = false;
  /** SSE answers waiting: their streams get a keep-alive comment while any waits. */
  private waitingSse = 0;
  private keepAlive: TimerHandle | undefined;

  constructor(
    private readonly transport: StreamableHTTPServerTransport,
    private readonly options: DirectAnswersOptions,
  ) {
    const send = transport.send.bind(transport);
    transport.send = (message, sendOptions) => {
      if (this.pending.size > 0) {
        if ("id" in message && ("result" in message || "error" in message) && message.id !== undefined) {
          const p = this.pending.get(message.id);
          if (p) {
            this.pending.delete(message.id);
            return this.deliver(p, message);
          }
        } else if (sendOptions?.relatedRequestId !== undefined) {
          // Something of the request's own before its answer (a notification): an event of its stream (JSON has no room for it).
          const p = this.pending.get(sendOptions.relatedRequestId);
          if (p?.streamId !== undefined) return this.event(p, message, false);
        }
      }
      return send(message, sendOptions);
    };
  }

  /**
   * Takes the POST if `body` (already parsed, and a plain request by the
   * caller's rule) is one well-formed JSON-RPC request whose headers need no
   * error answer: then true, and its answer will be written to `res`.
   * false: nothing was done, the SDK transport handles it (and answers any error).
   */
  answer(req: IncomingMessage, res: ServerResponse, body: unknown): boolean {
    const onmessage = this.transport.onmessage;
    // What the SDK's own schema refuses (an unsafe or fractional id, a non-object _meta, null) is the SDK transport's to answer:
    // taken here, the SDK would drop it and the POST would stay open (fuzz: 640 hostile messages in a session).
    if (this.closed || !onmessage || !isJSONRPCRequest(body)) return false;
    const m = body;
    if (this.pending.has(m.id) || !acceptable(req)) return false;
    const authInfo = (req as IncomingMessage & { auth?: AuthInfo }).auth;
    const dispatch = () => onmessage(body, { ...(authInfo ? { authInfo } : {}), requestInfo: { headers: req.headers } });
    if (this.options.json) {
      this.pending.set(m.id, { res });
      dispatch();
      return true;
    }
    const version = req.headers["mcp-protocol-version"];
    // A client before 2025-11-25 gets no priming event, so it has no cursor to resume this stream with: nothing is stored for it.
    const stored = (typeof version === "string" ? version : DEFAULT_VERSION) >= PRIMING_VERSION;
    const pending: Pending = { res, streamId: randomUUID(), stored };
    this.pending.set(m.id, pending);
    this.waitingSse++;
    this.armKeepAlive();
    res.writeHead(200, { ...SSE_HEADERS, "mcp-session-id": this.options.sessionId });
    if (!stored) {
      dispatch();
      return true;
    }
    // The priming event first (its id is the client's Last-Event-ID until the answer), then the request, as the SDK transport does.
    void this.options.replay.storeEvent(pending.streamId!, {} as JSONRPCMessage).then(
      (eventId) => {
        if (eventId && !res.writableEnded && !res.destroyed) res.write(`id: ${eventId}\ndata: \n\n`);
        dispatch();
      },
      () => dispatch(),
    );
    return true;
  }

  /**
   * `body` is being dispatched: if it cancels a request pending here, that request's HTTP response
   * ends now (the face sends no answer for a cancelled request, and the POST must not stay open).
   */
  cancelling(body: unknown): void {
    if (this.pending.size === 0) return;
    // A batch may carry the cancel.
    if (Array.isArray(body)) {
      for (const item of body) this.cancelling(item);
      return;
    }
    if (typeof body !== "object" || body === null) return;
    const m = body as { method?: unknown; params?: { requestId?: unknown } };
    const id = m.method === "notifications/cancelled" ? m.params?.requestId : undefined;
    if ((typeof id !== "string" && typeof id !== "number") || !this.pending.has(id)) return;
    // Through the transport's whole send (the taps and onResponseSent see it: the id is free again); it ends here.
    void this.transport.send({ jsonrpc: "2.0", id, error: { code: -32800, message: "Request cancelled: the client cancelled this request" } });
  }

  /** The transport closed: what is still pending gets an error answer, so no response stays open. */
  close(): void {
    this.closed = true;
    this.options.clock.clearTimeout(this.keepAlive);
    this.keepAlive = undefined;
    for (const id of [...this.pending.keys()]) {
      void this.transport.send({
        jsonrpc: "2.0",
        id,
        error: { code: -32000, message: "Connection closed: the session ended before this request was answered" },
      });
    }
  }

  private deliver(p: Pending, answer: JSONRPCMessage): Promise<void> {
    if (p.streamId !== undefined) {
      // The last waiting answer: no keep-alive timer is left behind while nothing waits (an injected clock's timers are counted).
      if (--this.waitingSse === 0) {
        this.options.clock.clearTimeout(this.keepAlive);
        this.keepAlive = undefined;
      }
      return this.event(p, answer, true);
    }
    // The client left: the answer is lost (docs/adr/0035 §3).
    if (!p.res.writableEnded && !p.res.destroyed) {
      p.res.writeHead(200, { "content-type": "application/json", "mcp-session-id": this.options.sessionId }).end(JSON.stringify(answer));
    }
    return Promise.resolve();
  }

  /** Stores `message` on p's stream, then writes it there (`last`: and ends it); a stream the client resumed gets it instead. */
  private async event(p: Pending, message: JSONRPCMessage, last: boolean): Promise<void> {
    const streamId = p.streamId!;
    let eventId = "";
    try {
      if (p.stored) eventId = await this.options.replay.storeEvent(streamId, message);
    } catch {
      // Written without an id: the client cannot resume past it (the store logs its own failures).
    }
    const { res } = p;
    // The client resumed the stream (its POST may not look closed here yet): it listens there now.
    if (this.toResumed(streamId, message, eventId, last)) {
      if (last) res.destroy();
      return;
    }
    if (!res.writableEnded && !res.destroyed) {
      const frame = `event: message\n${eventId ? `id: ${eventId}\n` : ""}data: ${JSON.stringify(message)}\n\n`;
      if (last) res.end(frame);
      else res.write(frame);
    }
    // Else the client left and has not resumed yet: the store keeps it for its Last-Event-ID.
  }

  /** A GET that resumed the POST's stream (Last-Event-ID) is held by the SDK transport: the message goes there. false: none. */
  private toResumed(streamId: string, message: JSONRPCMessage, eventId: string, last: boolean): boolean {
    const web = this.resumable;
    const stream = web?._streamMapping?.size ? web._streamMapping.get(streamId) : undefined;
    if (!stream?.controller || !stream.encoder || typeof stream.cleanup !== "function" || typeof web?.writeSSEEvent !== "function") return false;
    if (!eventId || !stream.replayedEventIds?.has(eventId)) web.writeSSEEvent(stream.controller, stream.encoder, message, eventId || undefined);
    if (last) stream.cleanup();
    return true;
  }

  private get resumable(): ResumedStreams | undefined {
    return (this.transport as unknown as { _webStandardTransport?: ResumedStreams })._webStandardTransport;
  }

  /** One timer for every SSE answer waiting here: a comment on each open stream every keepAliveMs, while any waits. */
  private armKeepAlive(): void {
    const { keepAliveMs, clock } = this.options;
    if (keepAliveMs === 0 || this.keepAlive !== undefined) return;
    const tick = () => {
      this.keepAlive = undefined;
      if (this.closed || this.waitingSse === 0) return;
      for (const p of this.pending.values()) if (p.streamId !== undefined && !p.res.writableEnded && !p.res.destroyed) p.res.write(": keepalive\n\n");
      this.keepAlive = clock.setTimeout(tick, keepAliveMs);
    };
    this.keepAlive = clock.setTimeout(tick, keepAliveMs);
  }
}

/** Whether the SDK transport still has the members a resumed stream is reached through (the canary in relay-fast-path.test.ts). */
export function hasResumedStreams(transport: StreamableHTTPServerTransport): boolean {
  const web = (transport as unknown as { _webStandardTransport?: ResumedStreams })._webStandardTransport;
  return web?._streamMapping instanceof Map && typeof web.writeSSEEvent === "function";
}
