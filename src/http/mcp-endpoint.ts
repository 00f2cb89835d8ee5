/**
 * One Streamable HTTP MCP endpoint (/mcp, /all/mcp, /servers/<name>/mcp):
 * maps Mcp-Session-Id headers to a transport + face server + gateway
 * Session. An initialize without a session id creates all three; DELETE or
 * the session's destruction (idle expiry, shutdown) ends them. 400 for a
 * missing session header, 404 for an unknown session. Each endpoint keeps its
 * own bindings, so a session id is only valid where it was created.
 *
 * Every request of a session and every open response (a request being
 * answered, a GET stream) is reported to the SessionManager, which tells a
 * returning client from a one-shot one that never came back (session expiry).
 *
 * An attachable endpoint (the meta face) accepts `?session=<id>` on
 * initialize to attach to an existing session of another face, e.g. to answer
 * the elicitations queued for a transparent-face client that cannot take them.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { isInitializeRequest, type InitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../errors.js";
import { onResponseSent } from "../mcp/response-sent.js";
import type { GatewayContext } from "../server/context.js";
import type { Session } from "../session/session.js";
import { BoundedEventStore } from "./event-store.js";
import { BodyTooLargeError, readBody, sendErrorReply, sendJsonRpcError } from "./json-rpc.js";

export interface FaceServer {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}

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
}

interface Binding {
  transport: StreamableHTTPServerTransport;
  server: FaceServer;
  session: Session;
  /** The binding that created the session ends it; attached ones only detach. */
  owner: boolean;
  /** Ids of this binding's requests still being answered. */
  inflight: Set<string>;
}

export class McpEndpoint {
  private readonly bindings = new Map<string, Binding>();

  constructor(
    private readonly gateway: GatewayContext,
    private readonly options: EndpointOptions,
  ) {}

  get sessionCount(): number {
    return this.bindings.size;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId !== undefined) {
      const binding = this.bindings.get(sessionId);
      if (!binding) {
        return sendJsonRpcError(
          res,
          404,
          -32001,
          `Session not found: '${sessionId}' does not exist here or has expired; send initialize without Mcp-Session-Id to start a new session`,
        );
      }
      this.gateway.sessions.requestArrived(binding.session);
      res.once("close", this.gateway.sessions.responseOpened(binding.session));
      if (req.method !== "POST") return binding.transport.handleRequest(req, res);
      const parsed = await this.readJson(req, res);
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
      await binding.transport.handleRequest(req, res, parsed);
      return;
    }
    if (req.method !== "POST") {
      return sendJsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required (start a session with an initialize POST)");
    }
    const body = await this.readJson(req, res);
    if (body === NO_BODY) return;
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
      if (!existing) return sendJsonRpcError(res, 404, -32001, `Session not found: cannot attach to '${attachTo}'`);
      session = existing;
      owner = false;
    } else {
      try {
        session = this.gateway.sessions.create({ id: randomUUID(), downstreamCapabilities: body.params.capabilities, connect: this.options.connectAll });
      } catch (err) {
        return sendErrorReply(res, 503, err, this.gateway.logger);
      }
    }
    res.once("close", this.gateway.sessions.responseOpened(session));
    let server: FaceServer;
    try {
      server = await this.options.face(session, body.params);
    } catch (err) {
      if (owner) await this.gateway.sessions.destroy(session.id, "face could not start");
      return sendErrorReply(res, 502, err, this.gateway.logger);
    }
    const transportId = owner ? session.id : randomUUID();
    const inflight = new Set<string>();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => transportId,
      maxRequestBodySize: this.gateway.settings.http.maxBodyBytes,
      // SSE comment frames keep idle streams (a long call without progress) open through proxies.
      keepAliveMs: this.gateway.settings.http.sseKeepAliveMs,
      eventStore: new BoundedEventStore(this.gateway.settings.http.replayMaxEvents, this.gateway.settings.http.replayMaxBytes),
      onsessioninitialized: (id) => {
        this.bindings.set(id, { transport, server, session, owner, inflight });
      },
    });
    onResponseSent(transport, (id) => inflight.delete(JSON.stringify(id)));
    transport.onclose = () => {
      const binding = this.bindings.get(transportId);
      if (!binding) return;
      this.bindings.delete(transportId);
      if (binding.owner) void this.gateway.sessions.destroy(session.id, "client closed the session");
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    if (!this.bindings.has(transportId)) {
      // The transport rejected the initialize: keep nothing.
      if (owner) await this.gateway.sessions.destroy(session.id, "initialize failed");
      await server.close().catch(() => undefined);
    }
  }

  /** A session was destroyed (idle expiry, shutdown, owner closed): close its transports here. */
  release(sessionId: string): void {
    for (const [id, binding] of this.bindings) {
      if (binding.session.id !== sessionId) continue;
      this.bindings.delete(id);
      void binding.server.close().catch(() => undefined);
    }
  }

  /** The POST body as JSON, or NO_BODY after answering 413 / a parse error. */
  private async readJson(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
    try {
      return JSON.parse(await readBody(req, this.gateway.settings.http.maxBodyBytes));
    } catch (err) {
      if (err instanceof BodyTooLargeError) sendJsonRpcError(res, 413, -32600, err.message);
      else sendJsonRpcError(res, 400, -32700, `Parse error: ${errorMessage(err)}`);
      return NO_BODY;
    }
  }

  async close(): Promise<void> {
    const all = [...this.bindings.values()];
    this.bindings.clear();
    await Promise.allSettled(all.map((b) => b.server.close()));
  }
}

const NO_BODY = Symbol("no body");

/** The ids (as JSON, so 1 and "1" differ) of the requests in a POST body — one message or a batch. */
function requestIds(body: unknown): string[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((m: unknown) => {
    if (!m || typeof m !== "object" || !("method" in m) || !("id" in m)) return [];
    return typeof m.id === "string" || typeof m.id === "number" ? [JSON.stringify(m.id)] : [];
  });
}
