/**
 * TaskEnds: how a session's tool task ends (design TK-2, TK-5): the one
 * compare-and-set from a running status (first end wins), expiry at its TTL,
 * retention, the get_task_result waiters, and an end the store refused kept
 * in memory and retried. See docs/design/tasks.md, "How the code keeps it".
 */
import type { Clock } from "../clock.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { ProxyTaskStatus, TaskPatch, TaskRecord, TaskStore } from "../store/contracts.js";
import { ACTIVE_STATUSES, applyTaskChange, endedRetainUntil, isActive } from "../store/policy.js";
import type { TaskEvents, TaskEventType } from "./task-events.js";
import type { Runtime, TaskRuntimes, TaskWrites } from "./task-runtime.js";
import type { TaskManagerOptions } from "./task-types.js";

/** How often a call's end that the store refused is written again. */
export const END_RETRY_MS = 2_000;

export type EndStatus = Exclude<ProxyTaskStatus, "working" | "input_required">;
export type EndEvent = Exclude<TaskEventType, "task_created">;

export class TaskEnds {
  constructor(
    private readonly sessionId: string,
    private readonly options: Pick<TaskManagerOptions, "completedRetentionMs" | "maxRetainedPerSession" | "maxRetainedResultBytes">,
    private readonly store: TaskStore,
    private readonly events: TaskEvents,
    private readonly clock: Clock,
    private readonly runtimes: TaskRuntimes,
    private readonly writes: TaskWrites,
    /** Told after every committed end (TaskManager.onStatusChange). */
    private readonly statusChanged: (record: TaskRecord) => void,
  ) {}

  /**
   * finish(), then abort the task's call if it was still running (its own end
   * then loses the compare-and-set). With `errors: "throw"` a store failure
   * rejects (the caller asked for this change) instead of being logged.
   */
  async end(
    taskId: string,
    status: EndStatus,
    patch: TaskPatch,
    eventType: EndEvent,
    eventData: Record<string, unknown>,
    errors: "log" | "throw" = "log",
  ): Promise<boolean> {
    const rt = this.runtimes.get(taskId);
    if (rt?.ending) return false;
    // Its end was given to the client already (not stored yet): only that end is written, no other wins.
    if (rt?.unstored && rt.unstored.status !== status) return false;
    if (rt) rt.ending = true;
    let ended: TaskRecord | undefined;
    try {
      ended = await this.finish(taskId, status, patch, eventType, eventData, errors);
    } finally {
      if (rt && !ended) rt.ending = false; // not stored: a later end may try again
    }
    if (ended && status !== "completed") rt?.abort?.abort(String(patch.statusMessage ?? status));
    if (!ended && rt?.unstored && this.runtimes.get(taskId) === rt && !this.runtimes.closed) {
      // The store refused the end: write it again later (instead of the TTL: the call ended in time).
      this.clock.clearTimeout(rt.ttlTimer);
      rt.ttlTimer = this.clock.setTimeout(() => void this.end(taskId, status, patch, eventType, eventData, errors), END_RETRY_MS);
    }
    return ended !== undefined;
  }

  /** Starts the task's TTL timer: it ends `expired` after `ms`. */
  expireAfter(taskId: string, rt: Runtime, ms: number): void {
    rt.ttlTimer = this.clock.setTimeout(() => void this.expire(taskId), ms);
  }

  /** The TTL timer fired: the task ends `expired`; if the store fails, the timer is set again. */
  private async expire(taskId: string): Promise<void> {
    const rt = this.runtimes.get(taskId);
    if (!rt) return;
    delete rt.ttlTimer;
    let ended = false;
    try {
      const record = await this.store.get(taskId);
      if (!record) {
        this.runtimes.detach(taskId); // deleted meanwhile: nothing left to expire
        return;
      }
      const reason = `task expired: its TTL of ${record.ttlMs}ms ran out before the upstream answered`;
      ended = await this.end(taskId, "expired", { error: reason, statusMessage: reason }, "task_expired", { ttlMs: record.ttlMs });
    } catch (err) {
      this.events.logger?.error({ taskId, err: errorMessage(err) }, "task_store_write_failed");
    }
    if (!ended && this.runtimes.get(taskId) === rt) {
      // Not stored (the store failed): try again later rather than leave the task running forever.
      this.expireAfter(taskId, rt, Math.max(1_000, this.options.completedRetentionMs / 10));
    }
  }

  /**
   * The one way a task ends: a compare-and-set from a running status. Only
   * the winner clears the runtime, wakes the waiters, adds the event and
   * tells statusChanged — all after the write committed. Returns the new
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
    if (this.runtimes.closed) return Promise.resolve(undefined);
    const logger = this.events.logger;
    return this.writes.track(
      (async (): Promise<TaskRecord | undefined> => {
        let current: TaskRecord | undefined;
        try {
          current = await this.store.get(taskId);
          if (!current || current.sessionId !== this.sessionId || !isActive(current.status)) return undefined;
          const now = this.clock.now();
          const retainUntil = endedRetainUntil(current, now, this.options.completedRetentionMs);
          const updated = await this.store.transition(taskId, {
            from: ACTIVE_STATUSES,
            to: status,
            patch: { ...patch, lastUpdatedAt: now, retainUntil },
            unset: ["inputRequired"],
          });
          if (!updated) return undefined;
          const rt = this.runtimes.detach(taskId);
          if (rt) this.clock.clearTimeout(rt.ttlTimer);
          this.events.add(eventType, updated.server, { taskId, toolName: updated.toolName, ...eventData });
          // Operator log events (design EV-13): task_completed, task_failed (cancelled and expired alike), named as the events.
          const level = status === "failed" || status === "expired" ? "warn" : "info";
          logger?.[level]({ taskId, server: updated.server, tool: updated.toolName, ...eventData }, eventType);
          for (const w of [...(rt?.waiters ?? [])]) w(updated);
          this.statusChanged(updated);
          void this.writes.track(this.enforceRetention(taskId));
          return updated;
        } catch (err) {
          logger?.error({ taskId, status, err: errorMessage(err) }, "task_store_write_failed");
          if (errors === "throw") throw err;
          const rt = this.runtimes.get(taskId);
          // The read may have failed too (Redis down): the record this process runs the task from stands in.
          const base = current ?? rt?.record;
          if (rt && status !== "expired" && (rt.unstored || (base && isActive(base.status)))) {
            // A call's end the store refused: its waiters and readers get it now; end() retries the write.
            rt.unstored ??= applyTaskChange(base!, status, { ...patch, lastUpdatedAt: this.clock.now() }, ["inputRequired"]);
            for (const w of [...(rt.waiters ?? [])]) w(rt.unstored);
          }
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
      this.events.logger?.error({ err: errorMessage(err) }, "task_store_write_failed");
    }
  }

  /**
   * Resolves with the record once the task (running here, `rt`) ended, or with
   * a fresh read of it after timeoutMs / on abort; `record` (working) when the
   * read fails, or marked cancelled when the session closed under the waiter.
   */
  waitFor(rt: Runtime, record: TaskRecord, timeoutMs: number, signal?: AbortSignal): Promise<TaskRecord> {
    const taskId = record.taskId;
    if (rt.unstored) return Promise.resolve(rt.unstored);
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

  /** This session's tool task, not past its retention. */
  visible(r: TaskRecord): boolean {
    return (
      r.sessionId === this.sessionId && (r.kind ?? "tool") === "tool" && (r.retainUntil === undefined || r.retainUntil > this.clock.now() || isActive(r.status))
    );
  }
}
