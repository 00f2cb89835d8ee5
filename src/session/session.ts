/**
 * Session: everything one downstream client owns (seed 003 §7.2) — its own
 * upstream connections, event system, buffers, pending client requests and
 * tasks. Nothing here is visible to another session. close() frees it all.
 */
import { RELATED_TASK_META_KEY, type ClientCapabilities, type Implementation } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, IdGenerator } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { Logger } from "../logging.js";
import type { TaskRecordStore } from "../store/task-store.js";
import { relatedTaskId, toMcpTask, withRelatedTask } from "../tasks/mcp-task.js";
import { ReceiverTaskStore } from "../tasks/receiver-tasks.js";
import { TaskManager } from "../tasks/task-manager.js";
import { UpstreamConnection, type ConnectionStatus, type UpstreamHandlers } from "../upstream/connection.js";
import type { ServerRegistry } from "../upstream/registry.js";
import type { ChildProcessLimiter } from "../upstream/children.js";
import type { TransportFactory } from "../upstream/transports.js";
import { canElicit, type DownstreamBridge } from "./bridge.js";
import { BufferManager } from "./buffers.js";
import { EventSystem, type EventLedger } from "./event-system.js";
import { PendingRequests } from "./pending-requests.js";
import { Reconnections } from "./reconnection.js";

export interface SessionDeps {
  registry: ServerRegistry;
  settings: GatewaySettings;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  transportFactory: TransportFactory;
  taskStore: TaskRecordStore;
  clientInfo: Implementation;
  /** Gateway-wide cap on stdio children. */
  children?: ChildProcessLimiter | undefined;
  /** Jitter source for reconnect backoff (tests inject a fixed one). */
  random?: (() => number) | undefined;
  /** Gateway-wide bound on stored events (the SessionManager shares one between its sessions). */
  eventLedger?: EventLedger | undefined;
}

/** How long a server→client request waits for a connecting client to send `initialized`. */
const CLIENT_INITIALIZE_WAIT_MS = 10_000;

export interface ConnectionView {
  status: ConnectionStatus | "not_connected";
  connectedAt?: number;
  lastError?: string;
  serverInfo?: Implementation;
}

export class Session {
  readonly createdAt: number;
  lastActivityAt: number;
  readonly events: EventSystem;
  readonly buffers: BufferManager;
  readonly pending: PendingRequests;
  readonly tasks: TaskManager;
  readonly logger: Logger;
  private readonly connections = new Map<string, UpstreamConnection>();
  private readonly connecting = new Map<string, Promise<UpstreamConnection>>();
  /** Receiver tasks per upstream (they die with the connection that created them). */
  private readonly receivers = new Map<string, ReceiverTaskStore>();
  private readonly reconnections: Reconnections;
  /** Best-effort cleanup (upstream task cancels) that close() waits for before dropping connections. */
  private readonly cleanups = new Set<Promise<unknown>>();
  private closed = false;
  /** Set by the transparent face once its client has initialized. */
  bridge: DownstreamBridge | undefined;

  constructor(
    readonly id: string,
    private readonly deps: SessionDeps,
    /** The downstream client's capabilities, when known before connecting upstream. */
    readonly downstreamCapabilities?: ClientCapabilities,
  ) {
    const { settings, clock, newId } = deps;
    this.logger = deps.logger.child({ session: id });
    this.createdAt = clock.now();
    this.lastActivityAt = this.createdAt;
    this.events = new EventSystem(settings.events, clock, newId, this.logger, deps.eventLedger);
    this.buffers = new BufferManager(settings.buffers, this.events, clock);
    this.pending = new PendingRequests(settings.pendingRequests, this.events, clock, newId);
    this.tasks = new TaskManager(id, settings.tasks, deps.taskStore, this.events, clock, newId);
    this.tasks.onStatusChange = (record) => {
      this.bridge?.notify(record.server, "notifications/tasks/status", toMcpTask(record));
      if (record.upstreamTaskId !== undefined) this.connections.get(record.server)?.releaseTaskProgress(record.upstreamTaskId);
    };
    this.reconnections = new Reconnections({
      settings,
      clock,
      logger: this.logger,
      random: deps.random,
      wanted: (server) => !this.closed && deps.registry.get(server) !== undefined,
      connect: (server) => this.connection(server),
      listChanged: (server, kind) => {
        const method = `notifications/${kind}/list_changed`;
        this.buffers.addNotification(server, method, undefined);
        this.bridgeFor(server)?.notify(server, method, undefined);
      },
      reconnected: (server, report) => this.events.add("server_reconnected", server, { ...report }),
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  touch(): void {
    this.lastActivityAt = this.deps.clock.now();
  }

  /** Starts connecting to every configured server without waiting. */
  connectAllInBackground(): void {
    for (const name of this.deps.registry.names()) {
      this.connection(name).catch(() => undefined);
    }
  }

  /**
   * The live connection to `name`, connecting (or reconnecting after a
   * failure) on demand. Concurrent callers share one attempt.
   */
  async connection(name: string): Promise<UpstreamConnection> {
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, "this session is closed");
    const entry = this.deps.registry.require(name);
    const existing = this.connections.get(name);
    if (existing?.status === "connected") return existing;
    const inflight = this.connecting.get(name);
    if (inflight) return inflight;
    const { settings } = this.deps;
    this.receivers.get(name)?.close();
    const receiverTasks = new ReceiverTaskStore({
      sessionId: this.id,
      server: name,
      store: this.deps.taskStore,
      clock: this.deps.clock,
      newId: this.deps.newId,
      defaultTtlMs: settings.tasks.defaultTtlMs,
      maxTtlMs: settings.tasks.maxTtlMs,
      maxLive: settings.tasks.maxTasksPerSession,
    });
    this.receivers.set(name, receiverTasks);
    const conn = new UpstreamConnection({
      receiverTasks,
      children: this.deps.children,
      name,
      config: entry.config,
      handlers: this.handlersFor(name),
      transportFactory: this.deps.transportFactory,
      clientInfo: this.deps.clientInfo,
      connectTimeoutMs: settings.upstream.connectTimeoutMs,
      requestTimeoutMs: settings.upstream.requestTimeoutMs,
      logger: this.logger,
      roots: this.downstreamCapabilities?.roots,
    });
    this.connections.set(name, conn);
    const attempt = conn
      .connect()
      .then(() => {
        if (this.closed || this.connections.get(name) !== conn) {
          void conn.close();
          throw new GatewayError(ErrorCodes.CLOSED, `connection to '${name}' was closed while connecting`);
        }
        this.events.add("server_connected", name, { serverInfo: conn.serverInfo ?? null });
        this.reconnections.onConnected(name, conn);
        return conn;
      })
      .finally(() => this.connecting.delete(name));
    this.connecting.set(name, attempt);
    return attempt;
  }

  view(name: string): ConnectionView {
    const conn = this.connections.get(name);
    if (!conn) return { status: "not_connected" };
    return {
      status: conn.status,
      ...(conn.connectedAt !== undefined ? { connectedAt: conn.connectedAt } : {}),
      ...(conn.lastError !== undefined ? { lastError: conn.lastError } : {}),
      ...(conn.serverInfo ? { serverInfo: conn.serverInfo } : {}),
    };
  }

  /** Drops the connection to a removed server: fail its tasks, reject its requests. */
  async disconnect(name: string, reason: string): Promise<void> {
    this.reconnections.stop(name);
    const conn = this.connections.get(name);
    this.connections.delete(name);
    this.connecting.delete(name);
    this.tasks.failWorkingForServer(name, reason);
    this.pending.rejectServer(name, reason);
    this.receivers.get(name)?.close();
    this.receivers.delete(name);
    await conn?.close();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.reconnections.close();
    this.pending.close("session closed");
    this.tasks.close();
    // Upstream tasks were just cancelled; each cancel is bounded by upstreamCancelTimeoutMs.
    await Promise.allSettled([...this.cleanups]);
    for (const r of this.receivers.values()) r.close();
    this.receivers.clear();
    this.events.close();
    const conns = [...this.connections.values()];
    this.connections.clear();
    await Promise.allSettled(conns.map((c) => c.close()));
  }

  trackCleanup(work: Promise<unknown>): void {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.cleanups.add(settled);
    void settled.then(() => this.cleanups.delete(settled));
  }

  /**
   * The native route to this session's client for what `server` sends — only
   * when the client's face shows that server (an attached meta face may use
   * others; their requests wait in the pending queue instead).
   */
  private bridgeFor(server: string): DownstreamBridge | undefined {
    return this.bridge?.serves(server) ? this.bridge : undefined;
  }

  /**
   * The bridge for a server→client request: upstreams may ask before the
   * client has sent `initialized`; wait a while for it, then use the pending
   * queue (a client that never initializes must not hold upstream requests).
   */
  private async initializedBridgeFor(server: string, signal: AbortSignal): Promise<DownstreamBridge | undefined> {
    const bridge = this.bridgeFor(server);
    if (!bridge) return undefined;
    return (await bridge.whenInitialized(signal, CLIENT_INITIALIZE_WAIT_MS)) ? bridge : undefined;
  }

  /** A server was added or removed: the aggregate face's lists changed. */
  serverSetChanged(): void {
    if (!this.bridge?.aggregate) return;
    for (const kind of ["tools", "resources", "prompts"]) this.bridge.notify("", `notifications/${kind}/list_changed`, undefined);
  }

  /** Connections currently live (for list_changed fan-out, roots updates, logging levels). */
  liveConnections(): UpstreamConnection[] {
    return [...this.connections.values()].filter((c) => c.status === "connected");
  }

  /**
   * Server→client traffic: natively through the bridge when the client can
   * take it, otherwise into the pending queue / buffers (never dropped).
   */
  private handlersFor(server: string): UpstreamHandlers {
    return {
      onElicit: async (upstreamParams, signal) => {
        const params = this.relate(server, upstreamParams);
        const mode = (params as { mode?: string }).mode ?? "form";
        const bridge = await this.initializedBridgeFor(server, signal);
        if (bridge && canElicit(bridge.clientCapabilities, mode)) return bridge.elicit(server, params, signal);
        return this.pending.add("elicitation", server, params, signal);
      },
      onSample: async (upstreamParams, signal) => {
        const params = this.relate(server, upstreamParams);
        const bridge = await this.initializedBridgeFor(server, signal);
        if (bridge?.clientCapabilities.sampling) return bridge.sample(server, params, signal);
        return this.pending.add("sampling", server, params, signal);
      },
      onListRoots: async (signal) => {
        const bridge = await this.initializedBridgeFor(server, signal);
        if (bridge?.clientCapabilities.roots) return bridge.listRoots(signal);
        return { roots: [] };
      },
      onNotification: (method, upstreamParams) => {
        if (method === "notifications/tasks/status") return this.onUpstreamTaskStatus(server, upstreamParams);
        // Task-related notifications name the upstream's task in _meta: the client sees the gateway's id.
        const params = upstreamParams && this.relate(server, upstreamParams);
        this.buffers.addNotification(server, method, params);
        this.bridgeFor(server)?.notify(server, method, params);
      },
      onLog: (upstreamParams) => {
        const params = this.relate(server, upstreamParams);
        this.buffers.addLog(server, params.level, params.data, params.logger);
        this.bridgeFor(server)?.notify(server, "notifications/message", params);
      },
      onStderr: (line) => this.buffers.addLog(server, "info", line, "stderr"),
      onDisconnect: (reason) => this.onUpstreamDisconnect(server, reason),
    };
  }

  /**
   * A request an upstream sends inside one of its tasks names that task in
   * `_meta`: the client sees the gateway's task id instead (or nothing, when
   * the gateway drives that upstream task itself for a blocking call).
   */
  private relate<T extends { _meta?: Record<string, unknown> | undefined }>(server: string, params: T): T {
    const upstreamId = relatedTaskId(params._meta);
    if (upstreamId === undefined) return params;
    const record = this.tasks.findByUpstreamId(server, upstreamId);
    if (record) return withRelatedTask(params, record.taskId);
    const { [RELATED_TASK_META_KEY]: _hidden, ...meta } = params._meta ?? {};
    const { _meta: _replaced, ...rest } = params;
    return (Object.keys(meta).length ? { ...rest, _meta: meta } : rest) as T;
  }

  /**
   * An upstream's notifications/tasks/status about one of its tasks: the
   * gateway task mapped onto it takes the news (terminal failures end it) and
   * the client hears about it under the gateway's task id. Upstream ids never
   * reach the client; notices about tasks the gateway does not map are dropped.
   */
  private onUpstreamTaskStatus(server: string, params: Record<string, unknown> | undefined): void {
    const upstreamId = typeof params?.taskId === "string" ? params.taskId : undefined;
    const record = upstreamId === undefined ? undefined : this.tasks.findByUpstreamId(server, upstreamId);
    if (!record || record.status !== "working") return;
    const message = typeof params?.statusMessage === "string" ? params.statusMessage : undefined;
    switch (params?.status) {
      case "completed":
      case "failed":
      case "cancelled":
        this.tasks.endUpstream(record.taskId, params.status, message);
        return;
      default:
        this.tasks.noteUpstreamStatus(record.taskId, message);
        this.bridge?.notify(server, "notifications/tasks/status", {
          ...toMcpTask(this.tasks.get(record.taskId)),
          status: params?.status === "input_required" ? "input_required" : "working",
        });
    }
  }

  /**
   * Seed 003 reconciliation, done when the connection drops: a closed
   * transport can carry no answer, so working tasks fail and pending
   * elicitations/sampling are rejected now ("state unknown": the upstream may
   * or may not have acted). Then the session reconnects in the background
   * (reconnection.ts).
   */
  private onUpstreamDisconnect(server: string, reason: string): void {
    if (this.closed) return;
    const conn = this.connections.get(server);
    const why = `upstream '${server}' disconnected (${reason}); the call's state is unknown — it may or may not have completed upstream`;
    const failedTasks = this.tasks.failWorkingForServer(server, why);
    const rejected = this.pending.rejectServer(server, why);
    this.receivers.get(server)?.close();
    this.events.add("server_disconnected", server, { reason, failedTasks, rejectedRequests: rejected });
    this.logger.warn({ server, reason, failedTasks: failedTasks.length }, "session_upstream_disconnected");
    this.reconnections.onDrop(server, conn, { failedTasks: failedTasks.length, rejectedRequests: rejected });
  }
}
