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
 *
 * How a task ends (the compare-and-set, expiry, retention) is in
 * task-ends.ts; the in-memory runtime and the write queue in task-runtime.ts.
 */
import type { Clock, IdGenerator } from "../clock.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { EventSystem } from "../session/event-system.js";
import type { ProxyTaskStatus, RpcErrorRecord, TaskPatch, TaskQuery, TaskRecord, TaskStore } from "../store/contracts.js";
import { isActive } from "../store/policy.js";
import { endTask, expireTask, visible, waitForEnd, type TaskScope } from "./task-ends.js";
import { noteUpstreamStatus, setInputRequired, setProgress, type ProgressUpdate } from "./task-fields.js";
import { attach, detach, TaskWrites, upstreamKey, type Runtime } from "./task-runtime.js";
import type { CreateTaskInput, TaskCloseOptions, TaskManagerOptions } from "./task-types.js";

export type { CreateTaskInput, TaskCloseOptions, TaskManagerOptions } from "./task-types.js";

export class TaskManager {
  /** Working tasks of this session that this process runs (or re-attached). */
  private readonly runtime = new Map<string, Runtime>();
  /** The running upstream tasks by `server` and upstream task id (sync lookups for what upstreams send). */
  private readonly byUpstream = new Map<string, string>();
  private inFlightCalls = 0;
  /** Upstream calls in flight that are no task (yet): close() aborts them too. */
  private readonly calls = new Set<AbortController>();
  /** Store writes nobody awaits (progress, input_required, ends of background calls): close() waits for them. */
  private readonly writes = new TaskWrites(() => this.logger);
  private closed = false;
  /** What the task ends (task-ends.ts) read and write. */
  private readonly scope: TaskScope;
  /** Called after every committed status change of a task (for notifications/tasks/status). */
  onStatusChange: ((record: TaskRecord) => void) | undefined;

  constructor(
    private readonly sessionId: string,
    private readonly options: TaskManagerOptions,
    private readonly store: TaskStore,
    private readonly events: EventSystem,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
  ) {
    this.scope = {
      sessionId,
      options,
      store,
      events,
      clock,
      runtime: this.runtime,
      byUpstream: this.byUpstream,
      writes: this.writes,
      isClosed: () => this.closed,
      statusChanged: (record) => this.onStatusChange?.(record),
    };
  }

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
    const rt: Runtime = { server: record.server, abort: input.abort, inputRequired: false, ...(input.settledByCall ? { settledByCall: true } : {}) };
    attach(this.scope, record, rt);
    try {
      await this.writes.track(this.store.create(record));
    } catch (err) {
      detach(this.scope, record.taskId);
      throw err;
    }
    if (this.runtime.get(record.taskId) !== rt) throw closing(); // close() ran meanwhile
    rt.ttlTimer = this.clock.setTimeout(() => void expireTask(this.scope, record.taskId), ttlMs);
    this.events.add("task_created", record.server, { taskId: record.taskId, toolName: record.toolName, ttlMs });
    return record;
  }

  /** The session's logger (its event system carries it). */
  get logger(): Logger | undefined {
    return this.events.logger;
  }

  /** Throws UNKNOWN_TASK for ids that do not exist, belong to another session or are past their retention. */
  async get(taskId: string): Promise<TaskRecord> {
    await this.writes.ordered; // reads see the field updates asked for before them (input_required, progress)
    // Ended, but the store could not take the end yet (it is retried): the client gets it, even while the store cannot be read.
    const unstored = this.runtime.get(taskId)?.unstored;
    if (unstored) return unstored;
    const record = await this.store.get(taskId);
    if (!record || !visible(this.scope, record)) {
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
   * Whether a call of this process will settle the task with its result
   * (execute_tool's promoted call); false for a task re-attached after a
   * restart, whose upstream task must be asked instead.
   */
  settledByCall(taskId: string): boolean {
    return this.runtime.get(taskId)?.settledByCall === true;
  }

  /** Whether the task was re-attached after a restart (restore()): no call of this process runs it or can cancel it. */
  isReattached(taskId: string): boolean {
    const rt = this.runtime.get(taskId);
    return rt !== undefined && rt.abort === undefined;
  }

  /** Tasks of this session running on `server` now. */
  runningOn(server: string): number {
    let n = 0;
    for (const rt of this.runtime.values()) if (rt.server === server) n++;
    return n;
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
    await this.writes.ordered;
    const records = await this.store.listBySession(this.sessionId, query);
    return records.filter((r) => visible(this.scope, r) && (filter.status !== "input_required" || r.inputRequired === true));
  }

  /** The gateway task mapped onto an upstream task of `server` (indexed). */
  async findByUpstreamId(server: string, upstreamTaskId: string): Promise<TaskRecord | undefined> {
    const record = await this.store.findByUpstreamTask(this.sessionId, server, upstreamTaskId);
    return record && visible(this.scope, record) ? record : undefined;
  }

  /** Records the progress of a call this session runs (task-fields.ts). */
  setProgress(taskId: string, progress: ProgressUpdate): void {
    setProgress(this.scope, taskId, progress);
    this.announceUpdate(taskId);
  }

  complete(taskId: string, result: Record<string, unknown>): Promise<boolean> {
    const resultBytes = Buffer.byteLength(JSON.stringify(result));
    return endTask(this.scope, taskId, "completed", { result, resultBytes }, "task_completed", { isError: result.isError === true });
  }

  fail(taskId: string, error: string, rpcError?: RpcErrorRecord): Promise<boolean> {
    return endTask(this.scope, taskId, "failed", { error, statusMessage: error, ...(rpcError ? { rpcError } : {}) }, "task_failed", { error });
  }

  /**
   * An upstream task ended upstream: its result (or error) stays there until
   * the client asks for it with tasks/result.
   */
  endUpstream(taskId: string, status: "completed" | "failed" | "cancelled", statusMessage?: string): Promise<boolean> {
    const message = statusMessage ? { statusMessage } : {};
    if (status === "completed") return endTask(this.scope, taskId, "completed", { resultUpstream: true, ...message }, "task_completed", {});
    const error = `the upstream task ${status}${statusMessage ? `: ${statusMessage}` : ""}`;
    return endTask(this.scope, taskId, "failed", { resultUpstream: true, error, statusMessage: error }, "task_failed", { error });
  }

  /** The task's call waits for the client, or no longer does: shown as `input_required` (task-fields.ts). */
  setInputRequired(taskId: string, waiting: boolean): void {
    setInputRequired(this.scope, taskId, waiting);
    this.announceUpdate(taskId);
  }

  /** Tells the event system's observers (the web console) that a running task's fields changed; no event is stored. */
  private announceUpdate(taskId: string): void {
    const rt = this.runtime.get(taskId);
    if (rt) this.events.announce({ type: "task_updated", server: rt.server, data: { taskId } });
  }

  /** Records what the upstream last said about an upstream task that is still running (task-fields.ts). */
  noteUpstreamStatus(taskId: string, statusMessage: string | undefined): Promise<void> {
    return noteUpstreamStatus(this.scope, taskId, statusMessage);
  }

  /**
   * Maps a running task onto the upstream task its call runs as, once the
   * upstream named it after the task was created (execute_tool's promotion
   * waits only so long for it: design MF-20). In the background, in order;
   * only a still-working task is patched.
   */
  mapUpstream(taskId: string, mapping: { upstreamTaskId: string; upstreamSessionId?: string | undefined; pollIntervalMs?: number | undefined }): void {
    const rt = this.runtime.get(taskId);
    if (!rt || rt.upstreamKey !== undefined) return;
    rt.upstreamKey = upstreamKey(rt.server, mapping.upstreamTaskId);
    this.byUpstream.set(rt.upstreamKey, taskId);
    const patch: TaskPatch = {
      upstreamTaskId: mapping.upstreamTaskId,
      ...(mapping.upstreamSessionId !== undefined ? { upstreamSessionId: mapping.upstreamSessionId } : {}),
      ...(mapping.pollIntervalMs !== undefined ? { pollIntervalMs: mapping.pollIntervalMs } : {}),
      lastUpdatedAt: this.clock.now(),
    };
    void this.writes.inOrder("record the upstream task", taskId, () => this.store.patch(taskId, patch, { ifStatus: ["working"] }));
  }

  /**
   * Cancels a working task, then its upstream call (the cancel is stored
   * first: the call's own end cannot overwrite it). A store failure is the
   * caller's error (EMCP_STORE_UNAVAILABLE); the task then runs on.
   */
  async cancel(taskId: string, reason = "cancelled by the client"): Promise<{ success: boolean; message: string }> {
    let record = await this.get(taskId);
    if (record.status === "working") {
      if (await endTask(this.scope, taskId, "cancelled", { statusMessage: reason }, "task_cancelled", { reason }, "throw")) {
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
    const end = async (taskId: string) => ((await endTask(this.scope, taskId, "failed", patch, "task_failed", { error: reason })) ? [taskId] : []);
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
    return waitForEnd(this.scope, rt, record, timeoutMs, signal);
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
      rt.ttlTimer = this.clock.setTimeout(() => void expireTask(this.scope, r.taskId), Math.max(0, r.expiresAt - this.clock.now()));
      attach(this.scope, r, rt);
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
    await this.writes.settle();
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
