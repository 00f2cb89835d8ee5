/**
 * One Streamable HTTP MCP endpoint (/mcp, /all/mcp, /servers/<name>/mcp):
 * maps Mcp-Session-Id to a transport, face server and Session; creates,
 * resumes, attaches, routes and ends them. See
 * docs/design/sessions-and-events.md, "How the code keeps it".
 */
import { principalOf, refreshInboundToken } from "../auth/principal.js";
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, type InitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { sessionHash } from "../logging.js";
import { primeServerTransport, type StoredInitialize } from "../mcp/resume-session.js";
import { onResponseSent } from "../mcp/response-sent.js";
import { watchStandaloneStream } from "../mcp/standalone-listener.js";
import { answerPlainWithJson, isPlainRequest } from "../mcp/json-answers.js";
import { DirectAnswers } from "../mcp/direct-answers.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { mayUseOwned } from "../auth/ownership.js";
import type { Session } from "../session/session.js";
import type { FaceRecord } from "../store/contracts.js";
import { BoundedSseReplayStore, StoredSseReplayStore, type SseReplayStore } from "./sse-replay-store.js";
import { hasEnvelopeClaim, hasModernVersionHeader } from "../mcp/modern/envelope.js";
import type { FaceServer } from "./face-server.js";
import { handleModern, modernMethodNotAllowed } from "./modern-endpoint.js";
import type { ParkedCallRouter } from "./modern-mrtr.js";
import { BodyRejected, BodyTooLargeError, parseJsonRpcBody, readBody, sendErrorReply, sendJsonRpcError } from "./json-rpc.js";

export interface EndpointOptions {
  /** Builds the face for a session; may connect upstreams first. */
  face(session: Session, init: InitializeRequest["params"]): FaceServer | Promise<FaceServer>;
  /**
   * Connect new sessions to every upstream in the background at once (meta
   * face with `gateway.upstream.eagerConnect`); otherwise each upstream
   * connects when the session first needs it.
   */
  connectAll: boolean;
  /** Accept `?session=<id>` to attach to an existing session. */
  attachable?: boolean;
  /** The face this endpoint serves, as session records name it: a stored session resumes only where it was created. */
  kind: FaceRecord;
  /**
   * Called once per transport, after its face's server is connected to it
   * (observability: src/observability/instrument-server.ts). `protocolVersion`
   * is the stored one of a resumed session.
   */
  tap?: ((transport: StreamableHTTPServerTransport, session: Session, protocolVersion?: string) => void) | undefined;
  /** Replicas (docs/adr/0013): asked about sessions this process does not hold. Absent: a single gateway. */
  router?: SessionRouter | undefined;
}

/**
 * Where a request of a session this process does not hold goes (src/cluster):
 * forwarded to the replica that holds it (`answered`), or served here
 * (`local`, with the body if the router read it) — then resumed from the store;
 * and a modern retry of a call parked on another replica (ParkedCallRouter).
 */
export interface SessionRouter extends ParkedCallRouter {
  route(req: IncomingMessage, res: ServerResponse, sessionId: string): Promise<RouteDecision>;
  /** A session was created here; resolves once other replicas can find it. */
  created(sessionId: string): Promise<void>;
}

export type RouteDecision = { kind: "answered" } | { kind: "local"; body?: string | undefined };

interface Binding {
  transport: StreamableHTTPServerTransport;
  server: FaceServer;
  session: Session;
  /** The binding that created the session ends it; attached ones only detach. */
  owner: boolean;
  /** Ids of this binding's requests still being answered. */
  inflight: Set<string>;
  /** SSE messages kept for Last-Event-ID replay (in the store for an owner, in memory for an attachment). */
  replay: SseReplayStore;
  /** Plain requests answered without the SDK's HTTP transport (transparent faces, docs/adr/0037). */
  direct?: DirectAnswers | undefined;
  /** An attachment's own activity (its requests are not the session's): last request or response end, responses open. */
  guest?: { lastActivityAt: number; open: number };
}

/** Why a resumption could not produce a binding: the HTTP status to answer with, and the error. */
class ResumeFailed {
  constructor(
    readonly status: number,
    readonly error: unknown,
  ) {}
}

export class McpEndpoint {
  private readonly bindings = new Map<string, Binding>();
  /** Resumptions of stored sessions under way, by session id (concurrent first requests share one). */
  private readonly resumptions = new Map<string, Promise<Binding | ResumeFailed | undefined>>();
  /** Attachments held or being made, by session id (sessions.maxAttachmentsPerSession). */
  private readonly attachments = new Map<string, number>();
  /** close() ran: the bindings it cleared are the shutdown's, not failed initializes. */
  private closed = false;

  constructor(
    private readonly gateway: GatewayContext,
    private readonly options: EndpointOptions,
  ) {}

  get sessionCount(): number {
    return this.bindings.size;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A modern MCP-Protocol-Version: the 2026-07-28 path; Mcp-Session-Id and Last-Event-ID are ignored (docs/adr/0032).
    if (hasModernVersionHeader(req)) {
      if (req.method !== "POST") return modernMethodNotAllowed(res);
      const modern = await this.readJson(req, res);
      if (modern === NO_BODY) return;
      return handleModern(this.gateway, this.options, req, res, modern);
    }
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId !== undefined) {
      // Not an id this gateway makes: unknown, answered before any lookup (no store read, no Redis key; docs/adr/0013).
      if (!isGatewaySessionId(sessionId)) return sessionNotFound(res, sessionId);
      const caller = principalOf(req);
      // A session not held here is checked against its stored owner before anything acts on the id: another
      // principal's request resumes, adopts or forwards nothing (design EV-14).
      if (!this.bindings.has(sessionId)) {
        let stored;
        try {
          stored = await this.gateway.store.sessions.get(sessionId);
        } catch (err) {
          return sendErrorReply(res, 503, err, this.gateway.logger);
        }
        if (stored && !mayUseOwned(stored.owner, caller)) return sessionNotFound(res, sessionId);
      }
      let preread: string | undefined;
      const router = this.options.router;
      if (router && !this.bindings.has(sessionId)) {
        const decision = await router.route(req, res, sessionId);
        if (decision.kind === "answered") return;
        preread = decision.body;
      } else router?.seen(sessionId);
      const binding = this.bindings.get(sessionId) ?? (await this.resumed(sessionId));
      if (binding instanceof ResumeFailed) return sendErrorReply(res, binding.status, binding.error, this.gateway.logger);
      // Another principal's session is answered as an unknown one (it does not learn the id exists).
      if (!binding || !mayUseOwned(binding.session.principal, caller)) return sessionNotFound(res, sessionId);
      refreshInboundToken(binding.session.principal, caller); // passthrough upstreams send the newest token (docs/adr/0027 §14)
      const guest = binding.guest;
      if (guest) {
        guest.lastActivityAt = this.gateway.clock.now();
        guest.open++;
        res.once("close", () => {
          guest.open--;
          guest.lastActivityAt = this.gateway.clock.now();
        });
      } else {
        this.gateway.sessions.requestArrived(binding.session);
        res.once("close", this.gateway.sessions.responseOpened(binding.session));
      }
      if (req.method === "GET") {
        let unknown: boolean;
        try {
          unknown = await unknownLastEventId(req, binding);
        } catch (err) {
          return sendErrorReply(res, 503, err, this.gateway.logger);
        }
        if (unknown) {
          return sendJsonRpcError(
            res,
            400,
            -32000,
            "Bad Request: Last-Event-ID is not an event of this session's streams: it was evicted (gateway.http.replayMaxEvents/replayMaxBytes), the store lost it (a memory store, or a Redis without persistence, restarted), or it was never this session's. That stream cannot be resumed. Open a new GET stream without Last-Event-ID and send the request again if its response never came.",
          );
        }
      }
      if (req.method !== "POST") return binding.transport.handleRequest(req, res);
      const parsed = await this.readJson(req, res, preread);
      if (parsed === NO_BODY) return;
      // A request id reused while the first request with it is still running would hijack the
      // first one's response stream in the SDK transport (which then never answers it): refuse it.
      const ids = requestIds(parsed);
      const busy = ids.find((id, i) => binding.inflight.has(id) || ids.indexOf(id) !== i);
      if (busy !== undefined) {
        return sendJsonRpcError(
          res,
          409,
          -32600,
          `Invalid Request: request id ${busy} is still in use by a request of this session that has not been answered; use a new id`,
        );
      }
      for (const id of ids) binding.inflight.add(id);
      // An id is free again once its response is sent (onResponseSent below), or when the
      // HTTP layer refused the request outright; a dropped stream does not stop the request.
      res.once("close", () => {
        if (res.statusCode >= 400) ids.forEach((id) => binding.inflight.delete(id));
      });
      // The relay fast path (docs/adr/0037): a plain request skips the SDK's HTTP transport (answered with JSON or one SSE event).
      if (binding.direct && isPlainRequest(parsed, clientCapabilities(binding.server)) && binding.direct.answer(req, res, parsed)) return;
      binding.direct?.cancelling(parsed);
      await binding.transport.handleRequest(req, res, parsed);
      return;
    }
    if (req.method !== "POST") {
      return sendJsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required (start a session with an initialize POST)");
    }
    const body = await this.readJson(req, res);
    if (body === NO_BODY) return;
    if (hasEnvelopeClaim(body)) return handleModern(this.gateway, this.options, req, res, body);
    if (!isInitializeRequest(body)) {
      return sendJsonRpcError(
        res,
        400,
        -32000,
        "Bad Request: Mcp-Session-Id header is required; the first request of a session must be a single initialize request",
      );
    }
    // Without an id the initialize is a notification: it gets no answer, so no session id either.
    const id = (body as { id?: unknown }).id;
    if (typeof id !== "string" && typeof id !== "number") {
      return sendJsonRpcError(res, 400, -32600, "Invalid Request: initialize is a request and needs an id (a string or number)");
    }
    const attachTo = this.options.attachable ? new URL(req.url ?? "/", "http://x").searchParams.get("session") : null;
    let session: Session;
    let owner = true;
    if (attachTo) {
      const existing = this.gateway.sessions.get(attachTo);
      if (!existing || !mayUseOwned(existing.principal, principalOf(req))) {
        return sendJsonRpcError(
          res,
          404,
          -32001,
          `Session not found: cannot attach to '${attachTo}' (after a gateway restart, a session is back once its own client sends a request)`,
        );
      }
      const refused = this.reserveAttachment(existing);
      if (refused) return sendErrorReply(res, 503, refused, this.gateway.logger);
      session = existing;
      owner = false;
    } else {
      try {
        const principal = principalOf(req);
        session = this.gateway.sessions.create({
          id: randomUUID(),
          downstreamCapabilities: body.params.capabilities,
          face: this.options.kind,
          connect: this.options.connectAll,
          principal,
        });
      } catch (err) {
        // The caller's own limit is 429 (its sessions are its to close); the gateway's are 503.
        const own = err instanceof GatewayError && err.code === ErrorCodes.PRINCIPAL_LIMIT;
        return sendErrorReply(res, own ? 429 : 503, err, this.gateway.logger);
      }
    }
    if (owner) res.once("close", this.gateway.sessions.responseOpened(session));
    let server: FaceServer;
    try {
      server = await this.options.face(session, body.params);
    } catch (err) {
      if (owner) await this.gateway.sessions.destroy(session.id, "face could not start");
      else this.freeAttachment(session.id);
      return sendErrorReply(res, 502, err, this.gateway.logger);
    }
    // The session ended while the attachment's face started (release() had no binding to end then).
    if (!owner && this.gateway.sessions.get(session.id) !== session) {
      this.freeAttachment(session.id);
      await server.close().catch(() => undefined);
      return sendJsonRpcError(res, 404, -32001, `Session not found: session '${session.id}' ended while attaching to it`);
    }
    if (owner) {
      const { protocolVersion, clientInfo, capabilities } = body.params;
      const owner = session.principal && { issuer: session.principal.issuer, subject: session.principal.subject };
      const start = {
        face: this.options.kind,
        protocolVersion: negotiated(protocolVersion),
        clientInfo,
        clientCapabilities: capabilities,
        ...(owner ? { owner } : {}),
      };
      try {
        // Stored before the client learns the id: a session it was told about can always resume.
        await this.gateway.sessions.persist(session, start);
        await this.options.router?.created(session.id);
      } catch (err) {
        await this.gateway.sessions.destroy(session.id, "its record could not be stored");
        await server.close().catch(() => undefined);
        return sendErrorReply(res, 503, err, this.gateway.logger);
      }
    }
    const transportId = owner ? session.id : randomUUID();
    const transport = this.newTransport(transportId, session, server, owner, true);
    await server.connect(transport);
    this.options.tap?.(transport, session);
    await transport.handleRequest(req, res, body);
    // The SDK sets the transport's session id exactly when it accepts the initialize (and answers with the id).
    const initialized = transport.sessionId !== undefined;
    if (initialized && this.closed) {
      // The gateway shut down while the initialize ran or its answer was written: the client may hold the id, so the
      // record stays for the next start. A binding made after close() cleared the map is ended here, not as a client's close.
      const late = this.bindings.get(transportId);
      this.bindings.delete(transportId);
      await server.close().catch(() => undefined);
      await late?.replay.close();
      if (owner) this.gateway.logger.info({ sessionHash: sessionHash(session.id) }, "session_kept_at_shutdown");
    } else if (!initialized) {
      // The transport rejected the initialize: keep nothing (a priming event may have been stored). During a shutdown the
      // sessions part may already have ended the session keeping its record (destroy is then a no-op): delete it too.
      if (owner) {
        await this.gateway.sessions.destroy(session.id, "initialize failed");
        await this.gateway.store.sessions.delete(session.id).catch(() => undefined);
        await this.gateway.store.replay.deleteBySession(session.id).catch(() => undefined);
      } else this.freeAttachment(session.id);
      await server.close().catch(() => undefined);
    } else if (!owner && this.gateway.sessions.get(session.id) !== session) {
      // The session ended while the attachment initialized: it ends with it, as in release().
      this.release(session.id);
    }
  }

  /**
   * A transport whose initialize (real or replayed) binds `transportId` to the session and face server; `fresh`: the
   * session was created by this initialize (nothing of it can be stored yet).
   */
  private newTransport(transportId: string, session: Session, server: FaceServer, owner: boolean, fresh = false): StreamableHTTPServerTransport {
    const inflight = new Set<string>();
    const { replayMaxEvents: maxEvents, replayMaxBytes: maxBytes } = this.gateway.settings.http;
    // An owner's streams are resumable across restarts and replicas; an attachment's are not (it is not resumed).
    const replay: SseReplayStore = owner
      ? new StoredSseReplayStore(this.gateway.store, session.id, { maxEvents, maxBytes }, session.logger, fresh)
      : new BoundedSseReplayStore(maxEvents, maxBytes);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => transportId,
      maxRequestBodySize: this.gateway.settings.http.maxBodyBytes,
      // SSE comment frames keep idle streams (a long call without progress) open through proxies.
      keepAliveMs: this.gateway.settings.http.sseKeepAliveMs,
      eventStore: replay,
      onsessioninitialized: (id) => {
        const guest = owner ? undefined : { lastActivityAt: this.gateway.clock.now(), open: 0 };
        this.bindings.set(id, { transport, server, session, owner, inflight, replay, direct, ...(guest ? { guest } : {}) });
      },
    });
    // First: its send wrapper must be the innermost (docs/adr/0037).
    const { http, transparent } = this.gateway.settings;
    // The meta face too (docs/adr/0043): its execute_tool runs behind the same onmessage, promotion included.
    const direct = transparent.fastPath
      ? new DirectAnswers(transport, {
          sessionId: transportId,
          json: http.plainJsonResponses,
          replay,
          keepAliveMs: http.sseKeepAliveMs,
          clock: this.gateway.clock,
        })
      : undefined;
    onResponseSent(transport, (id) => inflight.delete(JSON.stringify(id)));
    // A request that belongs to no call waits for the client's GET stream (docs/adr/0047).
    watchStandaloneStream(transport);
    // Plain requests answered with one JSON body: no SSE stream, nothing stored for replay (docs/adr/0035).
    if (http.plainJsonResponses) answerPlainWithJson(transport, (body) => isPlainRequest(body, clientCapabilities(server)));
    transport.onclose = () => {
      direct?.close();
      const binding = this.bindings.get(transportId);
      if (!binding) return;
      this.bindings.delete(transportId);
      if (!binding.owner) {
        this.freeAttachment(session.id);
        return void binding.replay.release();
      }
      void this.gateway.sessions.destroy(session.id, "client closed the session").then(() => binding.replay.release());
    };
    return transport;
  }

  /** The binding of a stored session this process does not know yet (see the header); one resumption per id at a time. */
  private resumed(sessionId: string): Promise<Binding | ResumeFailed | undefined> {
    let pending = this.resumptions.get(sessionId);
    if (!pending) {
      pending = this.resume(sessionId).finally(() => this.resumptions.delete(sessionId));
      this.resumptions.set(sessionId, pending);
    }
    return pending;
  }

  private async resume(sessionId: string): Promise<Binding | ResumeFailed | undefined> {
    const { sessions, logger } = this.gateway;
    let resumed;
    try {
      resumed = await sessions.resume(sessionId, this.options.kind);
    } catch (err) {
      return new ResumeFailed(503, err);
    }
    if (!resumed) return undefined;
    const { session, record } = resumed;
    const init: StoredInitialize = {
      protocolVersion: record.protocolVersion,
      capabilities: record.clientCapabilities,
      clientInfo: (record.clientInfo as StoredInitialize["clientInfo"] | undefined) ?? { name: "unknown", version: "unknown" },
    };
    // A failed resumption keeps the record (and what the session kept): the next request tries again.
    const giveUp = async (status: number, err: unknown, server?: FaceServer): Promise<ResumeFailed> => {
      await sessions.destroy(session.id, "resumption failed", { keepRecords: true });
      await server?.close().catch(() => undefined);
      return new ResumeFailed(status, err);
    };
    let server: FaceServer;
    try {
      server = await this.options.face(session, init);
    } catch (err) {
      return giveUp(502, err);
    }
    const transport = this.newTransport(session.id, session, server, true);
    try {
      await server.connect(transport);
      await primeServerTransport(transport, init, this.gateway.clock);
      // After the synthetic initialize: it is no request of the client's.
      this.options.tap?.(transport, session, record.protocolVersion);
    } catch (err) {
      logger.error({ err: errorMessage(err) }, "session_resume_failed");
      return giveUp(500, err, server);
    }
    session.logger.info({ face: record.face.kind, idleMs: this.gateway.clock.now() - record.lastActivityAt }, "session_resumed");
    return this.bindings.get(session.id);
  }

  /** A session was destroyed (idle expiry, shutdown, owner closed): close its transports here. */
  release(sessionId: string): void {
    for (const [id, binding] of this.bindings) {
      if (binding.session.id !== sessionId) continue;
      this.bindings.delete(id);
      if (!binding.owner) this.freeAttachment(sessionId);
      void binding.server.close().catch(() => undefined);
      // Its replay goes too when the session ended for good (see SseReplayStore.release).
      void binding.replay.release();
    }
  }

  /**
   * Takes an attachment slot of `session`, first freeing the slots of its
   * attachments idle for sessions.oneShotIdleMs; the error to answer when
   * all sessions.maxAttachmentsPerSession are held.
   */
  private reserveAttachment(session: Session): GatewayError | undefined {
    const { maxAttachmentsPerSession: max, oneShotIdleMs } = this.gateway.settings.sessions;
    const now = this.gateway.clock.now();
    for (const [id, b] of [...this.bindings]) {
      if (b.session !== session || !b.guest || b.guest.open > 0 || now - b.guest.lastActivityAt < oneShotIdleMs) continue;
      this.bindings.delete(id);
      this.freeAttachment(session.id);
      void b.server.close().catch(() => undefined);
      void b.replay.release();
    }
    const held = this.attachments.get(session.id) ?? 0;
    if (held >= max) {
      return new GatewayError(
        ErrorCodes.LIMIT_REACHED,
        `session already has ${held} attached meta faces (gateway.sessions.maxAttachmentsPerSession is ${max}); end one with DELETE and its Mcp-Session-Id, wait until one is idle for gateway.sessions.oneShotIdleMs, or raise the setting`,
      );
    }
    this.attachments.set(session.id, held + 1);
    return undefined;
  }

  /** Attachment slots of `sessionId` held here (design LM-1). */
  attachmentsOf(sessionId: string): number {
    return this.attachments.get(sessionId) ?? 0;
  }

  private freeAttachment(sessionId: string): void {
    const held = this.attachments.get(sessionId) ?? 0;
    if (held <= 1) this.attachments.delete(sessionId);
    else this.attachments.set(sessionId, held - 1);
  }

  /** The POST body as JSON, or NO_BODY after answering 413 / a parse error / a body refused by parseJsonRpcBody. */
  private async readJson(req: IncomingMessage, res: ServerResponse, preread?: string): Promise<unknown> {
    const { maxBodyBytes, maxJsonDepth } = this.gateway.settings.http;
    try {
      return parseJsonRpcBody(preread ?? (await readBody(req, maxBodyBytes)), maxJsonDepth);
    } catch (err) {
      if (err instanceof BodyTooLargeError) sendJsonRpcError(res, 413, -32600, err.message);
      else if (err instanceof BodyRejected) {
        if (err.gatewayError) sendErrorReply(res, err.status, err.gatewayError);
        else sendJsonRpcError(res, err.status, err.code, err.message);
      } else sendJsonRpcError(res, 400, -32700, `Parse error: ${errorMessage(err)}`);
      return NO_BODY;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.bindings.values()];
    this.bindings.clear();
    this.attachments.clear();
    // Shutting down: the sessions' records and stored replay stay for the next start.
    await Promise.allSettled(all.flatMap((b) => [b.server.close(), b.replay.close()]));
  }
}

const NO_BODY = Symbol("no body");

/** The ids this endpoint makes (randomUUID). */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether an Mcp-Session-Id has the form of the ids this gateway makes; any other is unknown (404) without a lookup. */
export function isGatewaySessionId(id: string): boolean {
  return SESSION_ID.test(id);
}

/**
 * 404 for an unknown (or ended, or foreign-format) session: the Streamable HTTP spec's answer for a session
 * id the server does not know, on which the client starts a new session. The id is quoted only when short.
 */
function sessionNotFound(res: ServerResponse, sessionId: string): void {
  const named = sessionId.length <= 64 ? `'${sessionId}'` : `the given id (${sessionId.length} characters)`;
  sendJsonRpcError(
    res,
    404,
    -32001,
    `Session not found: ${named} does not exist here or has expired; send initialize without Mcp-Session-Id to start a new session`,
  );
}

/** The protocol version the SDK server answers an initialize with (the client's when supported, else the latest). */
function negotiated(requested: string): string {
  return SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
}

/** A GET resuming a stream with a Last-Event-ID this binding never issued (or has evicted). */
async function unknownLastEventId(req: IncomingMessage, binding: Binding): Promise<boolean> {
  const header = req.headers["last-event-id"];
  const lastEventId = Array.isArray(header) ? header[0] : header;
  return lastEventId !== undefined && lastEventId !== "" && (await binding.replay.getStreamIdForEventId(lastEventId)) === undefined;
}

/** The client's capabilities as its face server knows them: a transparent face is an SDK Server, the meta face an McpServer around one. */
function clientCapabilities(server: FaceServer): Record<string, unknown> | undefined {
  type Caps = Partial<{ getClientCapabilities(): Record<string, unknown> | undefined }>;
  const face = server as Caps & { server?: Caps };
  return face.getClientCapabilities?.() ?? face.server?.getClientCapabilities?.();
}

/** The ids (as JSON, so 1 and "1" differ) of the requests in a POST body — one message or a batch. */
function requestIds(body: unknown): string[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((m: unknown) => {
    if (!m || typeof m !== "object" || !("method" in m) || !("id" in m)) return [];
    return typeof m.id === "string" || typeof m.id === "number" ? [JSON.stringify(m.id)] : [];
  });
}
