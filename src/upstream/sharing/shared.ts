/**
 * SharedUpstream ("sharing": "shared", ADR 0010): one connection serves every
 * session, and what each session sees stays its own. See
 * docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import type { ListToolsResult, LoggingLevel, RequestMeta } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../../errors.js";
import type { Logger } from "../../logging.js";
import type { ServerConfig } from "../../config/server-entry.js";
import type { UpstreamConnection } from "../connection.js";
import type { UpstreamHandlers } from "../client-handlers.js";
import type { CallOrigin } from "../origin.js";
import { SharedUpstreamView, type SharedAttachment, type SharedSide } from "./shared-view.js";
import type { ConnectionPersistence } from "../session-continuation.js";
import type { ReceiverTaskStore } from "../receiver-tasks.js";

/** RFC 5424 severities as MCP names them, least severe first. */
const LEVELS: readonly LoggingLevel[] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
const severity = (level: string): number => LEVELS.indexOf(level as LoggingLevel);

/**
 * Makes a new connection for the shared upstream (the upstream factory's; a
 * call per connect). The shared upstream gives the handlers and persistence;
 * the connection's receiver tasks (if any) are closed by the shared upstream.
 */
export type NewSharedConnection = (parts: { handlers: UpstreamHandlers; persistence: ConnectionPersistence }) => UpstreamConnection;

export class SharedUpstream implements SharedSide {
  private conn: UpstreamConnection | undefined;
  private connecting: Promise<UpstreamConnection> | undefined;
  private readonly views = new Set<SharedUpstreamView>();
  /** Which session's view each call in flight came from (every call through a view has an origin). */
  private readonly owners = new WeakMap<CallOrigin, SharedUpstreamView>();
  private readonly subscribers = new Map<string, Set<SharedUpstreamView>>();
  /** The level the upstream accepted last (on this connection). */
  private upstreamLevel: LoggingLevel | undefined;
  private closed = false;
  /** The first page of tools/list on this connection, until the upstream says the list changed (one fetch for every session). */
  private tools: Promise<ListToolsResult> | undefined;
  /** Receiver stores of earlier connections still deleting their rows (close() waits). */
  private readonly closingReceivers = new Set<Promise<void>>();
  /** The receiver tasks of the current connection (task-augmented elicitation/sampling; each forwarded to the session its call came from). */
  private receivers: ReceiverTaskStore | undefined;

  constructor(
    readonly name: string,
    /** The config this connection is for (a change retires it: shared-upstreams.ts). */
    readonly config: ServerConfig,
    private readonly newConnection: NewSharedConnection,
    /** Each view's default request timeout. */
    private readonly requestTimeoutMs: number,
    private readonly logger: Logger,
    /** The last session detached (the owner may retire the connection). */
    private readonly onEmpty?: (shared: SharedUpstream) => void,
  ) {}

  private failure: string | undefined;

  /** Why the last connection failed or dropped, while a new one is connecting (until it connects). */
  get lastFailure(): string | undefined {
    return this.failure;
  }

  /** The current connection, in whatever state. */
  get connection(): UpstreamConnection | undefined {
    return this.conn;
  }

  /** Sessions attached. */
  get attached(): number {
    return this.views.size;
  }

  attach(attachment: SharedAttachment): SharedUpstreamView {
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, `the shared connection to '${this.name}' is closed`);
    const view = new SharedUpstreamView(this, attachment, this.requestTimeoutMs);
    this.views.add(view);
    return view;
  }

  /** The live connection, connecting once for every caller (sessions reconnecting after a drop share the attempt). */
  async connect(): Promise<UpstreamConnection> {
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, `the shared connection to '${this.name}' is closed`);
    if (this.conn?.status === "connected") return this.conn;
    this.connecting ??= (async () => {
      // Why the one replaced failed stays told until the new one connects (list_servers: `connecting` and lastError).
      if (this.conn?.lastError !== undefined) this.failure = this.conn.lastError;
      const conn = this.newConnection({ handlers: this.dispatcher(), persistence: this.persistence() });
      this.tools = undefined;
      this.closeReceivers();
      this.receivers = conn.receiverTasks;
      // A failed connection stays, for its status and lastError, until the next attempt replaces it.
      this.conn = conn;
      await conn.connect();
      if (this.closed) {
        await conn.close();
        throw new GatewayError(ErrorCodes.CLOSED, `the shared connection to '${this.name}' was closed while connecting`);
      }
      this.failure = undefined;
      this.logger.info({ server: this.name, sessions: this.views.size }, "shared_upstream_connected");
      return conn;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /**
   * The first tools/list page, fetched once for all sessions (`fetch` sends
   * it through the asking view): each fetch makes the SDK client compile
   * every tool's output-schema validator again, which dominated the cost of
   * opening a session on a shared upstream (bench/fan-in.bench.ts).
   */
  firstToolsPage(fetch: () => Promise<ListToolsResult>): Promise<ListToolsResult> {
    if (!this.tools) {
      const tools = fetch();
      this.tools = tools;
      tools.catch(() => {
        if (this.tools === tools) this.tools = undefined;
      });
    }
    return this.tools;
  }

  /** A call of `view` is about to be sent with `origin`. */
  own(origin: CallOrigin, view: SharedUpstreamView): void {
    this.owners.set(origin, view);
  }

  /** One session leaves: its subscriptions and level stop counting. The connection stays. */
  async detach(view: SharedUpstreamView): Promise<void> {
    if (!this.views.delete(view)) return;
    const gone: string[] = [];
    for (const [uri, views] of this.subscribers) {
      if (views.delete(view) && views.size === 0) gone.push(uri);
    }
    for (const uri of gone) {
      this.subscribers.delete(uri);
      await this.conn?.unsubscribeResource(uri).catch(() => undefined);
    }
    await this.applyLevel().catch(() => undefined);
    if (this.views.size === 0) this.onEmpty?.(this);
  }

  /** `view` subscribes to `uri`: the upstream subscription is sent by the first subscriber only. */
  async subscribe(view: SharedUpstreamView, uri: string, _meta?: RequestMeta): Promise<void> {
    const views = this.subscribers.get(uri);
    if (views?.size) {
      views.add(view);
      return;
    }
    await this.live().subscribeResource(uri, _meta);
    const now = this.subscribers.get(uri) ?? new Set<SharedUpstreamView>();
    if (this.views.has(view)) now.add(view);
    if (now.size) this.subscribers.set(uri, now);
    // The session left while the subscribe was on its way, and nobody else holds the URI.
    else await this.conn?.unsubscribeResource(uri).catch(() => undefined);
  }

  /** `view` unsubscribes from `uri`: the upstream unsubscribe is sent when no session is left. */
  async unsubscribe(view: SharedUpstreamView, uri: string, _meta?: RequestMeta): Promise<void> {
    const views = this.subscribers.get(uri);
    if (!views?.delete(view) || views.size) return;
    this.subscribers.delete(uri);
    await this.live().unsubscribeResource(uri, _meta);
  }

  /** Sets the upstream to the most verbose level any attached session asked for (when that changed). */
  async applyLevel(): Promise<void> {
    const level = this.wantedLevel();
    if (level === undefined || level === this.upstreamLevel || this.conn?.status !== "connected") return;
    await this.conn.setLoggingLevel(level);
  }

  /** The most verbose level an attached session asked for. */
  private wantedLevel(): LoggingLevel | undefined {
    const wanted = [...this.views].flatMap((v) => (v.level === undefined ? [] : [v.level]));
    return wanted.length ? wanted.reduce((a, b) => (severity(b) < severity(a) ? b : a)) : undefined;
  }

  /** Closes the connection (the server was removed or changed, or the gateway closes); views still attached read "closed". */
  async close(): Promise<void> {
    this.closed = true;
    // A connect in progress (the start-up check's, at start) is ended with the connection, not waited for: an upstream
    // that never answers initialize would hold the gateway's shutdown for gateway.upstream.connectTimeoutMs.
    const connecting = this.connecting;
    const ending = connecting ? this.conn?.close() : undefined;
    await connecting?.catch(() => undefined);
    this.closeReceivers();
    await Promise.allSettled(this.closingReceivers);
    await (ending ?? this.conn?.close());
  }

  private closeReceivers(): void {
    const receivers = this.receivers;
    this.receivers = undefined;
    if (!receivers) return;
    const done = receivers.close();
    this.closingReceivers.add(done);
    void done.then(() => this.closingReceivers.delete(done));
  }

  private live(): UpstreamConnection {
    if (this.conn?.status !== "connected") throw this.unavailable();
    return this.conn;
  }

  unavailable(): GatewayError {
    const why = this.conn?.lastError ?? "not connected";
    return new GatewayError(
      ErrorCodes.UPSTREAM_UNAVAILABLE,
      `upstream '${this.name}' is unavailable: ${why}. Check its config with list_servers; it is retried on next use.`,
      { details: { server: this.name } },
    );
  }

  /** What a new connection sets again: the subscriptions and level of the sessions attached. */
  private persistence(): ConnectionPersistence {
    return {
      resume: () => undefined,
      logLevel: () => this.wantedLevel(),
      subscriptions: () => [...this.subscribers.keys()],
      sessionOpened: () => undefined,
      sessionLost: async () => undefined,
      subscriptionChanged: () => undefined,
      loggingLevelSet: (level) => (this.upstreamLevel = level),
    };
  }

  /** The connection's handlers: each message to the session(s) it is for. */
  private dispatcher(): UpstreamHandlers {
    const all = () => [...this.views];
    return {
      onElicit: (params, signal, origin) => this.ownerOf(origin, "elicitation/create").handlers.onElicit(params, signal, origin),
      onSample: (params, signal, origin) => this.ownerOf(origin, "sampling/createMessage").handlers.onSample(params, signal, origin),
      onListRoots: (signal, origin) => this.ownerOf(origin, "roots/list").handlers.onListRoots(signal, origin),
      onNotification: (method, params) => {
        if (method === "notifications/resources/updated") {
          const uri = typeof params?.uri === "string" ? params.uri : undefined;
          for (const view of (uri && this.subscribers.get(uri)) || []) view.handlers.onNotification(method, params);
          return;
        }
        if (method === "notifications/tools/list_changed") this.tools = undefined;
        for (const view of all()) {
          if (method === "notifications/tools/list_changed") view.toolsListChanged();
          view.handlers.onNotification(method, params);
        }
      },
      onLog: (params) => {
        for (const view of all()) if (view.level === undefined || severity(params.level) >= severity(view.level)) view.handlers.onLog(params);
      },
      onStderr: (line) => all().forEach((view) => view.handlers.onStderr(line)),
      onDisconnect: (reason) => {
        this.upstreamLevel = undefined;
        all().forEach((view) => view.handlers.onDisconnect(reason));
      },
    };
  }

  /**
   * The session a server→client request is for: the owner of the call it is
   * attributed to; else, when every call in flight on the connection is one
   * session's, that session (with no origin: as in session mode, its routing
   * cannot tie it to one of its calls either). Otherwise a JSON-RPC error for
   * the upstream (see the header).
   */
  private ownerOf(origin: CallOrigin | undefined, method: string): SharedUpstreamView {
    const view = origin && this.owners.get(origin);
    if (view && this.views.has(view)) return view;
    // A call of a session that has left: its request belongs to nobody here (never to whoever else is calling).
    if (view) throw this.refusal(method, "the session whose call it belongs to has ended");
    const inFlight = this.conn?.viewAccess().attribution?.inFlightOrigins() ?? [];
    const owners = new Set(inFlight.map((o) => (o === undefined ? undefined : this.owners.get(o))));
    const only = owners.size === 1 ? [...owners][0] : undefined;
    if (only && this.views.has(only)) return only;
    throw this.refusal(method, inFlight.length === 0 ? "no call is in flight on it" : `calls of ${owners.size} sessions are in flight on it`, {
      callsInFlight: inFlight.length,
      sessions: owners.size,
    });
  }

  /** The JSON-RPC error an upstream gets for a server→client request no session can be given (logged). */
  private refusal(method: string, why: string, log: Record<string, unknown> = {}): Error {
    this.logger.warn({ server: this.name, method, why, ...log }, "shared_request_unattributable");
    return toJsonRpcError(
      new GatewayError(
        ErrorCodes.UNATTRIBUTABLE,
        `emceepee cannot tell which client session this ${method} request is for: upstream '${this.name}' is shared by all sessions ("sharing": "shared") and ${why}, ` +
          `so it was refused rather than guessed. The gateway's operator can set "sharing": "session" for this server to route every such request.`,
        { details: { server: this.name, method } },
      ),
    );
  }
}
