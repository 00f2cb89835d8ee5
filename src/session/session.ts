/**
 * Session: everything one downstream client owns (seed 003 §7.2) — its own
 * upstream connections, event system, buffers, pending client requests and
 * tasks. Nothing here is visible to another session. close() frees it all.
 */
import type { ClientCapabilities, Implementation } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, IdGenerator } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { Logger } from "../logging.js";
import type { TaskRecordStore } from "../store/task-store.js";
import { TaskManager } from "../tasks/task-manager.js";
import { UpstreamConnection, type ConnectionStatus, type UpstreamHandlers } from "../upstream/connection.js";
import type { ServerRegistry } from "../upstream/registry.js";
import type { TransportFactory } from "../upstream/transports.js";
import { canElicit, type DownstreamBridge } from "./bridge.js";
import { BufferManager } from "./buffers.js";
import { EventSystem } from "./event-system.js";
import { PendingRequests } from "./pending-requests.js";

export interface SessionDeps {
  registry: ServerRegistry;
  settings: GatewaySettings;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  transportFactory: TransportFactory;
  taskStore: TaskRecordStore;
  clientInfo: Implementation;
}

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
    this.events = new EventSystem(settings.events, clock, newId, this.logger);
    this.buffers = new BufferManager(settings.buffers, this.events, clock);
    this.pending = new PendingRequests(settings.pendingRequests, this.events, clock, newId);
    this.tasks = new TaskManager(id, settings.tasks, deps.taskStore, this.events, clock, newId);
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
    const conn = new UpstreamConnection({
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
    const conn = this.connections.get(name);
    this.connections.delete(name);
    this.connecting.delete(name);
    this.tasks.failWorkingForServer(name, reason);
    this.pending.rejectServer(name, reason);
    await conn?.close();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pending.close("session closed");
    this.tasks.close();
    this.events.close();
    const conns = [...this.connections.values()];
    this.connections.clear();
    await Promise.allSettled(conns.map((c) => c.close()));
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
      onElicit: (params, signal) => {
        const mode = (params as { mode?: string }).mode ?? "form";
        if (this.bridge && canElicit(this.bridge.clientCapabilities, mode)) return this.bridge.elicit(server, params, signal);
        return this.pending.add("elicitation", server, params, signal);
      },
      onSample: (params, signal) => {
        if (this.bridge?.clientCapabilities.sampling) return this.bridge.sample(server, params, signal);
        return this.pending.add("sampling", server, params, signal);
      },
      onListRoots: async (signal) => {
        if (this.bridge?.clientCapabilities.roots) return this.bridge.listRoots(signal);
        return { roots: [] };
      },
      onNotification: (method, params) => {
        this.buffers.addNotification(server, method, params);
        this.bridge?.notify(server, method, params);
      },
      onLog: (params) => {
        this.buffers.addLog(server, params.level, params.data, params.logger);
        this.bridge?.notify(server, "notifications/message", params as Record<string, unknown>);
      },
      onStderr: (line) => this.buffers.addLog(server, "info", line, "stderr"),
      onDisconnect: (reason) => this.onUpstreamDisconnect(server, reason),
    };
  }

  private onUpstreamDisconnect(server: string, reason: string): void {
    if (this.closed) return;
    const why = `upstream '${server}' disconnected: ${reason}`;
    const failedTasks = this.tasks.failWorkingForServer(server, why);
    const rejected = this.pending.rejectServer(server, why);
    this.events.add("server_disconnected", server, { reason, failedTasks, rejectedRequests: rejected });
    this.logger.warn({ server, reason, failedTasks: failedTasks.length }, "session_upstream_disconnected");
  }
}
