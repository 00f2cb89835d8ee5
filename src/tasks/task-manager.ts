/**
 * TaskManager (seed 000 §1.1, seed 003 §2): the gateway-owned tasks of one
 * session. working → completed | failed | cancelled | expired; a working task
 * whose call waits for the client is flagged `inputRequired` (shown as MCP's
 * `input_required`, ADR 0002 §8) and counts as working otherwise; every terminal
 * task is kept for `completedRetentionMs` and then deleted. Each task has one
 * TTL timer and, once terminal, one retention timer; both are cleared on every
 * path (including close()). A task's in-flight upstream call is aborted on
 * cancel, expiry and close (the SDK then sends notifications/cancelled).
 */
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { Logger } from "../logging.js";
import type { EventSystem } from "../session/event-system.js";
import { TERMINAL_STATUSES, type ProxyTaskRecord, type ProxyTaskStatus, type RpcErrorRecord, type TaskRecordStore } from "../store/task-store.js";

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
  pollIntervalMs?: number | undefined;
}

interface Runtime {
  ttlTimer?: TimerHandle;
  retentionTimer?: TimerHandle;
  abort?: AbortController;
  waiters: Set<(record: ProxyTaskRecord) => void>;
}

export class TaskManager {
  private readonly runtime = new Map<string, Runtime>();
  private inFlightCalls = 0;
  /** Upstream calls in flight that are no task (yet): close() aborts them too. */
  private readonly calls = new Set<AbortController>();
  private closed = false;
  /** Called after every status change of a task (for notifications/tasks/status). */
  onStatusChange: ((record: ProxyTaskRecord) => void) | undefined;

  constructor(
    private readonly sessionId: string,
    private readonly options: TaskManagerOptions,
    private readonly store: TaskRecordStore,
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
    const working = this.list({ status: "working" }).length;
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

  create(input: CreateTaskInput): ProxyTaskRecord {
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, "the session is closing");
    const now = this.clock.now();
    const ttlMs = Math.min(input.ttlMs ?? this.options.defaultTtlMs, this.options.maxTtlMs);
    const record: ProxyTaskRecord = {
      taskId: this.newId(),
      sessionId: this.sessionId,
      server: input.server,
      toolName: input.toolName,
      toolArgs: input.toolArgs,
      status: "working",
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs,
      expiresAt: now + ttlMs,
      ...(input.upstreamTaskId !== undefined ? { upstreamTaskId: input.upstreamTaskId } : {}),
      ...(input.pollIntervalMs !== undefined ? { pollIntervalMs: input.pollIntervalMs } : {}),
    };
    this.store.put(record);
    const rt: Runtime = { abort: input.abort, waiters: new Set() };
    rt.ttlTimer = this.clock.setTimeout(() => this.expire(record.taskId), ttlMs);
    this.runtime.set(record.taskId, rt);
    this.events.add("task_created", record.server, { taskId: record.taskId, toolName: record.toolName, ttlMs });
    return { ...record };
  }

  /** The session's logger (its event system carries it). */
  get logger(): Logger | undefined {
    return this.events.logger;
  }

  /** Throws UNKNOWN_TASK for ids that do not exist or belong to another session. */
  get(taskId: string): ProxyTaskRecord {
    const record = this.store.get(taskId);
    if (!record || record.sessionId !== this.sessionId || !isToolTask(record)) {
      throw new GatewayError(
        ErrorCodes.UNKNOWN_TASK,
        `no task '${taskId}' in this session (tasks are deleted ${this.options.completedRetentionMs}ms after they end); call list_tasks with include_completed: true to see what exists`,
        { details: { taskId } },
      );
    }
    return { ...record };
  }

  /**
   * `status: "working"` lists every running task, those waiting for input
   * included; `status: "input_required"` only those.
   */
  list(filter: { server?: string | undefined; status?: ProxyTaskStatus | undefined; includeCompleted?: boolean | undefined } = {}): ProxyTaskRecord[] {
    const matches = (r: ProxyTaskRecord): boolean => {
      if (filter.status === "input_required") return r.status === "working" && r.inputRequired === true;
      return filter.status !== undefined ? r.status === filter.status : filter.includeCompleted === true || r.status === "working";
    };
    return this.store.listBySession(this.sessionId).filter((r) => isToolTask(r) && (filter.server === undefined || r.server === filter.server) && matches(r));
  }

  /** The gateway task mapped onto an upstream task of `server`. */
  findByUpstreamId(server: string, upstreamTaskId: string): ProxyTaskRecord | undefined {
    return this.list({ server, includeCompleted: true }).find((r) => r.upstreamTaskId === upstreamTaskId);
  }

  setProgress(taskId: string, progress: { progress: number; total?: number | undefined; message?: string | undefined }): void {
    const record = this.store.get(taskId);
    if (!record || record.status !== "working") return;
    this.store.put({
      ...record,
      progress: {
        progress: progress.progress,
        ...(progress.total !== undefined ? { total: progress.total } : {}),
        ...(progress.message !== undefined ? { message: progress.message } : {}),
      },
      lastUpdatedAt: this.clock.now(),
      ...(progress.message ? { statusMessage: progress.message } : {}),
    });
  }

  complete(taskId: string, result: Record<string, unknown>): boolean {
    const resultBytes = Buffer.byteLength(JSON.stringify(result));
    return this.finish(taskId, "completed", { result, resultBytes }, "task_completed", { isError: result.isError === true });
  }

  fail(taskId: string, error: string, rpcError?: RpcErrorRecord): boolean {
    return this.finish(taskId, "failed", { error, statusMessage: error, ...(rpcError ? { rpcError } : {}) }, "task_failed", { error });
  }

  /**
   * An upstream task ended upstream: its result (or error) stays there until
   * the client asks for it with tasks/result.
   */
  endUpstream(taskId: string, status: "completed" | "failed" | "cancelled", statusMessage?: string): boolean {
    const message = statusMessage ? { statusMessage } : {};
    if (status === "completed") return this.finish(taskId, "completed", { resultUpstream: true, ...message }, "task_completed", {});
    const error = `the upstream task ${status}${statusMessage ? `: ${statusMessage}` : ""}`;
    return this.finish(taskId, "failed", { resultUpstream: true, error, statusMessage: error }, "task_failed", { error });
  }

  /**
   * The task's call waits for the client (`waiting`), or no longer does: MCP
   * shows the task `input_required` meanwhile (spec 2025-11-25, tasks), and
   * the change is announced like any status change.
   */
  setInputRequired(taskId: string, waiting: boolean): void {
    const record = this.store.get(taskId);
    if (!record || record.status !== "working" || (record.inputRequired === true) === waiting) return;
    const { inputRequired: _was, ...rest } = record;
    const updated: ProxyTaskRecord = { ...rest, ...(waiting ? { inputRequired: true } : {}), lastUpdatedAt: this.clock.now() };
    this.store.put(updated);
    this.events.logger?.debug({ taskId, server: record.server, waiting }, "task_input_required");
    this.onStatusChange?.({ ...updated });
  }

  /** Records what the upstream last said about an upstream task that is still running. */
  noteUpstreamStatus(taskId: string, statusMessage: string | undefined): void {
    const record = this.store.get(taskId);
    if (!record || record.status !== "working" || statusMessage === undefined || statusMessage === record.statusMessage) return;
    this.store.put({ ...record, statusMessage, lastUpdatedAt: this.clock.now() });
  }

  /** Cancels a working task and its upstream call. */
  cancel(taskId: string, reason = "cancelled by the client"): { success: boolean; message: string } {
    const record = this.get(taskId);
    if (record.status !== "working") {
      return { success: false, message: `task ${taskId} is already ${record.status}; nothing to cancel` };
    }
    this.runtime.get(taskId)?.abort?.abort(reason);
    this.finish(taskId, "cancelled", { statusMessage: reason }, "task_cancelled", { reason });
    return { success: true, message: `task ${taskId} cancelled; the upstream was sent notifications/cancelled` };
  }

  /** The server is gone: fail its working tasks. */
  failWorkingForServer(server: string, reason: string): string[] {
    const failed: string[] = [];
    for (const r of this.list({ server, status: "working" })) {
      this.runtime.get(r.taskId)?.abort?.abort(reason);
      if (this.fail(r.taskId, reason)) failed.push(r.taskId);
    }
    return failed;
  }

  /**
   * Resolves with the record once it is terminal, or with the current (working)
   * record after timeoutMs / on abort.
   */
  waitForTerminal(taskId: string, timeoutMs: number, signal?: AbortSignal): Promise<ProxyTaskRecord> {
    const record = this.get(taskId);
    if (record.status !== "working") return Promise.resolve(record);
    const rt = this.runtime.get(taskId);
    if (!rt) return Promise.resolve(record);
    return new Promise((resolve) => {
      const done = (r: ProxyTaskRecord) => {
        this.clock.clearTimeout(timer);
        rt.waiters.delete(done);
        signal?.removeEventListener("abort", onAbort);
        resolve(r);
      };
      const onAbort = () => done(this.store.get(taskId) ?? record);
      const timer = this.clock.setTimeout(onAbort, timeoutMs);
      rt.waiters.add(done);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Aborts working calls, clears every timer and deletes this session's records. */
  close(): void {
    this.closed = true;
    for (const abort of [...this.calls]) abort.abort(sessionClosed());
    this.calls.clear();
    for (const [taskId, rt] of this.runtime) {
      this.clock.clearTimeout(rt.ttlTimer);
      this.clock.clearTimeout(rt.retentionTimer);
      rt.abort?.abort("session closed");
      const record = this.store.get(taskId);
      for (const w of [...rt.waiters]) if (record) w({ ...record, status: "cancelled", statusMessage: "session closed" });
      this.store.delete(taskId);
    }
    this.runtime.clear();
  }

  /** Number of live timers (for leak tests). */
  get timerCount(): number {
    let n = 0;
    for (const rt of this.runtime.values()) n += (rt.ttlTimer ? 1 : 0) + (rt.retentionTimer ? 1 : 0);
    return n;
  }

  private expire(taskId: string): void {
    const record = this.store.get(taskId);
    if (!record || record.status !== "working") return;
    const reason = `task expired: its TTL of ${record.ttlMs}ms ran out before the upstream answered`;
    this.runtime.get(taskId)?.abort?.abort(reason);
    this.finish(taskId, "expired", { error: reason, statusMessage: reason }, "task_expired", { ttlMs: record.ttlMs });
  }

  private finish(
    taskId: string,
    status: Exclude<ProxyTaskStatus, "working">,
    patch: Partial<ProxyTaskRecord>,
    eventType: "task_completed" | "task_failed" | "task_cancelled" | "task_expired",
    eventData: Record<string, unknown>,
  ): boolean {
    const record = this.store.get(taskId);
    const rt = this.runtime.get(taskId);
    if (!record || !rt || record.status !== "working") return false;
    const { inputRequired: _waiting, ...running } = record;
    const updated: ProxyTaskRecord = { ...running, ...patch, status, lastUpdatedAt: this.clock.now() };
    this.store.put(updated);
    this.clock.clearTimeout(rt.ttlTimer);
    delete rt.ttlTimer;
    delete rt.abort;
    // Kept for the retention period, and never deleted before its TTL (counted from creation) is over.
    const keepMs = Math.max(this.options.completedRetentionMs, record.createdAt + record.ttlMs - this.clock.now());
    rt.retentionTimer = this.clock.setTimeout(() => this.forget(taskId), keepMs);
    this.events.add(eventType, record.server, { taskId, toolName: record.toolName, ...eventData });
    // Seed 003 "Log Events" (task_completed, task_failed; cancelled and expired alike), named as the events.
    const level = status === "failed" || status === "expired" ? "warn" : "info";
    this.events.logger?.[level]({ taskId, server: record.server, tool: record.toolName, ...eventData }, eventType);
    for (const w of [...rt.waiters]) w({ ...updated });
    this.onStatusChange?.({ ...updated });
    this.enforceRetentionBounds(taskId);
    return true;
  }

  /**
   * Deletes the oldest ended tasks while the session keeps too many, or too
   * many result bytes. The task that just ended is never deleted for its
   * own size: its client may be about to ask for the result.
   */
  private enforceRetentionBounds(justEnded: string): void {
    const maxCount = this.options.maxRetainedPerSession ?? DEFAULT_SETTINGS.tasks.maxRetainedPerSession;
    const maxBytes = this.options.maxRetainedResultBytes ?? DEFAULT_SETTINGS.tasks.maxRetainedResultBytes;
    const ended = this.store
      .listBySession(this.sessionId)
      .filter((r) => isToolTask(r) && r.status !== "working")
      .sort((a, b) => a.lastUpdatedAt - b.lastUpdatedAt);
    let bytes = ended.reduce((n, r) => n + (r.resultBytes ?? 0), 0);
    let count = ended.length;
    for (const r of ended) {
      if (count <= maxCount && bytes <= maxBytes) break;
      if (r.taskId === justEnded) continue;
      this.forget(r.taskId);
      count--;
      bytes -= r.resultBytes ?? 0;
    }
  }

  private forget(taskId: string): void {
    const rt = this.runtime.get(taskId);
    if (rt) this.clock.clearTimeout(rt.retentionTimer);
    this.runtime.delete(taskId);
    this.store.delete(taskId);
  }
}

/** Why close() aborts a call that is no task: callers answer with it (EMCP_CLOSED). */
function sessionClosed(): GatewayError {
  return new GatewayError(ErrorCodes.CLOSED, "the session closed while the call was running; nothing of it is kept");
}

function isToolTask(r: ProxyTaskRecord): boolean {
  return (r.kind ?? "tool") === "tool";
}

export function isTerminal(status: ProxyTaskStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}
