/**
 * TaskManager (design TK-1..TK-6): the gateway-owned tool tasks of one
 * session, over the durable TaskStore. What only this process holds is in
 * TaskRuntimes and TaskWrites (task-runtime.ts), how a task ends in TaskEnds
 * (task-ends.ts). See docs/design/tasks.md, "How the code keeps it".
 */
import type { Clock, IdGenerator } from "../clock.js";
import { ErrorCodes, GatewayError, errorMessage, type RpcErrorRecord } from "../errors.js";
import type { Logger } from "../logging.js";
import type { ProxyTaskStatus, TaskPatch, TaskQuery, TaskRecord, TaskStore } from "../store/contracts.js";
import { isActive } from "../store/policy.js";
import { TaskEnds } from "./task-ends.js";
import type { TaskEvents } from "./task-events.js";
import { TaskRuntimes, TaskWrites, type Runtime } from "./task-runtime.js";
import type { CreateTaskInput, TaskCloseOptions, TaskManagerOptions } from "./task-types.js";

/** A call's progress, as the SDK reports it. */
export interface ProgressUpdate {
  progress: number;
  total?: number | undefined;
  message?: string | undefined;
}

export class TaskManager {
  private readonly runtimes: TaskRuntimes;
  private readonly writes: TaskWrites;
  private readonly ends: TaskEnds;
  private inFlightCalls = 0;
  /** Called after every committed status change of a task (for notifications/tasks/status). */
  onStatusChange: ((record: TaskRecord) => void) | undefined;
  /**
   * Asked by reserveCall() after the session's own limit: throws to refuse the
   * call (the limit per principal across sessions, session/principal-limits.ts).
   */
  admit: (() => void) | undefined;

  constructor(
    private readonly sessionId: string,
    private readonly options: TaskManagerOptions,
    private readonly store: TaskStore,
    private readonly events: TaskEvents,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
  ) {
    this.runtimes = new TaskRuntimes(clock);
    this.writes = new TaskWrites(events.logger);
    this.ends = new TaskEnds(sessionId, options, store, events, clock, this.runtimes, this.writes, (record) => this.onStatusChange?.(record));
  }

  /**
   * Reserves capacity for one tool call that may become a task. Throws
   * LIMIT_REACHED when the session already has maxTasksPerSession working
   * tasks and in-flight calls, or what `admit` throws. Call the returned
   * release() when the call settles or becomes a task; until then close()
   * aborts `abort`.
   */
  reserveCall(abort?: AbortController): () => void {
    const working = this.runtimes.size;
    if (working + this.inFlightCalls >= this.options.maxTasksPerSession) {
      throw new GatewayError(
        ErrorCodes.LIMIT_REACHED,
        `this session already has ${working} working task(s) and ${this.inFlightCalls} call(s) in flight (max ${this.options.maxTasksPerSession}); wait for some to finish or cancel_task them`,
      );
    }
    this.admit?.();
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

  /** Working tasks (run or re-attached here) plus calls in flight that may become one: what both task limits count. */
  get load(): number {
    return this.runtimes.size + this.inFlightCalls;
  }

  /**
   * An upstream call of this session that is no task: close() aborts it (so
   * what it does on abort, e.g. cancelling an upstream task, happens before
   * the session's connections close). Does not count toward any limit.
   */
  abortOnClose(abort: AbortController): () => void {
    return this.runtimes.abortOnClose(abort);
  }

  /** Stores a new working task (awaited: it exists once this resolves) and starts its TTL timer. */
  async create(input: CreateTaskInput): Promise<TaskRecord> {
    if (this.runtimes.closed) throw closing();
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
    this.runtimes.attach(record, rt);
    try {
      await this.writes.track(this.store.create(record));
    } catch (err) {
      this.runtimes.detach(record.taskId);
      throw err;
    }
    if (this.runtimes.get(record.taskId) !== rt) throw closing(); // close() ran meanwhile
    this.ends.expireAfter(record.taskId, rt, ttlMs);
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
    const unstored = this.runtimes.get(taskId)?.unstored;
    if (unstored) return unstored;
    const record = await this.store.get(taskId);
    if (!record || !this.ends.visible(record)) {
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
    return this.runtimes.has(taskId);
  }

  /**
   * Whether a call of this process will settle the task with its result
   * (execute_tool's promoted call); false for a task re-attached after a
   * restart, whose upstream task must be asked instead.
   */
  settledByCall(taskId: string): boolean {
    return this.runtimes.get(taskId)?.settledByCall === true;
  }

  /** Whether the task was re-attached after a restart (restore()): no call of this process runs it or can cancel it. */
  isReattached(taskId: string): boolean {
    const rt = this.runtimes.get(taskId);
    return rt !== undefined && rt.abort === undefined;
  }

  /** Tasks of this session running on `server` now. */
  runningOn(server: string): number {
    return this.runtimes.runningOn(server).length;
  }

  /**
   * The running task mapped onto `upstreamTaskId` of `server`, from memory:
   * for translating what an upstream sends while it runs, in order, without
   * waiting for a store read.
   */
  runningByUpstreamId(server: string, upstreamTaskId: string): string | undefined {
    return this.runtimes.byUpstreamTask(server, upstreamTaskId);
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
    return records.filter((r) => this.ends.visible(r) && (filter.status !== "input_required" || r.inputRequired === true));
  }

  /** The gateway task mapped onto an upstream task of `server` (indexed). */
  async findByUpstreamId(server: string, upstreamTaskId: string): Promise<TaskRecord | undefined> {
    const record = await this.store.findByUpstreamTask(this.sessionId, server, upstreamTaskId);
    return record && this.ends.visible(record) ? record : undefined;
  }

  /** Records the progress of a call this session runs (in the background, in order; a write failure is logged). */
  setProgress(taskId: string, progress: ProgressUpdate): void {
    if (!this.runtimes.has(taskId)) return; // ended, or not this session's
    const patch: TaskPatch = {
      progress: {
        progress: progress.progress,
        ...(progress.total !== undefined ? { total: progress.total } : {}),
        ...(progress.message !== undefined ? { message: progress.message } : {}),
      },
      lastUpdatedAt: this.clock.now(),
      ...(progress.message ? { statusMessage: progress.message } : {}),
    };
    void this.writes.inOrder("record progress", taskId, () => this.store.patch(taskId, patch, { ifStatus: ["working"] }));
    this.announceUpdate(taskId);
  }

  complete(taskId: string, result: Record<string, unknown>): Promise<boolean> {
    const resultBytes = Buffer.byteLength(JSON.stringify(result));
    return this.ends.end(taskId, "completed", { result, resultBytes }, "task_completed", { isError: result.isError === true });
  }

  fail(taskId: string, error: string, rpcError?: RpcErrorRecord): Promise<boolean> {
    return this.ends.end(taskId, "failed", { error, statusMessage: error, ...(rpcError ? { rpcError } : {}) }, "task_failed", { error });
  }

  /**
   * An upstream task ended upstream: its result (or error) stays there until
   * the client asks for it with tasks/result.
   */
  endUpstream(taskId: string, status: "completed" | "failed" | "cancelled", statusMessage?: string): Promise<boolean> {
    const message = statusMessage ? { statusMessage } : {};
    if (status === "completed") return this.ends.end(taskId, "completed", { resultUpstream: true, ...message }, "task_completed", {});
    const error = `the upstream task ${status}${statusMessage ? `: ${statusMessage}` : ""}`;
    return this.ends.end(taskId, "failed", { resultUpstream: true, error, statusMessage: error }, "task_failed", { error });
  }

  /**
   * The task's call waits for the client (`waiting`), or no longer does: MCP
   * shows the task `input_required` meanwhile (spec 2025-11-25, tasks; ADR
   * 0002 §8), and the change is announced like any status change, once stored.
   */
  setInputRequired(taskId: string, waiting: boolean): void {
    const rt = this.runtimes.get(taskId);
    if (rt && rt.inputRequired !== waiting) {
      rt.inputRequired = waiting;
      const patch: TaskPatch = { lastUpdatedAt: this.clock.now(), ...(waiting ? { inputRequired: true } : {}) };
      void this.writes.inOrder("record input_required", taskId, async () => {
        const updated = await this.store.patch(taskId, patch, { ifStatus: ["working"], ...(waiting ? {} : { unset: ["inputRequired"] as const }) });
        if (!updated) return;
        this.logger?.debug({ taskId, server: updated.server, waiting }, "task_input_required");
        this.onStatusChange?.(updated);
      });
    }
    this.announceUpdate(taskId);
  }

  /** Tells the event system's observers (the web console) that a running task's fields changed; no event is stored. */
  private announceUpdate(taskId: string): void {
    const rt = this.runtimes.get(taskId);
    if (rt) this.events.announce({ type: "task_updated", server: rt.server, data: { taskId } });
  }

  /** Records what the upstream last said about an upstream task that is still running. */
  async noteUpstreamStatus(taskId: string, statusMessage: string | undefined): Promise<void> {
    if (statusMessage === undefined) return;
    await this.writes.inOrder("record the upstream's status", taskId, async () => {
      const record = await this.store.get(taskId);
      if (!record || !this.ends.visible(record) || record.status !== "working" || record.statusMessage === statusMessage) return;
      await this.store.patch(taskId, { statusMessage, lastUpdatedAt: this.clock.now() }, { ifStatus: ["working"] });
    });
  }

  /**
   * Maps a running task onto the upstream task its call runs as, once the
   * upstream named it after the task was created (execute_tool's promotion
   * waits only so long for it: design MF-20). In the background, in order;
   * only a still-working task is patched.
   */
  mapUpstream(taskId: string, mapping: { upstreamTaskId: string; upstreamSessionId?: string | undefined; pollIntervalMs?: number | undefined }): void {
    if (!this.runtimes.mapUpstream(taskId, mapping.upstreamTaskId)) return;
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
      if (await this.ends.end(taskId, "cancelled", { statusMessage: reason }, "task_cancelled", { reason }, "throw")) {
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
    const end = async (taskId: string) => ((await this.ends.end(taskId, "failed", patch, "task_failed", { error: reason })) ? [taskId] : []);
    const running = this.runtimes.runningOn(server);
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
    const rt = this.runtimes.get(taskId);
    // Ended since the read (runtime goes when the end is committed), or run by no one here: read again.
    if (!rt) return this.get(taskId).catch(() => record);
    return this.ends.waitFor(rt, record, timeoutMs, signal);
  }

  /**
   * A resumed session's stored working tasks (those a restart left running:
   * upstream tasks on HTTP upstreams) get their TTL timers back, from their
   * absolute expiry — a restart neither extends nor forgets a TTL. Returns
   * how many were re-attached.
   */
  async restore(): Promise<number> {
    let n = 0;
    const working = this.runtimes.closed ? [] : await this.list({ status: "working" });
    for (const r of working) {
      if (this.runtimes.closed || this.runtimes.has(r.taskId)) continue;
      const rt: Runtime = { server: r.server, inputRequired: r.inputRequired === true };
      this.ends.expireAfter(r.taskId, rt, Math.max(0, r.expiresAt - this.clock.now()));
      this.runtimes.attach(r, rt);
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
    if (this.runtimes.closed) return;
    this.runtimes.close(options.keepRecords === true);
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
    return this.runtimes.timerCount;
  }
}

function closing(): GatewayError {
  return new GatewayError(ErrorCodes.CLOSED, "the session is closing");
}

export function isTerminal(status: ProxyTaskStatus): boolean {
  return !isActive(status);
}
