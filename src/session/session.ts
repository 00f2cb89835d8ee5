/**
 * Session: everything one downstream client owns (design EV-1) — its own
 * upstream connections, event system, buffers, pending client requests and
 * tasks. Nothing here is visible to another session. close() frees it all.
 *
 * Two parts do the work: the UpstreamPool (upstream-pool.ts) holds the
 * connections and reconnects them; ClientRouting (routing.ts) decides where
 * what the upstreams send goes. The session owns both, wires them to its
 * tasks, events, buffers and pending queue, and owns the lifecycle.
 *
 * Across gateway restarts (ADR 0007, "Sessions across restarts") the session
 * keeps its SessionStore record current (SessionRecordKeeper below): the
 * client's logging level and resource subscriptions as the upstreams accept
 * them, and each HTTP upstream's session. A session resumed from its record
 * continues those upstream sessions on first use and sets level and
 * subscriptions again on upstreams that start afresh.
 */
import { makePrincipal, type Principal } from "../auth/principal.js";
import type { ClientCapabilities, Implementation, LoggingLevel } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../errors.js";
import { sessionHash, type Logger } from "../logging.js";
import type { IdGenerator } from "../clock.js";
import type { SessionPatch, SessionRecord, SessionStore, Store, UpstreamInitRecord } from "../store/contracts.js";
import { isTerminal, TaskManager } from "../tasks/task-manager.js";
import type { ConnectionStatus, UpstreamHandle } from "../upstream/handle.js";
import type { ConnectionPersistence, UpstreamSessionSnapshot } from "../upstream/session-continuation.js";
import type { DownstreamBridge } from "./bridge.js";
import { BufferManager } from "./buffers.js";
import { EventSystem } from "./event-system.js";
import { PendingRequests } from "./pending-requests.js";
import { ClientRouting } from "./routing.js";
import { UpstreamPool, type UpstreamPoolDeps } from "./upstream-pool.js";
import { SessionTimers, TIMER_SERVER } from "./timers.js";

/** What a session needs from the gateway (shared by all sessions). */
export interface SessionDeps extends UpstreamPoolDeps {
  newId: IdGenerator;
  logger: Logger;
  /** A session's attempt to connect to `server` failed (for the console's Activity page). */
  upstreamFailed?(session: Session, server: string, reason: string): void;
  /** The gateway's state store (docs/adr/0007): each session's tasks, events and pending requests live there. */
  store: Store;
}

/** How a session ends (close()). */
export interface SessionCloseOptions {
  /**
   * The gateway is shutting down, not the session: its tasks, undelivered
   * events and pending requests stay in the store for the next start
   * (docs/adr/0007, "Wiring"). @default false: the session ended for good, its records go
   */
  keepRecords?: boolean;
}

export interface ConnectionView {
  status: ConnectionStatus | "not_connected";
  connectedAt?: number;
  lastError?: string;
  serverInfo?: Implementation;
  /** A stdio upstream's last stderr lines (bounded), for the console's Upstreams page. */
  stderr?: readonly string[];
}

export class Session {
  readonly createdAt: number;
  lastActivityAt: number;
  readonly events: EventSystem;
  readonly buffers: BufferManager;
  readonly pending: PendingRequests;
  readonly tasks: TaskManager;
  /** set_timer's timers (timers.ts); cleared by close(). */
  readonly timers: SessionTimers;
  readonly logger: Logger;
  private readonly routing: ClientRouting;
  private readonly upstreams: UpstreamPool;
  private closed = false;
  /** This session's record in the SessionStore (see the header). */
  readonly record: SessionRecordKeeper;
  /** Who created it (src/auth/): another principal's requests find no such session. Undefined: no authentication was on. */
  principal: Principal | undefined;
  /** It serves one 2026-07-28 request and ends with its answer: its upstreams are its principal's lingering connections (docs/adr/0058). */
  stateless = false;
  /**
   * Its face passes an upstream's roots/list on to the client (the transparent faces). The meta face
   * cannot (it answers `[]`), so its upstreams are not told the client has roots (UP-4, docs/adr/0064 §3).
   */
  passesRoots = true;

  /** The downstream client's capabilities, when known before connecting upstream (else clientInitializing()): upstreams are told its roots. */
  private clientCapabilities: ClientCapabilities | undefined;

  constructor(
    readonly id: string,
    private readonly deps: SessionDeps,
    /** The downstream client's capabilities, when known before connecting upstream. */
    downstreamCapabilities?: ClientCapabilities,
    /** The stored record of a session resumed after a gateway restart. */
    resumed?: SessionRecord,
  ) {
    this.clientCapabilities = downstreamCapabilities;
    const { settings, clock, newId } = deps;
    // Never the id itself in logs: it is a bearer secret (logging.ts).
    this.logger = deps.logger.child({ sessionHash: sessionHash(id) });
    this.createdAt = resumed?.createdAt ?? clock.now();
    this.lastActivityAt = resumed ? clock.now() : this.createdAt;
    this.record = new SessionRecordKeeper(id, deps.store.sessions, this.logger, resumed);
    // Its stored owner: issuer and subject are what ownership compares (scopes and claims came with that request only).
    this.principal = resumed?.owner && makePrincipal({ ...resumed.owner, scopes: [], claims: {} });
    // A memory or SQLite store is this process's alone (a SQLite file refuses a second gateway); Redis is shared by replicas.
    this.events = new EventSystem(id, settings.events, deps.store.events, clock, newId, this.logger, deps.store.kind !== "redis");
    this.buffers = new BufferManager(settings.buffers, this.events, clock);
    this.pending = new PendingRequests(id, settings.pendingRequests, deps.store.pending, this.events, clock, newId);
    this.tasks = new TaskManager(id, settings.tasks, deps.store.tasks, this.events, clock, newId);
    this.timers = new SessionTimers({
      clock,
      newId,
      maxPerSession: settings.timers.maxPerSession,
      fired: (t) => this.events.add("timer_expired", TIMER_SERVER, { timerId: t.id, message: t.message, fireCount: t.fireCount, interval: t.interval }),
    });
    this.routing = new ClientRouting({
      tasks: this.tasks,
      pending: this.pending,
      buffers: this.buffers,
      events: this.events,
      logger: this.logger,
      clock,
      isClosed: () => this.closed,
      dropped: (server, counts) => this.upstreams.dropped(server, counts),
    });
    this.upstreams = new UpstreamPool(deps, {
      sessionId: id,
      principal: () => this.principal,
      stateless: () => this.stateless,
      logger: this.logger,
      roots: () => (this.passesRoots ? this.clientCapabilities?.roots : undefined),
      handlersFor: (server) => this.routing.handlersFor(server),
      connected: (server, conn) => this.events.add("server_connected", server, { serverInfo: conn.serverInfo ?? null }),
      failed: (server, reason) => deps.upstreamFailed?.(this, server, reason),
      listChanged: (server, kind) => this.routing.listChanged(server, kind),
      reconnected: (server, report) => this.events.add("server_reconnected", server, { ...report }),
      // Idle release (upstream-pool.ts) keeps a connection that anything of the session still depends on.
      busy: (server) => this.tasks.runningOn(server) > 0 || this.pending.waitingFrom(server) > 0 || this.record.subscribed(server),
      persistenceFor: (server) =>
        this.record.persistenceFor(server, async (reason) => {
          // The upstream tasks of the lost upstream session cannot be asked about any more.
          await this.tasks
            .failWorkingForServer(server, reason)
            .catch((err: unknown) => this.logger.error({ server, err: errorMessage(err) }, "task_store_write_failed"));
        }),
    });
    this.tasks.onStatusChange = (record) => {
      this.routing.taskStatusChanged(record);
      if (record.upstreamTaskId !== undefined && isTerminal(record.status)) this.upstreams.get(record.server)?.releaseUpstreamTask(record.upstreamTaskId);
    };
    // A resumed session's working tasks get their TTL timers back in SessionManager.resume(), which awaits that.
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The transparent face's native route to its client (routing.ts): installed by the face; undefined: none (the meta-tools face). */
  get bridge(): DownstreamBridge | undefined {
    return this.routing.bridge.get();
  }

  /** Installing a bridge, or undefined (none is coming, the face closed), ends the waits expectBridge() began. */
  set bridge(bridge: DownstreamBridge | undefined) {
    this.routing.bridge.install(bridge);
  }

  /**
   * A transparent face is starting for this session: what its upstreams ask
   * before it installs its bridge waits for it (bounded) instead of finding none (docs/adr/0060).
   */
  expectBridge(): void {
    this.routing.bridge.expect();
  }

  touch(): void {
    this.lastActivityAt = this.deps.clock.now();
  }

  /**
   * The client's capabilities from an initialize that came after the session
   * was made (the stdio face: one session per process, made before the
   * client speaks). Upstreams connected from now on declare its roots; a
   * connection made before keeps what it declared.
   */
  clientInitializing(capabilities: ClientCapabilities): void {
    this.clientCapabilities = capabilities;
  }

  /** Starts connecting to every configured server without waiting. */
  connectAllInBackground(): void {
    this.upstreams.connectAllInBackground(this.deps.registry.names(this));
  }

  /**
   * The live connection to `name`, connecting (or reconnecting after a
   * failure) on demand. Concurrent callers share one attempt.
   */
  async connection(name: string): Promise<UpstreamHandle> {
    // Another principal's runtime server is unknown here (docs/adr/0015).
    this.deps.registry.require(name, this);
    return this.upstreams.connection(name);
  }

  /** A list of `server` changed for this client (a reload changed what it may see): its buffers and the transparent face showing it are told. */
  listChanged(server: string, kind: "tools" | "resources" | "prompts"): void {
    this.routing.listChanged(server, kind);
  }

  /** Connections currently live (for list_changed fan-out, roots updates, logging levels). */
  liveConnections(): UpstreamHandle[] {
    return this.upstreams.live();
  }

  view(name: string): ConnectionView {
    const conn = this.upstreams.get(name);
    if (!conn) return { status: "not_connected" };
    const lastError = this.upstreams.lastError(name);
    return {
      status: conn.status,
      ...(conn.connectedAt !== undefined ? { connectedAt: conn.connectedAt } : {}),
      ...(lastError !== undefined ? { lastError } : {}),
      ...(conn.serverInfo ? { serverInfo: conn.serverInfo } : {}),
      ...(conn.stderrLines.length ? { stderr: conn.stderrLines } : {}),
    };
  }

  /** Drops the connection to a removed server: fail its tasks, reject its requests. */
  async disconnect(name: string, reason: string): Promise<void> {
    await this.upstreams.remove(name, async () => {
      this.pending.rejectServer(name, reason);
      await this.tasks.failWorkingForServer(name, reason);
    });
  }

  /** A server was added or removed: the aggregate face's lists changed. */
  serverSetChanged(): void {
    this.routing.serverSetChanged();
  }

  async close(options: SessionCloseOptions = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.timers.close();
    this.upstreams.stop();
    await this.pending.close("session closed", options);
    // Aborting the tasks cancels their upstream tasks; each connection's close() waits for those
    // cancels (each bounded by tasks.upstreamCancelTimeoutMs) before it disconnects.
    await this.tasks.close(options);
    await this.events.close(options);
    // Kept for a restart, an HTTP upstream's session stays open upstream (its tasks live there); else it is DELETEd.
    await this.upstreams.close(options.keepRecords && this.deps.store.kind !== "memory" ? "suspend" : "end");
    await this.record.settled();
  }
}

/**
 * A session's record in the SessionStore, kept current while it runs: the
 * client's logging level, its resource subscriptions by server, and each HTTP
 * upstream's session (id and initialize result). The SessionManager writes
 * the record at initialize (toRecord) and deletes it when the session ends;
 * this keeper only updates it. Writes run one after another, each writing
 * whole fields from memory (so the last one wins), and never throw: a failed
 * write is logged and costs only resumability.
 */
export class SessionRecordKeeper {
  private level: LoggingLevel | undefined;
  private readonly subscriptions = new Map<string, Set<string>>();
  private readonly upstreamSessions = new Map<string, UpstreamSessionSnapshot>();
  /** Stored upstream sessions not yet continued (each is tried by the first connection to its server). */
  private readonly resumable = new Map<string, UpstreamSessionSnapshot>();
  /** Whether a record exists to update (written at initialize, or resumed). */
  private stored: boolean;
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly sessionId: string,
    private readonly store: SessionStore,
    private readonly logger: Logger,
    resumed?: SessionRecord,
  ) {
    this.stored = resumed !== undefined;
    if (!resumed) return;
    this.level = resumed.logLevel as LoggingLevel | undefined;
    for (const [server, uris] of Object.entries(resumed.subscriptions)) this.subscriptions.set(server, new Set(uris));
    for (const [server, sessionId] of Object.entries(resumed.upstreamSessionIds)) {
      const init = resumed.upstreamInit?.[server];
      if (!init) continue;
      const snapshot = fromInitRecord(sessionId, init);
      this.upstreamSessions.set(server, snapshot);
      this.resumable.set(server, snapshot);
    }
  }

  /** Whether the client holds resource subscriptions on `server`. */
  subscribed(server: string): boolean {
    return (this.subscriptions.get(server)?.size ?? 0) > 0;
  }

  /** The client's logging level, as the upstreams accepted it. */
  get logLevel(): LoggingLevel | undefined {
    return this.level;
  }

  /** The record to store at initialize; from then on this keeper updates it. */
  toRecord(
    start: Pick<SessionRecord, "face" | "protocolVersion" | "clientInfo" | "clientCapabilities" | "owner" | "createdAt" | "lastActivityAt">,
  ): SessionRecord {
    this.stored = true;
    return { sessionId: this.sessionId, ...start, ...this.fields(), ...(this.level !== undefined ? { logLevel: this.level } : {}) };
  }

  /** How a connection to `server` reads and reports what outlives it; `lost`: its stored upstream session is gone. */
  persistenceFor(server: string, lost: (reason: string) => Promise<void>): ConnectionPersistence {
    return {
      resume: () => this.resumable.get(server),
      logLevel: () => this.level,
      subscriptions: () => [...(this.subscriptions.get(server) ?? [])],
      sessionOpened: (snapshot) => {
        this.resumable.delete(server);
        const before = this.upstreamSessions.get(server);
        this.upstreamSessions.set(server, snapshot);
        if (JSON.stringify(before) !== JSON.stringify(snapshot)) this.write(this.fields());
      },
      sessionLost: (_previous, reason) => {
        this.resumable.delete(server);
        this.upstreamSessions.delete(server);
        this.write(this.fields());
        return lost(reason);
      },
      subscriptionChanged: (uri, subscribed) => {
        const uris = this.subscriptions.get(server) ?? new Set<string>();
        if (uris.has(uri) === subscribed) return;
        if (subscribed) uris.add(uri);
        else uris.delete(uri);
        if (uris.size) this.subscriptions.set(server, uris);
        else this.subscriptions.delete(server);
        this.write({ subscriptions: this.fields().subscriptions });
      },
      loggingLevelSet: (level) => {
        if (level === this.level) return;
        this.level = level;
        this.write({ logLevel: level });
      },
    };
  }

  /** Resolves once every queued write has run. */
  settled(): Promise<void> {
    return this.tail;
  }

  private fields(): Pick<SessionRecord, "subscriptions" | "upstreamSessionIds" | "upstreamInit"> {
    const upstreamSessionIds: Record<string, string> = {};
    const upstreamInit: Record<string, UpstreamInitRecord> = {};
    for (const [server, snapshot] of this.upstreamSessions) {
      upstreamSessionIds[server] = snapshot.sessionId;
      upstreamInit[server] = toInitRecord(snapshot);
    }
    const subscriptions = Object.fromEntries([...this.subscriptions].map(([server, uris]) => [server, [...uris]]));
    return { subscriptions, upstreamSessionIds, upstreamInit };
  }

  private write(patch: SessionPatch): void {
    if (!this.stored) return;
    this.tail = this.tail.then(async () => {
      try {
        await this.store.update(this.sessionId, patch);
      } catch (err) {
        this.logger.error({ err: errorMessage(err), fields: Object.keys(patch) }, "session_store_write_failed");
      }
    });
  }
}

function toInitRecord(s: UpstreamSessionSnapshot): UpstreamInitRecord {
  return {
    protocolVersion: s.protocolVersion,
    capabilities: s.capabilities,
    serverInfo: s.serverInfo,
    ...(s.instructions !== undefined ? { instructions: s.instructions } : {}),
  };
}

function fromInitRecord(sessionId: string, r: UpstreamInitRecord): UpstreamSessionSnapshot {
  return {
    sessionId,
    protocolVersion: r.protocolVersion,
    capabilities: r.capabilities,
    serverInfo: r.serverInfo,
    ...(r.instructions !== undefined ? { instructions: r.instructions } : {}),
  };
}
