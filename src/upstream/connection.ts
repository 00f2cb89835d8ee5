/**
 * UpstreamConnection: one MCP client connection from one downstream session to
 * one upstream server — its lifecycle. It owns the SDK Client and its
 * transport (and a stdio child's slot and stderr tail), answers the
 * upstream's server→client requests through the injected handlers, and
 * reports an unexpected close exactly once. Lifecycle: connect() → (use) →
 * close(); close() first waits for upstream tasks/cancel requests still in
 * flight (each bounded by its timeout). What is sent to the upstream is the
 * request surface it extends (requests.ts); the SDK Client never leaves these
 * two files. Each server→client request reaches the handlers with the origin
 * of the call it belongs to, when the connection's attribution can tell
 * (src/mcp/request-attribution.ts), else undefined.
 *
 * What outlives one connection (ADR 0007, "Sessions across restarts") goes
 * through the owner's ConnectionPersistence: a Streamable HTTP connection
 * reports the upstream session it opened (id and initialize result) and may
 * be asked to continue a stored one instead of initializing (after a gateway
 * restart; if the upstream no longer knows it, a new session replaces it and
 * the owner hears `sessionLost`); the client's logging level and resource
 * subscriptions are reported as the upstream accepts them and set again on a
 * new upstream session. close("end") ends the upstream session (HTTP DELETE);
 * close("suspend") keeps it for the restart that follows.
 *
 * Over 400 lines because attaching, continuing a stored session, the
 * fallback to a new one and close all read and write the same lifecycle
 * fields (client, transport, status, closing); the next split would move the
 * server→client handler set-up (newClient, receiver tasks) out.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  type ClientCapabilities,
  type ClientNotification,
  type ClientRequest,
  type Result,
  type CreateMessageRequest,
  type CreateMessageResult,
  type ElicitRequest,
  type ElicitResult,
  type Implementation,
  type ListRootsResult,
  type LoggingLevel,
  type LoggingMessageNotification,
  type ServerCapabilities,
  type RequestId,
  type Task,
  LATEST_PROTOCOL_VERSION,
} from "@modelcontextprotocol/sdk/types.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Logger } from "../logging.js";
import { isStdioConfig, type ServerConfig } from "../config/schema.js";
import type { ChildProcessLimiter } from "./children.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { installOrderedProgress } from "../mcp/ordered-progress.js";
import { RequestAttribution } from "../mcp/request-attribution.js";
import { relatedTaskId } from "../tasks/mcp-task.js";
import type { CallOrigin } from "./origin.js";
import { UpstreamRequests } from "./requests.js";
import type { CreatedTransport, TransportFactory } from "./transports.js";
import type { ReceiverTaskStore } from "../tasks/receiver-tasks.js";

export type { CallToolOptions, ListKind, TaskSupport } from "./requests.js";

export type ConnectionStatus = "idle" | "connecting" | "connected" | "disconnected" | "error" | "closed";

/**
 * How the owning session answers and records what the upstream sends. A
 * server→client request comes with the origin of the call it belongs to
 * (undefined: unknown, e.g. sent on a Streamable HTTP upstream's standalone
 * stream, or while several calls are in flight on a stdio upstream).
 */
export interface UpstreamHandlers {
  onElicit(params: ElicitRequest["params"], signal: AbortSignal, origin: CallOrigin | undefined): Promise<ElicitResult>;
  onSample(params: CreateMessageRequest["params"], signal: AbortSignal, origin: CallOrigin | undefined): Promise<CreateMessageResult>;
  /** Every notification except logging messages and progress. */
  onNotification(method: string, params: Record<string, unknown> | undefined): void;
  onLog(params: LoggingMessageNotification["params"]): void;
  /** A line the stdio child wrote to stderr. */
  onStderr(line: string): void;
  /** Only asked when the connection declares `roots`. */
  onListRoots(signal: AbortSignal, origin: CallOrigin | undefined): Promise<ListRootsResult>;
  /** The connection closed without close() being called. */
  onDisconnect(reason: string): void;
}

/** An upstream session (Streamable HTTP) as the gateway keeps it: its id and what its initialize negotiated. */
export interface UpstreamSessionSnapshot {
  sessionId: string;
  protocolVersion: string;
  capabilities: ServerCapabilities;
  serverInfo: Implementation;
  instructions?: string | undefined;
}

/**
 * What the owner (the session) keeps for this upstream across connections
 * and gateway restarts. The getters are read when the connection opens.
 */
export interface ConnectionPersistence {
  /** An upstream session to continue instead of initializing a new one (once, after a gateway restart). */
  resume(): UpstreamSessionSnapshot | undefined;
  /** The client's logging level, set again on a new upstream session. */
  logLevel(): LoggingLevel | undefined;
  /** The resource URIs the client subscribed to on this upstream, subscribed again on a new upstream session. */
  subscriptions(): readonly string[];
  /** A Streamable HTTP connection opened (or continued) this upstream session. */
  sessionOpened(snapshot: UpstreamSessionSnapshot): void;
  /** The session `resume()` named is gone upstream (a new one replaces it): what ran in it is lost. The connection waits for it. */
  sessionLost(previousSessionId: string, reason: string): Promise<void> | void;
  subscriptionChanged(uri: string, subscribed: boolean): void;
  loggingLevelSet(level: LoggingLevel): void;
}

/** "end": the owner's session ended (the upstream session is DELETEd); "suspend": the gateway stops and the session resumes after its restart. */
export type CloseMode = "end" | "suspend";

/** Bound on the DELETE that ends an upstream session (a gone upstream must not hold up a close). */
const TERMINATE_TIMEOUT_MS = 5_000;

export interface UpstreamConnectionOptions {
  name: string;
  config: ServerConfig;
  handlers: UpstreamHandlers;
  transportFactory: TransportFactory;
  clientInfo: Implementation;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  logger: Logger;
  /** Declare `roots` to the upstream (only when the downstream client has roots). */
  roots?: ClientCapabilities["roots"] | undefined;
  /** Serves the upstream's task-augmented sampling/elicitation requests (seed 001). */
  receiverTasks?: ReceiverTaskStore | undefined;
  /** Caps stdio children gateway-wide. */
  children?: ChildProcessLimiter | undefined;
  /** Upstream session, logging level and subscriptions kept by the owner (see the header). */
  persistence?: ConnectionPersistence | undefined;
}

const STDERR_TAIL_LINES = 20;

export class UpstreamConnection extends UpstreamRequests {
  readonly name: string;
  status: ConnectionStatus = "idle";
  lastError: string | undefined;
  connectedAt: number | undefined;
  private client: Client | undefined;
  private created: CreatedTransport | undefined;
  private readonly stderrTail: string[] = [];
  private closing = false;
  private releaseChild: (() => void) | undefined;
  private declared: ClientCapabilities | undefined;
  private calls: RequestAttribution<CallOrigin> | undefined;
  /** A continued upstream session: the SDK client did not initialize it, so what it negotiated comes from here. */
  private continued: UpstreamSessionSnapshot | undefined;

  constructor(private readonly options: UpstreamConnectionOptions) {
    super(options.requestTimeoutMs);
    this.name = options.name;
  }

  get serverInfo(): Implementation | undefined {
    return this.client?.getServerVersion() ?? this.continued?.serverInfo;
  }

  override get capabilities(): ServerCapabilities | undefined {
    return this.client?.getServerCapabilities() ?? this.continued?.capabilities;
  }

  get instructions(): string | undefined {
    return this.client?.getInstructions() ?? this.continued?.instructions;
  }

  /** Whether this connection continued a stored upstream session rather than initializing one. */
  get continuedSession(): boolean {
    return this.continued !== undefined;
  }

  /** The capabilities the gateway declared to this upstream (set by connect()). */
  get declaredCapabilities(): ClientCapabilities | undefined {
    return this.declared;
  }

  /** The upstream's own MCP session id (streamable HTTP only). */
  get upstreamSessionId(): string | undefined {
    return this.created?.sessionId?.();
  }

  get pid(): number | null {
    return this.created?.pid?.() ?? null;
  }

  async connect(): Promise<void> {
    const { name, config, logger, persistence } = this.options;
    this.status = "connecting";
    if (isStdioConfig(config) && this.options.children) {
      try {
        this.releaseChild = this.options.children.acquire(name);
      } catch (err) {
        this.fail(errorMessage(err));
        throw err;
      }
    }
    const resume = persistence?.resume();
    await this.attach(resume?.sessionId);
    const continued = resume !== undefined && this.created?.sessionId?.() === resume.sessionId && (await this.continueSession(resume));
    if (resume !== undefined && !continued) await this.attach(undefined);
    const client = this.client!;
    if (!installOrderedProgress(client, this.created!.transport)) logger.warn({ server: name }, "sdk_ordered_progress_unavailable");
    this.status = "connected";
    this.connectedAt = Date.now();
    this.lastError = undefined;
    logger.info({ server: name, serverInfo: this.serverInfo, ...(continued ? { continuedSession: true } : {}) }, "upstream_connected");
    const sessionId = this.created?.sessionId?.();
    if (sessionId !== undefined) persistence?.sessionOpened(continued ? resume : this.snapshot(sessionId, client));
    // A continued upstream session still has them; a new one (a new process, a new session) needs them again.
    if (!continued) await this.restore();
  }

  /**
   * Creates the transport (continuing upstream session `sessionId` when
   * given) and an SDK client over it, and connects them (initialize, unless
   * the transport continues a session). Failures leave the connection in
   * `error` and throw EMCP_UPSTREAM_UNAVAILABLE.
   */
  private async attach(sessionId: string | undefined): Promise<void> {
    const { name, config, logger } = this.options;
    const client = this.newClient();
    let created: CreatedTransport;
    try {
      created = this.options.transportFactory(name, config, sessionId === undefined ? undefined : { sessionId });
    } catch (err) {
      this.fail(`cannot create transport: ${errorMessage(err)}`);
      this.releaseChild?.();
      throw this.unavailable(err);
    }
    this.created = created;
    // Before connect: the attribution wraps transport.send, so every request the SDK sends is seen.
    const calls = new RequestAttribution<CallOrigin>(created.requestStreams);
    calls.install(created.transport);
    this.calls = calls;
    created.stderr?.on("data", (chunk: Buffer) => this.captureStderr(chunk));
    client.onclose = () => this.handleClose();
    client.onerror = (err) => logger.debug({ server: name, err: errorMessage(err) }, "upstream_transport_error");
    this.client = client;
    try {
      await client.connect(created.transport, { timeout: this.options.connectTimeoutMs });
    } catch (err) {
      this.fail(this.describeFailure(errorMessage(err)));
      this.closing = true;
      await this.closeClient(client);
      throw this.unavailable(err);
    }
  }

  /**
   * The transport was created with a stored session id, so the client skipped
   * initialize: set the session's protocol version and ask the upstream
   * whether it still knows the session (a ping). True: continued. False: the
   * upstream answered 404 (MCP's "session not found"; server-everything says
   * 400), the stored session is gone and this client is discarded. Any other
   * failure throws EMCP_UPSTREAM_UNAVAILABLE (the session stays stored, to be
   * tried again on next use).
   */
  private async continueSession(resume: UpstreamSessionSnapshot): Promise<boolean> {
    const { name, logger, persistence } = this.options;
    const client = this.client!;
    const created = this.created!;
    created.continueSession?.(resume.protocolVersion);
    try {
      await client.ping({ timeout: this.options.connectTimeoutMs });
    } catch (err) {
      if (!(err instanceof StreamableHTTPError && (err.code === 404 || err.code === 400))) {
        this.fail(this.describeFailure(errorMessage(err)));
        this.closing = true;
        await this.closeClient(client);
        throw this.unavailable(err);
      }
      const reason = `upstream '${name}' no longer knows its MCP session from before the gateway restarted (HTTP ${err.code}); a new session replaced it, and what ran in the old one (its tasks) is lost`;
      logger.warn({ server: name, status: err.code }, "upstream_session_lost");
      // Not connected yet: handleClose ignores this close.
      await client.close().catch(() => undefined);
      // Before the connection is used: nothing may ask the new session about the old one's tasks.
      await persistence?.sessionLost(resume.sessionId, reason);
      return false;
    }
    this.continued = resume;
    const opened = created.openStandaloneStream?.((err) => logger.debug({ server: name, err: errorMessage(err) }, "upstream_standalone_stream_failed"));
    if (opened === false) logger.warn({ server: name }, "sdk_standalone_stream_unavailable");
    return true;
  }

  /** What a new upstream session negotiated, as kept for continuing it. */
  private snapshot(sessionId: string, client: Client): UpstreamSessionSnapshot {
    const instructions = client.getInstructions();
    return {
      sessionId,
      protocolVersion: this.created?.protocolVersion?.() ?? LATEST_PROTOCOL_VERSION,
      capabilities: client.getServerCapabilities() ?? {},
      serverInfo: client.getServerVersion() ?? { name: this.name, version: "unknown" },
      ...(instructions !== undefined ? { instructions } : {}),
    };
  }

  /** A new upstream session: the client's logging level and subscriptions, set again (failures logged, not thrown). */
  private async restore(): Promise<void> {
    const persistence = this.options.persistence;
    if (!persistence) return;
    const { name, logger } = this.options;
    const level = persistence.logLevel();
    if (level !== undefined && this.capabilities?.logging) {
      await this.setLoggingLevel(level).catch((err: unknown) => logger.warn({ server: name, level, err: errorMessage(err) }, "upstream_restore_failed"));
    }
    for (const uri of persistence.subscriptions()) {
      await this.subscribeResource(uri).catch((err: unknown) => logger.warn({ server: name, uri, err: errorMessage(err) }, "upstream_restore_failed"));
    }
  }

  /** An SDK client with this connection's capabilities and server→client handlers. */
  private newClient(): Client {
    const { handlers } = this.options;
    const receiver = this.options.receiverTasks;
    const capabilities: ClientCapabilities = { elicitation: { form: {}, url: {} }, sampling: {} };
    if (this.options.roots) capabilities.roots = this.options.roots;
    if (receiver) {
      capabilities.tasks = { list: {}, cancel: {}, requests: { elicitation: { create: {} }, sampling: { createMessage: {} } } };
    }
    this.declared = capabilities;
    const client = new Client(this.options.clientInfo, { capabilities, ...(receiver ? { taskStore: receiver } : {}) });
    if (this.options.roots) {
      client.setRequestHandler(ListRootsRequestSchema, (req, extra) => handlers.onListRoots(extra.signal, this.originOf(extra.requestId, req.params?._meta)));
    }
    client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
      const { task, ...params } = req.params;
      const origin = this.originOf(extra.requestId, params._meta);
      if (task && receiver && extra.taskStore)
        return this.startReceiverTask(receiver, extra.taskStore, task.ttl, (signal) => handlers.onElicit(params, signal, origin));
      return handlers.onElicit(req.params, extra.signal, origin);
    });
    client.setRequestHandler(CreateMessageRequestSchema, (req, extra) => {
      const { task, ...params } = req.params;
      const origin = this.originOf(extra.requestId, params._meta);
      if (task && receiver && extra.taskStore)
        return this.startReceiverTask(receiver, extra.taskStore, task.ttl, (signal) => handlers.onSample(params, signal, origin));
      return handlers.onSample(req.params, extra.signal, origin);
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      handlers.onLog(n.params);
    });
    client.fallbackNotificationHandler = async (n) => {
      if (n.method === "notifications/tools/list_changed") this.toolsChanged();
      handlers.onNotification(n.method, n.params);
    };
    return client;
  }

  /**
   * Answers a task-augmented request at once with a task; the request itself
   * goes to the downstream client in the background and its answer (or
   * failure) is stored for the upstream's tasks/result. The SDK's request
   * task store sends notifications/tasks/status on each change.
   */
  private async startReceiverTask(
    receiver: ReceiverTaskStore,
    taskStore: NonNullable<RequestHandlerExtra<ClientRequest, ClientNotification>["taskStore"]>,
    ttl: number | null | undefined,
    forward: (signal: AbortSignal) => Promise<Result>,
  ): Promise<{ task: Task }> {
    const task = await taskStore.createTask(ttl === undefined || ttl === null ? {} : { ttl });
    forward(receiver.signalFor(task.taskId))
      .then(
        (result) => taskStore.storeTaskResult(task.taskId, "completed", result),
        (err) => taskStore.updateTaskStatus(task.taskId, "failed", errorMessage(err)),
      )
      // The task may have been cancelled or expired meanwhile: nothing left to record.
      .catch(() => undefined);
    return { task };
  }

  /**
   * The call a server→client request belongs to: by the attribution's rules,
   * else, for a request the upstream sends inside one of its tasks, the call
   * that created that task.
   */
  private originOf(requestId: RequestId, meta: Record<string, unknown> | undefined): CallOrigin | undefined {
    const upstreamTask = relatedTaskId(meta);
    return this.calls?.attribute(requestId) ?? (upstreamTask === undefined ? undefined : this.calls?.taskOrigin(upstreamTask));
  }

  /**
   * Waits for upstream task cancels still in flight (each bounded by its
   * timeout); with "end", ends the upstream session (HTTP DELETE, bounded);
   * then closes.
   */
  async close(mode: CloseMode = "end"): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    if (this.status === "connected") {
      await this.settleCancels();
      if (mode === "end") await this.terminateSession();
    }
    this.status = "closed";
    if (this.client) await this.closeClient(this.client);
  }

  /** DELETE of the upstream session (Streamable HTTP), bounded by TERMINATE_TIMEOUT_MS; failures are only logged. */
  private async terminateSession(): Promise<void> {
    const created = this.created;
    if (!created?.terminateSession) return;
    const terminate = () => created.terminateSession!();
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(TERMINATE_TIMEOUT_MS, this.options.requestTimeoutMs))));
    await Promise.race([
      terminate().catch((err: unknown) => this.options.logger.debug({ server: this.name, err: errorMessage(err) }, "upstream_session_delete_failed")),
      bound,
    ]);
    clearTimeout(timer);
  }

  /** Closes the SDK client and waits until the stdio child's whole process group is gone. */
  private async closeClient(client: Client): Promise<void> {
    await client.close().catch(() => undefined);
    await this.created?.terminate?.().catch(() => undefined);
    this.releaseChild?.();
  }

  private handleClose(): void {
    // A close while connecting is reported by connect() itself, not as a disconnect.
    if (this.closing || this.status !== "connected") return;
    this.closing = true;
    const reason = this.describeFailure("connection closed");
    this.fail(reason);
    this.status = "disconnected";
    // The child's group is being reaped (stdio-transport.ts); its slot frees once the group is gone.
    const release = () => this.releaseChild?.();
    if (this.created?.terminate) void this.created.terminate().then(release, release);
    else release();
    this.options.logger.warn({ server: this.name, reason }, "upstream_disconnected");
    this.options.handlers.onDisconnect(reason);
  }

  private fail(reason: string): void {
    this.status = "error";
    this.lastError = reason;
  }

  private describeFailure(base: string): string {
    const tail = this.stderrTail.slice(-3).join(" | ");
    return tail ? `${base} (stderr: ${tail})` : base;
  }

  /** `cause`: the failure that made it unavailable, when there is one. */
  protected override unavailable(cause?: unknown): GatewayError {
    return new GatewayError(
      ErrorCodes.UPSTREAM_UNAVAILABLE,
      `upstream '${this.name}' is unavailable: ${this.lastError ?? "not connected"}. Check its config with list_servers; it is retried on next use.`,
      { details: { server: this.name }, ...(cause === undefined ? {} : { cause }) },
    );
  }

  private captureStderr(chunk: Buffer): void {
    for (const line of chunk.toString("utf8").split(/\r?\n/)) {
      if (!line.trim()) continue;
      this.stderrTail.push(line.slice(0, 500));
      if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
      this.options.handlers.onStderr(line);
    }
  }

  protected override connectedClient(): Client | undefined {
    return this.status === "connected" ? this.client : undefined;
  }

  protected override attribution(): RequestAttribution<CallOrigin> | undefined {
    return this.calls;
  }

  protected override subscriptionChanged(uri: string, subscribed: boolean): void {
    this.options.persistence?.subscriptionChanged(uri, subscribed);
  }

  protected override loggingLevelSet(level: LoggingLevel): void {
    this.options.persistence?.loggingLevelSet(level);
  }
}
