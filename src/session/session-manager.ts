/**
 * SessionManager (design EV-1, EV-8, UP-2): creates, resumes, expires and
 * destroys sessions, and applies server changes to all of them. See
 * docs/design/sessions-and-events.md, "How the code keeps it".
 */
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../auth/principal.js";
import type { ServerConfig } from "../config/server-entry.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { TimerHandle } from "../clock.js";
import { sessionHash } from "../logging.js";
import type { RegisteredServer } from "../upstream/registry.js";
import type { FaceRecord, SessionRecord } from "../store/contracts.js";
import { ServerChanges, type AddServerOutcome } from "./server-changes.js";
import type { ObservedChange } from "./event-system.js";
import { PrincipalLimits, type CountedSession } from "./principal-limits.js";
import { Session, type SessionCloseOptions, type SessionDeps } from "./session.js";

/** What SessionManager observers hear: a session started or ended, or a change in one (see EventSystem.observe). */
export type SessionChange = { sessionId: string } & ({ type: "session_started" | "session_ended" } | { type: "change"; change: ObservedChange });

/**
 * Activity is written to a session's record at most this often (not per
 * request). A restarted gateway may therefore see a session as idle up to
 * this much earlier than it was.
 */
export const STORED_TOUCH_INTERVAL_MS = 1_000;

/** Events that mean a session holds work its client comes back for: never one-shot (see the header). */
const HOLDS_WORK: ReadonlySet<string> = new Set(["task_created", "elicitation_request", "sampling_request"]);

/** Stored sessions the sweep deletes per round (the next round takes the rest). */
const STORED_SWEEP_BATCH = 100;

/** What an HTTP session's initialize said, stored for its resumption. */
export type SessionStart = Pick<SessionRecord, "face" | "protocolVersion" | "clientInfo" | "clientCapabilities" | "owner">;

/** A session rebuilt from its record, and the record (its face: the caller checks it is its own). */
export interface ResumedSession {
  session: Session;
  record: SessionRecord;
}

export interface SessionManagerOptions {
  /** Connect new sessions to every configured server at once (design UP-3, `eagerConnect`) or on first use. */
  connectEagerly: boolean;
}

/** What the sweep knows about a session besides its last activity. */
interface Liveness {
  /** A request arrived after the first exchange: the normal idle timeout applies. */
  established: boolean;
  /** false: never expired as one-shot (stdio sessions). */
  oneShot: boolean;
  /** HTTP responses of the session still open (requests in flight, GET streams). */
  openResponses: number;
  /** When activity was last written to the session's record. */
  storedTouchAt: number;
  /** It created a task or queued a client request: never one-shot (see the header). */
  holdsWork: boolean;
}

export class SessionManager {
  private readonly sessions = new Map<string, Session>();
  private readonly liveness = new Map<string, Liveness>();
  private sweepTimer: TimerHandle | undefined;
  private closed = false;
  /** add_server/remove_server and config reloads, applied to every live session. */
  private readonly serverChanges: ServerChanges;
  /** Called after a session is destroyed (the HTTP layer closes its transport). */
  onDestroyed: ((sessionId: string) => void) | undefined;
  /** Resumptions under way, by session id (concurrent first requests share one). */
  private readonly resuming = new Map<string, Promise<ResumedSession | undefined>>();
  /** The sweep of stored sessions under way (close() waits for it). */
  private storedSweep: Promise<unknown> | undefined;
  private readonly observers = new Set<(change: SessionChange) => void>();
  /** Sessions and tasks per principal (principal-limits.ts); its onRefused feeds the refusals counter. */
  readonly limits: PrincipalLimits;
  /** What `limits` counts of each live session (its principal as it was when counted). */
  private readonly counted = new Map<string, CountedSession>();

  constructor(
    private readonly deps: SessionDeps,
    private readonly options: SessionManagerOptions = { connectEagerly: true },
  ) {
    this.serverChanges = new ServerChanges(deps, this.sessions);
    this.limits = new PrincipalLimits({ maxSessions: deps.settings.sessions.maxPerPrincipal, maxTasks: deps.settings.tasks.maxPerPrincipal }, deps.logger);
  }

  start(): void {
    this.scheduleSweep();
  }

  /**
   * `connect`: connect every configured server now, in the background (else on
   * first use). `oneShot: false`: never expire the session as one-shot.
   * `principal`: who creates it (its owner; counted toward its limits).
   * `stateless`: it serves one 2026-07-28 request (Session.stateless). Throws
   * EMCP_LIMIT_REACHED (maxSessions) or EMCP_PRINCIPAL_LIMIT (maxPerPrincipal).
   */
  create(
    options: {
      id?: string;
      downstreamCapabilities?: ClientCapabilities | undefined;
      connect?: boolean;
      oneShot?: boolean;
      principal?: Principal | undefined;
      /** It serves one 2026-07-28 request (Session.stateless). */
      stateless?: boolean;
      /** The face it serves: the meta face's upstreams are not told the client's roots (Session.passesRoots). */
      face?: FaceRecord | undefined;
    } = {},
  ): Session {
    const id = options.id ?? this.deps.newId();
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, "the gateway is shutting down");
    const { maxSessions } = this.deps.settings.sessions;
    if (this.sessions.size >= maxSessions) {
      throw new GatewayError(ErrorCodes.LIMIT_REACHED, `the gateway already has ${maxSessions} sessions (gateway.sessions.maxSessions)`);
    }
    this.limits.admitSession(options.principal);
    const session = new Session(id, this.deps, options.downstreamCapabilities);
    session.principal = options.principal;
    session.stateless = options.stateless ?? false;
    session.passesRoots = options.face?.kind !== "meta";
    this.sessions.set(id, session);
    this.count(session);
    this.watch(session);
    this.liveness.set(id, { established: false, oneShot: options.oneShot ?? true, openResponses: 0, storedTouchAt: session.createdAt, holdsWork: false });
    this.deps.logger.info({ sessionHash: sessionHash(id) }, "session_created");
    if (options.connect ?? this.options.connectEagerly) session.connectAllInBackground();
    return session;
  }

  /**
   * Stores a new HTTP session's record (what its initialize said), so that it
   * can resume after a gateway restart. Throws EMCP_STORE_UNAVAILABLE when
   * the store cannot write it (the caller refuses the session).
   */
  async persist(session: Session, start: SessionStart): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.store.sessions.put(session.record.toRecord({ ...start, createdAt: session.createdAt, lastActivityAt: now }));
    const live = this.liveness.get(session.id);
    if (live) live.storedTouchAt = now;
  }

  /**
   * A session this process does not know, rebuilt from its stored record
   * (after a gateway restart): the same id, client capabilities, logging
   * level, subscriptions and upstream sessions; counted as established (its
   * client came back). Undefined when there is no record, it was made on
   * another face than `face`, the gateway is closing, the session is live
   * here already, or it expired (idle for sessions.idleTimeoutMs by its
   * stored activity: it is deleted with all it kept, never resurrected).
   * Concurrent calls share one resumption. Throws EMCP_STORE_UNAVAILABLE
   * (store) or EMCP_LIMIT_REACHED (maxSessions).
   */
  resume(id: string, face: FaceRecord): Promise<ResumedSession | undefined> {
    const key = `${JSON.stringify(face)} ${id}`;
    const inflight = this.resuming.get(key);
    if (inflight) return inflight;
    const run = this.rebuild(id, face).finally(() => this.resuming.delete(key));
    this.resuming.set(key, run);
    return run;
  }

  private async rebuild(id: string, face: FaceRecord): Promise<ResumedSession | undefined> {
    if (this.closed || this.sessions.has(id)) return undefined;
    const { clock, settings, store, logger } = this.deps;
    const record = await store.sessions.get(id);
    if (!record || JSON.stringify(record.face) !== JSON.stringify(face) || this.closed || this.sessions.has(id)) return undefined;
    const idleMs = clock.now() - record.lastActivityAt;
    if (idleMs >= settings.sessions.idleTimeoutMs) {
      logger.info({ sessionHash: sessionHash(id), idleMs }, "stored_session_expired");
      await this.forgetStored(id);
      return undefined;
    }
    if (this.sessions.size >= settings.sessions.maxSessions) {
      throw new GatewayError(ErrorCodes.LIMIT_REACHED, `the gateway already has ${settings.sessions.maxSessions} sessions (gateway.sessions.maxSessions)`);
    }
    const session = new Session(id, this.deps, record.clientCapabilities, record);
    session.passesRoots = record.face.kind !== "meta";
    this.sessions.set(id, session);
    // Counted, never refused: it was admitted when it began (its owner may be over the limit here for a while, ADR 0018).
    this.count(session);
    this.watch(session);
    this.liveness.set(id, { established: true, oneShot: true, openResponses: 0, storedTouchAt: 0, holdsWork: false });
    try {
      // Its working tasks (upstream tasks that outlived the restart) get their TTL timers back.
      await session.tasks.restore();
    } catch (err) {
      await this.destroy(id, "resumption failed", { keepRecords: true });
      throw err;
    }
    this.touchStored(session);
    return { session, record };
  }

  /** Counts the session toward its principal's limits, and asks them before each of its task reservations. */
  private count(session: Session): void {
    const tasks = session.tasks;
    const counted: CountedSession = {
      principal: session.principal,
      get taskLoad() {
        return tasks.load;
      },
    };
    this.counted.set(session.id, counted);
    this.limits.add(counted);
    tasks.admit = () => this.limits.admitTask(counted);
  }

  /** Hears every session start, end and change from now on (nothing is consumed); returns the unsubscribe. */
  observe(observer: (change: SessionChange) => void): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  private watch(session: Session): void {
    session.events.observe((change) => {
      if (HOLDS_WORK.has(change.type)) {
        const live = this.liveness.get(session.id);
        if (live) live.holdsWork = true;
      }
      this.tell({ sessionId: session.id, type: "change", change });
    });
    this.tell({ sessionId: session.id, type: "session_started" });
  }

  private tell(change: SessionChange): void {
    for (const observer of [...this.observers]) {
      try {
        observer(change);
      } catch (err) {
        this.deps.logger.error({ err: errorMessage(err), type: change.type }, "session_observer_failed");
      }
    }
  }

  get(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  get size(): number {
    return this.sessions.size;
  }

  list(): Session[] {
    return [...this.sessions.values()];
  }

  /**
   * An HTTP request of the session arrived (any method): activity, and when it
   * comes after the first exchange, the sign that the client came back.
   */
  requestArrived(session: Session): void {
    session.touch();
    const live = this.liveness.get(session.id);
    if (live && !live.established && session.lastActivityAt - session.createdAt > this.deps.settings.sessions.firstExchangeMs) {
      live.established = true;
    }
    this.touchStored(session);
  }

  /** Writes the session's activity to its record, at most once per STORED_TOUCH_INTERVAL_MS (a session without a record: no-op). */
  private touchStored(session: Session): void {
    const live = this.liveness.get(session.id);
    if (!live || session.lastActivityAt - live.storedTouchAt < STORED_TOUCH_INTERVAL_MS) return;
    live.storedTouchAt = session.lastActivityAt;
    this.deps.store.sessions
      .touch(session.id, session.lastActivityAt)
      .catch((err: unknown) => session.logger.error({ err: errorMessage(err) }, "session_store_write_failed"));
  }

  /** An HTTP response of the session is open; call the returned function once it closes. */
  responseOpened(session: Session): () => void {
    const live = this.liveness.get(session.id);
    if (!live) return () => undefined;
    live.openResponses++;
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      live.openResponses--;
      // The one-shot wait counts from the end of the last response, not from its request.
      if (session.isClosed) return;
      session.touch();
      this.touchStored(session);
    };
  }

  /** Whether the session's client came back after its first exchange (undefined: no such session). */
  isEstablished(id: string): boolean | undefined {
    return this.liveness.get(id)?.established;
  }

  /** Ends a session; `keepRecords`: the gateway is shutting down (see SessionCloseOptions). */
  async destroy(id: string, reason = "closed", options: SessionCloseOptions = {}): Promise<void> {
    const session = this.sessions.get(id);
    if (!session) return;
    this.sessions.delete(id);
    const counted = this.counted.get(id);
    if (counted) this.limits.remove(counted);
    this.counted.delete(id);
    this.tell({ sessionId: id, type: "session_ended" });
    this.liveness.delete(id);
    // Ended for good: neither a request meanwhile nor a restart may bring it back (shutting down keeps it for the next start).
    if (!options.keepRecords) await this.deleteRecord(id);
    // Tasks go with the session unless a durable store keeps them for the next start.
    if (!options.keepRecords || this.deps.store.kind === "memory") await this.logDroppedTasks(session, reason);
    await session.close(options);
    this.deps.logger.info({ sessionHash: sessionHash(id), reason }, "session_destroyed");
    this.onDestroyed?.(id);
  }

  /** One `task_dropped` line (counts by status) when a session that ends takes tasks with it. */
  private async logDroppedTasks(session: Session, reason: string): Promise<void> {
    let tasks;
    try {
      tasks = await session.tasks.list({ includeCompleted: true });
    } catch (err) {
      session.logger.error({ err: errorMessage(err) }, "task_store_read_failed");
      return;
    }
    if (tasks.length === 0) return;
    const byStatus: Record<string, number> = {};
    for (const t of tasks) {
      const status = t.status === "working" && t.inputRequired === true ? "input_required" : t.status;
      byStatus[status] = (byStatus[status] ?? 0) + 1;
    }
    this.deps.logger.warn({ sessionHash: sessionHash(session.id), reason, dropped: tasks.length, byStatus }, "task_dropped");
  }

  /**
   * add_server (see ServerChanges.add): registers or replaces `name` for every
   * session once `authorize` (the caller's policy) allows it.
   */
  addServer(
    caller: Session,
    name: string,
    config: ServerConfig,
    authorize: (existing: RegisteredServer | undefined) => void | Promise<void>,
  ): Promise<AddServerOutcome> {
    return this.serverChanges.add(caller, name, config, authorize);
  }

  /** A server the config file gained on reload (see ServerChanges.addConfig). */
  addConfigServer(name: string, config: ServerConfig): Promise<void> {
    return this.serverChanges.addConfig(name, config);
  }

  /** Unregisters a server and disconnects every session from it (see ServerChanges.remove). */
  removeServer(caller: Session | undefined, name: string, authorize?: (entry: RegisteredServer) => void | Promise<void>): Promise<number> {
    return this.serverChanges.remove(caller, name, authorize);
  }

  /**
   * Destroys sessions idle for sessions.idleTimeoutMs, and one-shot sessions
   * (see the header) idle for sessions.oneShotIdleMs.
   */
  sweep(): number {
    const { clock, settings } = this.deps;
    const now = clock.now();
    let n = 0;
    for (const s of [...this.sessions.values()]) {
      const idle = now - s.lastActivityAt;
      const live = this.liveness.get(s.id);
      let reason: string | undefined;
      if (idle >= settings.sessions.idleTimeoutMs) reason = "idle timeout";
      else if (
        live?.oneShot &&
        !live.established &&
        !live.holdsWork &&
        s.pending.size === 0 &&
        live.openResponses === 0 &&
        idle >= settings.sessions.oneShotIdleMs
      ) {
        reason = "one-shot idle timeout";
      }
      if (reason === undefined) continue;
      n++;
      void this.destroy(s.id, reason);
    }
    return n;
  }

  /**
   * Deletes stored sessions idle for sessions.idleTimeoutMs that are not live
   * here — they ended while no gateway ran — with everything they kept
   * (tasks, events, pending requests, SSE replay). Failures are logged.
   */
  async sweepStored(): Promise<number> {
    const { clock, settings, store, logger } = this.deps;
    let n = 0;
    try {
      const expired = await store.sessions.listExpired(clock.now() - settings.sessions.idleTimeoutMs, STORED_SWEEP_BATCH);
      for (const record of expired) {
        if (this.closed) break;
        if (this.sessions.has(record.sessionId) || [...this.resuming.keys()].some((k) => k.endsWith(` ${record.sessionId}`))) continue;
        logger.info({ sessionHash: sessionHash(record.sessionId), idleMs: clock.now() - record.lastActivityAt }, "stored_session_expired");
        await this.forgetStored(record.sessionId);
        n++;
      }
    } catch (err) {
      logger.error({ err: errorMessage(err) }, "session_store_sweep_failed");
    }
    return n;
  }

  /** A stored session that is not live here: its record and everything it kept. */
  private async forgetStored(id: string): Promise<void> {
    const { store, logger } = this.deps;
    const kinds = [store.tasks, store.events, store.pending, store.replay];
    const results = await Promise.allSettled([...kinds.map((k) => k.deleteBySession(id)), store.sessions.delete(id)]);
    for (const r of results) {
      if (r.status === "rejected") logger.error({ sessionHash: sessionHash(id), err: errorMessage(r.reason) }, "session_store_write_failed");
    }
  }

  private async deleteRecord(id: string): Promise<void> {
    try {
      await this.deps.store.sessions.delete(id);
    } catch (err) {
      this.deps.logger.error({ sessionHash: sessionHash(id), err: errorMessage(err) }, "session_store_write_failed");
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.deps.clock.clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
    await this.storedSweep;
    // The sessions' records stay for the next start (docs/adr/0007, "Wiring").
    await Promise.allSettled([...this.sessions.keys()].map((id) => this.destroy(id, "gateway shutdown", { keepRecords: true })));
  }

  private scheduleSweep(): void {
    if (this.closed) return;
    this.sweepTimer = this.deps.clock.setTimeout(() => {
      this.sweep();
      this.storedSweep ??= this.sweepStored().finally(() => (this.storedSweep = undefined));
      this.scheduleSweep();
    }, this.deps.settings.sessions.sweepIntervalMs);
  }
}
