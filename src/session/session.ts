/**
 * Session: everything one downstream client owns (seed 003 §7.2) — its own
 * upstream connections, event system, buffers, pending client requests and
 * tasks. Nothing here is visible to another session. close() frees it all.
 *
 * Two parts do the work: the UpstreamPool (upstream-pool.ts) holds the
 * connections and reconnects them; ClientRouting (routing.ts) decides where
 * what the upstreams send goes. The session owns both, wires them to its
 * tasks, events, buffers and pending queue, and owns the lifecycle.
 */
import type { ClientCapabilities, Implementation } from "@modelcontextprotocol/sdk/types.js";
import { sessionHash, type Logger } from "../logging.js";
import { isTerminal, TaskManager } from "../tasks/task-manager.js";
import type { ConnectionStatus, UpstreamConnection } from "../upstream/connection.js";
import type { DownstreamBridge } from "./bridge.js";
import { BufferManager } from "./buffers.js";
import { EventSystem, type EventLedger } from "./event-system.js";
import { PendingRequests } from "./pending-requests.js";
import { ClientRouting } from "./routing.js";
import { UpstreamPool, type UpstreamPoolDeps } from "./upstream-pool.js";

export interface SessionDeps extends UpstreamPoolDeps {
  /** Gateway-wide bound on stored events (the SessionManager shares one between its sessions). */
  eventLedger?: EventLedger | undefined;
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
  private readonly routing: ClientRouting;
  private readonly upstreams: UpstreamPool;
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
    // Never the id itself in logs: it is a bearer secret (logging.ts).
    this.logger = deps.logger.child({ sessionHash: sessionHash(id) });
    this.createdAt = clock.now();
    this.lastActivityAt = this.createdAt;
    this.events = new EventSystem(settings.events, clock, newId, this.logger, deps.eventLedger);
    this.buffers = new BufferManager(settings.buffers, this.events, clock);
    this.pending = new PendingRequests(settings.pendingRequests, this.events, clock, newId);
    this.tasks = new TaskManager(id, settings.tasks, deps.taskStore, this.events, clock, newId);
    this.routing = new ClientRouting({
      tasks: this.tasks,
      pending: this.pending,
      buffers: this.buffers,
      events: this.events,
      logger: this.logger,
      bridge: () => this.bridge,
      isClosed: () => this.closed,
      dropped: (server, counts) => this.upstreams.dropped(server, counts),
    });
    this.upstreams = new UpstreamPool(deps, {
      sessionId: id,
      logger: this.logger,
      roots: downstreamCapabilities?.roots,
      handlersFor: (server) => this.routing.handlersFor(server),
      connected: (server, conn) => this.events.add("server_connected", server, { serverInfo: conn.serverInfo ?? null }),
      listChanged: (server, kind) => this.routing.listChanged(server, kind),
      reconnected: (server, report) => this.events.add("server_reconnected", server, { ...report }),
    });
    this.tasks.onStatusChange = (record) => {
      this.routing.taskStatusChanged(record);
      if (record.upstreamTaskId !== undefined && isTerminal(record.status)) this.upstreams.get(record.server)?.releaseUpstreamTask(record.upstreamTaskId);
    };
  }

  get isClosed(): boolean {
    return this.closed;
  }

  touch(): void {
    this.lastActivityAt = this.deps.clock.now();
  }

  /** Starts connecting to every configured server without waiting. */
  connectAllInBackground(): void {
    this.upstreams.connectAllInBackground();
  }

  /**
   * The live connection to `name`, connecting (or reconnecting after a
   * failure) on demand. Concurrent callers share one attempt.
   */
  connection(name: string): Promise<UpstreamConnection> {
    return this.upstreams.connection(name);
  }

  /** Connections currently live (for list_changed fan-out, roots updates, logging levels). */
  liveConnections(): UpstreamConnection[] {
    return this.upstreams.live();
  }

  view(name: string): ConnectionView {
    const conn = this.upstreams.get(name);
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
    await this.upstreams.remove(name, () => {
      this.tasks.failWorkingForServer(name, reason);
      this.pending.rejectServer(name, reason);
    });
  }

  /** A server was added or removed: the aggregate face's lists changed. */
  serverSetChanged(): void {
    this.routing.serverSetChanged();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.upstreams.stop();
    this.pending.close("session closed");
    // Aborting the tasks cancels their upstream tasks; each connection's close() waits for those
    // cancels (each bounded by tasks.upstreamCancelTimeoutMs) before it disconnects.
    this.tasks.close();
    this.events.close();
    await this.upstreams.close();
  }
}
