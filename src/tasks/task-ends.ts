/**
 * How a session's tool task ends (design TK-1..TK-6): the one compare-and-set
 * from a running status (`finish`), the first-end-wins guard and the abort of
 * the task's call (`endTask`), expiry when its TTL timer fires (retried while
 * the store fails), and the per-session retention bound applied after each
 * end. Only the winner of the compare-and-set clears the runtime, wakes the
 * waiters, adds the event and tells onStatusChange — all after the write
 * committed. A call's end the store could not take or even read (disk full,
 * file gone, Redis down) is not lost: readers and waiters get it from memory at once
 * (`Runtime.unstored`) and its write is retried every END_RETRY_MS until the
 * store takes it. Also here: the get_task_result waiters those ends wake, and
 * which records a session still sees (`visible`: its own tool tasks, not past
 * their retention). TaskManager (task-manager.ts) owns the scope these run in.
 */
import type { Clock } from "../clock.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { EventSystem } from "../session/event-system.js";
import type { ProxyTaskStatus, TaskPatch, TaskRecord, TaskStore } from "../store/contracts.js";
import { ACTIVE_STATUSES, applyTaskChange, endedRetainUntil, isActive } from "../store/policy.js";
import { detach, type Runtime, type Runtimes, type TaskWrites } from "./task-runtime.js";

/** How often a call's end that the store refused is written again. */
export const END_RETRY_MS = 2_000;

export type EndStatus = Exclude<ProxyTaskStatus, "working" | "input_required">;
export type EndEvent = "task_completed" | "task_failed" | "task_cancelled" | "task_expired";

/** The TaskManager state the ends read and write. */
export interface TaskScope extends Runtimes {
  readonly sessionId: string;
  readonly options: { completedRetentionMs: number; maxRetainedPerSession?: number | undefined; maxRetainedResultBytes?: number | undefined };
  readonly store: TaskStore;
  readonly events: EventSystem;
  readonly clock: Clock;
  readonly writes: TaskWrites;
  isClosed(): boolean;
  /** Tells TaskManager.onStatusChange. */
  statusChanged(record: TaskRecord): void;
}

/**
 * finish(), then abort the task's call if it was still running (its own end
 * then loses the compare-and-set). With `errors: "throw"` a store failure
 * rejects (the caller asked for this change) instead of being logged.
 */
export async function endTask(
  scope: TaskScope,
  taskId: string,
  status: EndStatus,
  patch: TaskPatch,
  eventType: EndEvent,
  eventData: Record<string, unknown>,
  errors: "log" | "throw" = "log",
): Promise<boolean> {
  const rt = scope.runtime.get(taskId);
  if (rt?.ending) return false;
  // Its end was given to the client already (not stored yet): only that end is written, no other wins.
  if (rt?.unstored && rt.unstored.status !== status) return false;
  if (rt) rt.ending = true;
  let ended: TaskRecord | undefined;
  try {
    ended = await finish(scope, taskId, status, patch, eventType, eventData, errors);
  } finally {
    if (rt && !ended) rt.ending = false; // not stored: a later end may try again
  }
  if (ended && status !== "completed") rt?.abort?.abort(String(patch.statusMessage ?? status));
  if (!ended && rt?.unstored && scope.runtime.get(taskId) === rt && !scope.isClosed()) {
    // The store refused the end: write it again later (instead of the TTL: the call ended in time).
    scope.clock.clearTimeout(rt.ttlTimer);
    rt.ttlTimer = scope.clock.setTimeout(() => void endTask(scope, taskId, status, patch, eventType, eventData, errors), END_RETRY_MS);
  }
  return ended !== undefined;
}

/** The TTL timer fired: the task ends `expired`; if the store fails, the timer is set again. */
export async function expireTask(scope: TaskScope, taskId: string): Promise<void> {
  const rt = scope.runtime.get(taskId);
  if (!rt) return;
  delete rt.ttlTimer;
  let ended = false;
  const logger = scope.events.logger;
  try {
    const record = await scope.store.get(taskId);
    if (!record) {
      detach(scope, taskId); // deleted meanwhile: nothing left to expire
      return;
    }
    const reason = `task expired: its TTL of ${record.ttlMs}ms ran out before the upstream answered`;
    ended = await endTask(scope, taskId, "expired", { error: reason, statusMessage: reason }, "task_expired", { ttlMs: record.ttlMs });
  } catch (err) {
    logger?.error({ taskId, err: errorMessage(err) }, "task_store_write_failed");
  }
  if (!ended && scope.runtime.get(taskId) === rt) {
    // Not stored (the store failed): try again later rather than leave the task running forever.
    rt.ttlTimer = scope.clock.setTimeout(() => void expireTask(scope, taskId), Math.max(1_000, scope.options.completedRetentionMs / 10));
  }
}

/**
 * The one way a task ends: a compare-and-set from a running status. Only
 * the winner clears the runtime, wakes the waiters, adds the event and
 * tells onStatusChange — all after the write committed. Returns the new
 * record, or undefined when the task was not running (or not this
 * session's) or the store failed (logged, or thrown with `errors: "throw"`;
 * the task stays as stored).
 */
function finish(
  scope: TaskScope,
  taskId: string,
  status: EndStatus,
  patch: TaskPatch,
  eventType: EndEvent,
  eventData: Record<string, unknown>,
  errors: "log" | "throw",
): Promise<TaskRecord | undefined> {
  if (scope.isClosed()) return Promise.resolve(undefined);
  const logger = scope.events.logger;
  return scope.writes.track(
    (async (): Promise<TaskRecord | undefined> => {
      let current: TaskRecord | undefined;
      try {
        current = await scope.store.get(taskId);
        if (!current || current.sessionId !== scope.sessionId || !isActive(current.status)) return undefined;
        const now = scope.clock.now();
        const retainUntil = endedRetainUntil(current, now, scope.options.completedRetentionMs);
        const updated = await scope.store.transition(taskId, {
          from: ACTIVE_STATUSES,
          to: status,
          patch: { ...patch, lastUpdatedAt: now, retainUntil },
          unset: ["inputRequired"],
        });
        if (!updated) return undefined;
        const rt = detach(scope, taskId);
        if (rt) scope.clock.clearTimeout(rt.ttlTimer);
        scope.events.add(eventType, updated.server, { taskId, toolName: updated.toolName, ...eventData });
        // Operator log events (design EV-13): task_completed, task_failed (cancelled and expired alike), named as the events.
        const level = status === "failed" || status === "expired" ? "warn" : "info";
        logger?.[level]({ taskId, server: updated.server, tool: updated.toolName, ...eventData }, eventType);
        for (const w of [...(rt?.waiters ?? [])]) w(updated);
        scope.statusChanged(updated);
        void scope.writes.track(enforceRetention(scope, taskId));
        return updated;
      } catch (err) {
        logger?.error({ taskId, status, err: errorMessage(err) }, "task_store_write_failed");
        if (errors === "throw") throw err;
        const rt = scope.runtime.get(taskId);
        // The read may have failed too (Redis down): the record this process runs the task from stands in.
        const base = current ?? rt?.record;
        if (rt && status !== "expired" && (rt.unstored || (base && isActive(base.status)))) {
          // A call's end the store refused: its waiters and readers get it now; endTask retries the write.
          rt.unstored ??= applyTaskChange(base!, status, { ...patch, lastUpdatedAt: scope.clock.now() }, ["inputRequired"]);
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
async function enforceRetention(scope: TaskScope, justEnded: string): Promise<void> {
  try {
    await scope.store.enforceRetention(scope.sessionId, {
      maxCount: scope.options.maxRetainedPerSession ?? DEFAULT_SETTINGS.tasks.maxRetainedPerSession,
      maxBytes: scope.options.maxRetainedResultBytes ?? DEFAULT_SETTINGS.tasks.maxRetainedResultBytes,
      keep: justEnded,
      kind: "tool",
    });
  } catch (err) {
    scope.events.logger?.error({ err: errorMessage(err) }, "task_store_write_failed");
  }
}

/**
 * Resolves with the record once the task (running here, `rt`) ended, or with
 * a fresh read of it after timeoutMs / on abort; `record` (working) when the
 * read fails, or marked cancelled when the session closed under the waiter.
 */
export function waitForEnd(scope: TaskScope, rt: Runtime, record: TaskRecord, timeoutMs: number, signal?: AbortSignal): Promise<TaskRecord> {
  const taskId = record.taskId;
  if (rt.unstored) return Promise.resolve(rt.unstored);
  return new Promise((resolve) => {
    const done = (ended: TaskRecord | undefined) => {
      scope.clock.clearTimeout(timer);
      rt.waiters?.delete(done);
      signal?.removeEventListener("abort", onAbort);
      resolve(ended ?? { ...record, status: "cancelled", statusMessage: "session closed" });
    };
    const onAbort = () => {
      rt.waiters?.delete(done);
      scope.clock.clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      scope.store.get(taskId).then(
        (r) => resolve(r ?? record),
        () => resolve(record),
      );
    };
    const timer = scope.clock.setTimeout(onAbort, timeoutMs);
    (rt.waiters ??= new Set()).add(done);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** This session's tool task, not past its retention. */
export function visible(scope: TaskScope, r: TaskRecord): boolean {
  return (
    r.sessionId === scope.sessionId && (r.kind ?? "tool") === "tool" && (r.retainUntil === undefined || r.retainUntil > scope.clock.now() || isActive(r.status))
  );
}
