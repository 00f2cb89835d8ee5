/**
 * TaskManager (design TK-1..TK-6): the gateway-owned tool tasks of
 * one session. working → completed | failed | cancelled | expired; a working
 * task whose call waits for the client is flagged `inputRequired` (shown as
 * MCP's `input_required`, ADR 0002 §8) and counts as working otherwise.
 *
 * Records live in the durable TaskStore (docs/adr/0007, "Wiring"); this owns
 * only what cannot be stored: each working task's TTL timer, the abort
 * controller of its upstream call and the waiters of get_task_result. Every
 * status change is one compare-and-set (`transition`), awaited before anyone
 * hears of it: waiters, events and status notifications see only committed
 * states, and `working → completed` never overwrites a `cancelled` that won.
 * An ended task gets an absolute `retainUntil` (end + completedRetentionMs,
 * never before its TTL ran out) and reads as gone from then on; the gateway's
 * sweep deletes the row (`deleteExpired`), and `enforceRetention` bounds the
 * ended tasks a session keeps. A working task carries a backstop retainUntil
 * (its expiry + the retention) so that a row whose process died is deleted
 * even if no one ever settles it.
 *
 * Store failures never crash the process: what a caller asked for directly
 * (create, get, list, cancel) rejects with EMCP_STORE_UNAVAILABLE; a
 * background transition (a call that finished) is logged and the task stays
 * as stored (its TTL timer tries again). close() aborts and clears
 * everything in memory and, when the session really ended, deletes its rows.
 */
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { EventSystem } from "../session/event-system.js";
import type { ProxyTaskStatus, RpcErrorRecord, TaskPatch, TaskQuery, TaskRecord, TaskStore } from "../store/contracts.js";
import { ACTIVE_STATUSES, isActive } from "../store/policy.js";

/** `gateway.tasks.*` (src/config/schema.ts has each default). */
export interface TaskManagerOptions {
  defaultTtlMs: number;
  maxTtlMs: number;
  completedRetentionMs: number;
  /** Working tasks plus not-yet-promoted calls. */
  maxTasksPerSession: number;
  /** Ended tasks kept per session; the oldest go first. @default DEFAULT_SETTINGS.tasks.maxRetainedPerSession */
  maxRetainedPerSession?: number;
  /** Bytes of results kept per session; the oldest ended tasks go first. @default DEFAULT_SETTINGS.tasks.maxRetainedResultBytes */
  maxRetainedResultBytes?: number;
}

export interface CreateTaskInput {
  server: string;
  toolName: string;
  toolArgs: Record<string, unknown>;
  ttlMs?: number | undefined;
  /** Aborts the upstream call behind the task (for upstream tasks: cancels the upstream task). */
  abort: AbortController;
  /** Set when the call runs as an upstream task (its id never leaves the gateway). */
  upstreamTaskId?: string | undefined;
  /** The upstream's MCP session the upstream task belongs to (HTTP upstreams), kept with the task. */
  upstreamSessionId?: string | undefined;
  pollIntervalMs?: number | undefined;
}

/** How a session's tasks end with it (Session.close). */
export interface TaskCloseOptions {
  /**
   * The gateway is shutting down, not the session: the records stay for the
   * next start (recovery settles what was running), and upstream tasks are
   * not cancelled (they can be asked about again). @default false
   */
  keepRecords?: boolean;
}

/** What only this process knows about a working task. */
interface Runtime {
  server: string;
  /**
   * An end was asked for and is being stored: later ends of the same task
   * (its aborted call failing, say) lose at once, so the first one asked wins
   * deterministically within the process (the store's compare-and-set decides across processes).
   */
  ending?: boolean;
  ttlTimer?: TimerHandle;
  abort?: AbortController;
  /** The upstream task it runs as (`byUpstream` key); a shutdown leaves it running upstream. */
  upstreamKey?: string;
  /** The last inputRequired flag asked for (status notifications only on a change). */
  inputRequired: boolean;
  /** get_task_result waiters: the ended record, or undefined when the session closed under them (made on first use: most tasks have none). */
  waiters?: Set<(ended: TaskRecord | undefined) => void>;
}

type EndStatus = Exclude<ProxyTaskStatus, "working" | "input_required">;
type EndEvent = "task_completed" | "task_failed" | "task_cancelled" | "task_expired";

export class TaskManager {
  /** Working tasks of this session that this process runs (or re-attached). */
  private readonly runtime = new Map<string, Runtime>();
  /** The running upstream tasks by `server` and upstream task id (sync lookups for what upstreams send). */
  private readonly byUpstream = new Map<string, string>();
  private inFlightCalls = 0;
  /** Upstream calls in flight that are no task (yet): close() aborts them too. */
  private readonly calls = new Set<AbortController>();
  /** Store writes nobody awaits (progress, input_required, ends of background calls): close() waits for them. */
  private readonly writes = new Set<Promise<unknown>>();
  /** Field updates run one after another, so the last one asked for is the one stored. */
  private serial: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Called after every committed status change of a task (for notifications/tasks/status). */
  onStatusChange: ((record: TaskRecord) => void) | undefined;

  constructor(
    private readonly sessionId: string,
    private readonly options: TaskManagerOptions,
    private readonly store: TaskStore,
    private readonly events: EventSystem,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
  ) {}

  /**
   * Reserves capacity for one tool call that may become a task. Throws
   * LIMIT_REACHED when the session already has maxTasksPerSession working
   * tasks and in-flight calls. Call the returned release() when the call
   * settles or becomes a task; until then close() aborts `abort`.
   */
  reserveCall(abort?: AbortController): () => void {
    const working = this.runtime.size;
    if (working + this.inFlightCalls >= this.options.maxTasksPerSession) {
      throw new GatewayError(
        ErrorCodes.LIMIT_REACHED,
        `this session already has ${working} working task(s) and ${this.inFlightCalls} call(s) in flight (max ${this.options.maxTasksPerSession}); wait for some to finish or cancel_task them`,
      );
    }
    this.inFlightCalls++;
    const unguard = abort ? this.abortOnClose(abort) : () => undefined;
    let released = false;
    return () => {
      if (!released) {
        released = true;
        this.inFlightCalls--;
        unguard();
      }
    };
  }

  /**
   * An upstream call of this session that is no task: close() aborts it (so
   * what it does on abort, e.g. cancelling an upstream task, happens before
   * the session's connections close). Does not count toward any limit.
   */
  abortOnClose(abort: AbortController): () => void {
    if (this.closed) {
      abort.abort(sessionClosed());
      return () => undefined;
    }
    this.calls.add(abort);
    return () => this.calls.delete(abort);
  }

  /** Stores a new working task (awaited: it exists once this resolves) and starts its TTL timer. */
  async create(input: CreateTaskInput): Promise<TaskRecord> {
    if (this.closed) throw closing();
    const now = this.clock.now();
    const ttlMs = Math.min(input.ttlMs ?? this.options.defaultTtlMs, this.options.maxTtlMs);
    const record: TaskRecord = {
      taskId: this.newId(),
      sessionId: this.sessionId,
      kind: "tool",
      server: input.server,
      toolName: input.toolName,
      toolArgs: input.toolArgs,
      status: "working",
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs,
      expiresAt: now + ttlMs,
      // Backstop: deleted even if no process ever settles it (ended tasks get their own below).
      retainUntil: now + ttlMs + this.options.completedRetentionMs,
      ...(input.upstreamTaskId !== undefined ? { upstreamTaskId: input.upstreamTaskId } : {}),
      ...(input.upstreamSessionId !== undefined ? { upstreamSessionId: input.upstreamSessionId } : {}),
      ...(input.pollIntervalMs !== undefined ? { pollIntervalMs: input.pollIntervalMs } : {}),
    };
    // Counted (reserveCall) and aborted by close() while the write is in flight.
    const rt: Runtime = { server: record.server, abort: input.abort, inputRequired: false };
    this.attach(record, rt);
    try {
      await this.track(this.store.create(record));
    } catch (err) {
      this.detach(record.taskId);
      throw err;
    }
    if (this.runtime.get(record.taskId) !== rt) throw closing(); // close() ran meanwhile
    rt.ttlTimer = this.clock.setTimeout(() => void this.expire(record.taskId), ttlMs);
    this.events.add("task_created", record.server, { taskId: record.taskId, toolName: record.toolName, ttlMs });
    return record;
  }

  /** The session's logger (its event system carries it). */
  get logger(): Logger | undefined {
    return this.events.logger;
  }

  /** Throws UNKNOWN_TASK for ids that do not exist, belong to another session or are past their retention. */
  async get(taskId: string): Promise<TaskRecord> {
    await this.serial; // reads see the field updates asked for before them (input_required, progress)
    const record = await this.store.get(taskId);
    if (!record || !this.visible(record)) {
      throw new GatewayError(
        ErrorCodes.UNKNOWN_TASK,
        `no task '${taskId}' in this session (tasks are deleted ${this.options.completedRetentionMs}ms after they end); call list_tasks with include_completed: true to see what exists`,
        { details: { taskId } },
      );
    }
    return record;
  }

  /** Whether the task is working and run (or re-attached) by this process: no store read. */
  isRunning(taskId: string): boolean {
    return this.runtime.has(taskId);
  }

  /**
   * The running task mapped onto `upstreamTaskId` of `server`, from memory:
   * for translating what an upstream sends while it runs, in order, without
   * waiting for a store read.
   */
  runningByUpstreamId(server: string, upstreamTaskId: string): string | undefined {
    return this.byUpstream.get(upstreamKey(server, upstreamTaskId));
  }

  /**
   * `status: "working"` lists every running task, those waiting for input
   * included; `status: "input_required"` only those.
   */
  async list(
    filter: { server?: string | undefined; status?: ProxyTaskStatus | undefined; includeCompleted?: boolean | undefined } = {},
  ): Promise<TaskRecord[]> {
    const query: TaskQuery = { kind: "tool" };
    if (filter.server !== undefined) query.server = filter.server;
    if (filter.status !== undefined) query.status = [filter.status === "input_required" ? "working" : filter.status];
    else if (filter.includeCompleted !== true) query.status = ["working"];
    await this.serial;
    const records = await this.store.listBySession(this.sessionId, query);
    return records.filter((r) => this.visible(r) && (filter.status !== "input_required" || r.inputRequired === true));
  }

  /** The gateway task mapped onto an upstream task of `server` (indexed). */
  async findByUpstreamId(server: string, upstreamTaskId: string): Promise<TaskRecord | undefined> {
    const record = await this.store.findByUpstreamTask(this.sessionId, server, upstreamTaskId);
    return record && this.visible(record) ? record : undefined;
  }

  /** Records the progress of a call this session runs (in the background, in order; a write failure is logged). */
  setProgress(taskId: string, progress: { progress: number; total?: number | undefined; message?: string | undefined }): void {
    if (!this.runtime.has(taskId)) return; // ended, or not this session's
    const patch: TaskPatch = {
      progress: {
        progress: progress.progress,
        ...(progress.total !== undefined ? { total: progress.total } : {}),
        ...(progress.message !== undefined ? { message: progress.message } : {}),
      },
      lastUpdatedAt: this.clock.now(),
      ...(progress.message ? { statusMessage: progress.message } : {}),
    };
    void this.inOrder("record progress", taskId, () => this.store.patch(taskId, patch, { ifStatus: ["working"] }));
  }

  complete(taskId: string, result: Record<string, unknown>): Promise<boolean> {
    const resultBytes = Buffer.byteLength(JSON.stringify(result));
    return this.end(taskId, "completed", { result, resultBytes }, "task_completed", { isError: result.isError === true });
  }

  fail(taskId: string, error: string, rpcError?: RpcErrorRecord): Promise<boolean> {
    return this.end(taskId, "failed", { error, statusMessage: error, ...(rpcError ? { rpcError } : {}) }, "task_failed", { error });
  }

  /**
   * An upstream task ended upstream: its result (or error) stays there until
   * the client asks for it with tasks/result.
   */
  endUpstream(taskId: string, status: "completed" | "failed" | "cancelled", statusMessage?: string): Promise<boolean> {
    const message = statusMessage ? { statusMessage } : {};
    if (status === "completed") return this.end(taskId, "completed", { resultUpstream: true, ...message }, "task_completed", {});
    const error = `the upstream task ${status}${statusMessage ? `: ${statusMessage}` : ""}`;
    return this.end(taskId, "failed", { resultUpstream: true, error, statusMessage: error }, "task_failed", { error });
  }

  /**
   * The task's call waits for the client (`waiting`), or no longer does: MCP
   * shows the task `input_required` meanwhile (spec 2025-11-25, tasks), and
   * the change is announced like any status change, once stored.
   */
  setInputRequired(taskId: string, waiting: boolean): void {
    const rt = this.runtime.get(taskId);
    if (!rt || rt.inputRequired === waiting) return;
    rt.inputRequired = waiting;
    const patch: TaskPatch = { lastUpdatedAt: this.clock.now(), ...(waiting ? { inputRequired: true } : {}) };
    void this.inOrder("record input_required", taskId, async () => {
      const updated = await this.store.patch(taskId, patch, { ifStatus: ["working"], ...(waiting ? {} : { unset: ["inputRequired"] as const }) });
      if (!updated) return;
      this.events.logger?.debug({ taskId, server: updated.server, waiting }, "task_input_required");
      this.onStatusChange?.(updated);
    });
  }

  /** Records what the upstream last said about an upstream task that is still running. */
  async noteUpstreamStatus(taskId: string, statusMessage: string | undefined): Promise<void> {
    if (statusMessage === undefined) return;
    await this.inOrder("record the upstream's status", taskId, async () => {
      const record = await this.store.get(taskId);
      if (!record || !this.visible(record) || record.status !== "working" || record.statusMessage === statusMessage) return;
      await this.store.patch(taskId, { statusMessage, lastUpdatedAt: this.clock.now() }, { ifStatus: ["working"] });
    });
  }

  /**
   * Cancels a working task, then its upstream call (the cancel is stored
   * first: the call's own end cannot overwrite it). A store failure is the
   * caller's error (EMCP_STORE_UNAVAILABLE); the task then runs on.
   */
  async cancel(taskId: string, reason = "cancelled by the client"): Promise<{ success: boolean; message: string }> {
    let record = await this.get(taskId);
    if (record.status === "working") {
      if (await this.end(taskId, "cancelled", { statusMessage: reason }, "task_cancelled", { reason }, "throw")) {
        return { success: true, message: `task ${taskId} cancelled; the upstream was sent notifications/cancelled` };
      }
      record = await this.get(taskId); // it ended meanwhile
      if (record.status === "working") return { success: false, message: `task ${taskId} is ending already (its outcome is being stored); nothing to cancel` };
    }
    return { success: false, message: `task ${taskId} is already ${record.status}; nothing to cancel` };
  }

  /**
   * The server is gone: fail its working tasks (each stored as failed before
   * its call is aborted). The ends of the tasks running here are asked for at
   * once, before this awaits anything, so they win over their calls' own
   * failures (the connection drop rejects those calls too).
   */
  async failWorkingForServer(server: string, reason: string): Promise<string[]> {
    const patch: TaskPatch = { error: reason, statusMessage: reason };
    const end = async (taskId: string) => ((await this.end(taskId, "failed", patch, "task_failed", { error: reason })) ? [taskId] : []);
    const running = [...this.runtime].flatMap(([taskId, rt]) => (rt.server === server ? [taskId] : []));
    const failed = (await Promise.all(running.map(end))).flat();
    // Stored working tasks no runtime here knows of (a resumed session's, not re-attached).
    const others = (await this.list({ server, status: "working" })).filter((r) => !running.includes(r.taskId));
    for (const r of others) failed.push(...(await end(r.taskId)));
    return failed;
  }

  /**
   * Resolves with the record once it is terminal, or with the current (working)
   * record after timeoutMs / on abort.
   */
  async waitForTerminal(taskId: string, timeoutMs: number, signal?: AbortSignal): Promise<TaskRecord> {
    const record = await this.get(taskId);
    if (record.status !== "working") return record;
    const rt = this.runtime.get(taskId);
    // Ended since the read (runtime goes when the end is committed), or run by no one here: read again.
    if (!rt) return this.get(taskId).catch(() => record);
    return new Promise((resolve) => {
      const done = (ended: TaskRecord | undefined) => {
        this.clock.clearTimeout(timer);
        rt.waiters?.delete(done);
        signal?.removeEventListener("abort", onAbort);
        resolve(ended ?? { ...record, status: "cancelled", statusMessage: "session closed" });
      };
      const onAbort = () => {
        rt.waiters?.delete(done);
        this.clock.clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.store.get(taskId).then(
          (r) => resolve(r ?? record),
          () => resolve(record),
        );
      };
      const timer = this.clock.setTimeout(onAbort, timeoutMs);
      (rt.waiters ??= new Set()).add(done);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * A resumed session's stored working tasks (those a restart left running:
   * upstream tasks on HTTP upstreams) get their TTL timers back, from their
   * absolute expiry — a restart neither extends nor forgets a TTL. Returns
   * how many were re-attached.
   */
  async restore(): Promise<number> {
    let n = 0;
    const working = this.closed ? [] : await this.list({ status: "working" });
    for (const r of working) {
      if (this.closed || this.runtime.has(r.taskId)) continue;
      const rt: Runtime = { server: r.server, inputRequired: r.inputRequired === true };
      rt.ttlTimer = this.clock.setTimeout(() => void this.expire(r.taskId), Math.max(0, r.expiresAt - this.clock.now()));
      this.attach(r, rt);
      n++;
    }
    return n;
  }

  /**
   * Aborts working calls, clears every timer and wakes every waiter, then
   * waits for the writes in flight; deletes the session's records unless
   * `keepRecords` (the gateway is shutting down; see TaskCloseOptions).
   */
  async close(options: TaskCloseOptions = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const abort of [...this.calls]) abort.abort(sessionClosed());
    this.calls.clear();
    for (const rt of this.runtime.values()) {
      this.clock.clearTimeout(rt.ttlTimer);
      if (!(options.keepRecords && rt.upstreamKey !== undefined)) rt.abort?.abort("session closed");
      for (const w of [...(rt.waiters ?? [])]) w(undefined);
    }
    this.runtime.clear();
    this.byUpstream.clear();
    while (this.writes.size) await Promise.allSettled([...this.writes]);
    if (options.keepRecords) return;
    try {
      await this.store.deleteBySession(this.sessionId);
    } catch (err) {
      this.logger?.error({ err: errorMessage(err) }, "task_store_write_failed");
    }
  }

  /** Number of live timers (for leak tests). */
  get timerCount(): number {
    let n = 0;
    for (const rt of this.runtime.values()) n += rt.ttlTimer ? 1 : 0;
    return n;
  }

  private async expire(taskId: string): Promise<void> {
    const rt = this.runtime.get(taskId);
    if (!rt) return;
    delete rt.ttlTimer;
    let ended = false;
    try {
      const record = await this.store.get(taskId);
      if (!record) {
        this.detach(taskId); // deleted meanwhile: nothing left to expire
        return;
      }
      const reason = `task expired: its TTL of ${record.ttlMs}ms ran out before the upstream answered`;
      ended = await this.end(taskId, "expired", { error: reason, statusMessage: reason }, "task_expired", { ttlMs: record.ttlMs });
    } catch (err) {
      this.logger?.error({ taskId, err: errorMessage(err) }, "task_store_write_failed");
    }
    if (!ended && this.runtime.get(taskId) === rt) {
      // Not stored (the store failed): try again later rather than leave the task running forever.
      rt.ttlTimer = this.clock.setTimeout(() => void this.expire(taskId), Math.max(1_000, this.options.completedRetentionMs / 10));
    }
  }

  /**
   * finish(), then abort the task's call if it was still running (its own end
   * then loses the compare-and-set). With `errors: "throw"` a store failure
   * rejects (the caller asked for this change) instead of being logged.
   */
  private async end(
    taskId: string,
    status: EndStatus,
    patch: TaskPatch,
    eventType: EndEvent,
    eventData: Record<string, unknown>,
    errors: "log" | "throw" = "log",
  ): Promise<boolean> {
    const rt = this.runtime.get(taskId);
    if (rt?.ending) return false;
    if (rt) rt.ending = true;
    let ended: TaskRecord | undefined;
    try {
      ended = await this.finish(taskId, status, patch, eventType, eventData, errors);
    } finally {
      if (rt && !ended) rt.ending = false; // not stored: a later end may try again
    }
    if (ended && status !== "completed") rt?.abort?.abort(String(patch.statusMessage ?? status));
    return ended !== undefined;
  }

  /**
   * The one way a task ends: a compare-and-set from a running status. Only
   * the winner clears the runtime, wakes the waiters, adds the event and
   * tells onStatusChange — all after the write committed. Returns the new
   * record, or undefined when the task was not running (or not this
   * session's) or the store failed (logged, or thrown with `errors: "throw"`;
   * the task stays as stored).
   */
  private finish(
    taskId: string,
    status: EndStatus,
    patch: TaskPatch,
    eventType: EndEvent,
    eventData: Record<string, unknown>,
    errors: "log" | "throw",
  ): Promise<TaskRecord | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    return this.track(
      (async (): Promise<TaskRecord | undefined> => {
        try {
          const current = await this.store.get(taskId);
          if (!current || current.sessionId !== this.sessionId || !isActive(current.status)) return undefined;
          const now = this.clock.now();
          // Kept for the retention period, and never deleted before its TTL (counted from creation) is over.
          const retainUntil = Math.max(now + this.options.completedRetentionMs, current.createdAt + current.ttlMs);
          const updated = await this.store.transition(taskId, {
            from: ACTIVE_STATUSES,
            to: status,
            patch: { ...patch, lastUpdatedAt: now, retainUntil },
            unset: ["inputRequired"],
          });
          if (!updated) return undefined;
          const rt = this.detach(taskId);
          if (rt) this.clock.clearTimeout(rt.ttlTimer);
          this.events.add(eventType, updated.server, { taskId, toolName: updated.toolName, ...eventData });
          // Operator log events (design EV-13): task_completed, task_failed (cancelled and expired alike), named as the events.
          const level = status === "failed" || status === "expired" ? "warn" : "info";
          this.logger?.[level]({ taskId, server: updated.server, tool: updated.toolName, ...eventData }, eventType);
          for (const w of [...(rt?.waiters ?? [])]) w(updated);
          this.onStatusChange?.(updated);
          void this.track(this.enforceRetention(taskId));
          return updated;
        } catch (err) {
          this.logger?.error({ taskId, status, err: errorMessage(err) }, "task_store_write_failed");
          if (errors === "throw") throw err;
          return undefined;
        }
      })(),
    );
  }

  /**
   * Deletes the oldest ended tasks while the session keeps too many, or too
   * many result bytes. The task that just ended is never deleted for its
   * own size: its client may be about to ask for the result.
   */
  private async enforceRetention(justEnded: string): Promise<void> {
    try {
      await this.store.enforceRetention(this.sessionId, {
        maxCount: this.options.maxRetainedPerSession ?? DEFAULT_SETTINGS.tasks.maxRetainedPerSession,
        maxBytes: this.options.maxRetainedResultBytes ?? DEFAULT_SETTINGS.tasks.maxRetainedResultBytes,
        keep: justEnded,
        kind: "tool",
      });
    } catch (err) {
      this.logger?.error({ err: errorMessage(err) }, "task_store_write_failed");
    }
  }

  private attach(record: TaskRecord, rt: Runtime): void {
    if (record.upstreamTaskId !== undefined) {
      rt.upstreamKey = upstreamKey(record.server, record.upstreamTaskId);
      this.byUpstream.set(rt.upstreamKey, record.taskId);
    }
    this.runtime.set(record.taskId, rt);
  }

  private detach(taskId: string): Runtime | undefined {
    const rt = this.runtime.get(taskId);
    this.runtime.delete(taskId);
    if (rt?.upstreamKey !== undefined) this.byUpstream.delete(rt.upstreamKey);
    return rt;
  }

  /** Runs field updates one after another (each sees the previous); a failure is logged, never thrown. */
  private inOrder(what: string, taskId: string, op: () => Promise<unknown>): Promise<void> {
    const run = this.serial.then(op).then(
      () => undefined,
      (err: unknown) => this.logger?.error({ taskId, err: errorMessage(err) }, `task_store_write_failed: ${what}`),
    );
    this.serial = run;
    return this.track(run);
  }

  /** Remembers a write until it settles (close() waits for them). */
  private track<T>(p: Promise<T>): Promise<T> {
    this.writes.add(p);
    const forget = () => this.writes.delete(p);
    p.then(forget, forget);
    return p;
  }

  /** This session's tool task, not past its retention. */
  private visible(r: TaskRecord): boolean {
    return (
      r.sessionId === this.sessionId && (r.kind ?? "tool") === "tool" && (r.retainUntil === undefined || r.retainUntil > this.clock.now() || isActive(r.status))
    );
  }
}

function upstreamKey(server: string, upstreamTaskId: string): string {
  return `${server}\u0000${upstreamTaskId}`;
}

function closing(): GatewayError {
  return new GatewayError(ErrorCodes.CLOSED, "the session is closing");
}

/** Why close() aborts a call that is no task: callers answer with it (EMCP_CLOSED). */
function sessionClosed(): GatewayError {
  return new GatewayError(ErrorCodes.CLOSED, "the session closed while the call was running; nothing of it is kept");
}

export function isTerminal(status: ProxyTaskStatus): boolean {
  return !isActive(status);
}
