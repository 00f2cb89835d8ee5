/**
 * The field updates of a running tool task (design TK-1..TK-6): progress, the
 * `input_required` flag (ADR 0002 §8) and what the upstream last said about an
 * upstream task. Each runs in the background, in the order asked (the
 * scope's write queue); a failure is logged, never thrown, and only a
 * still-working task is patched. TaskManager (task-manager.ts) exposes them.
 */
import type { TaskPatch } from "../store/contracts.js";
import { visible, type TaskScope } from "./task-ends.js";

export interface ProgressUpdate {
  progress: number;
  total?: number | undefined;
  message?: string | undefined;
}

/** Records the progress of a call this session runs (in the background, in order; a write failure is logged). */
export function setProgress(scope: TaskScope, taskId: string, progress: ProgressUpdate): void {
  if (!scope.runtime.has(taskId)) return; // ended, or not this session's
  const patch: TaskPatch = {
    progress: {
      progress: progress.progress,
      ...(progress.total !== undefined ? { total: progress.total } : {}),
      ...(progress.message !== undefined ? { message: progress.message } : {}),
    },
    lastUpdatedAt: scope.clock.now(),
    ...(progress.message ? { statusMessage: progress.message } : {}),
  };
  void scope.writes.inOrder("record progress", taskId, () => scope.store.patch(taskId, patch, { ifStatus: ["working"] }));
}

/**
 * The task's call waits for the client (`waiting`), or no longer does: MCP
 * shows the task `input_required` meanwhile (spec 2025-11-25, tasks), and
 * the change is announced like any status change, once stored.
 */
export function setInputRequired(scope: TaskScope, taskId: string, waiting: boolean): void {
  const rt = scope.runtime.get(taskId);
  if (!rt || rt.inputRequired === waiting) return;
  rt.inputRequired = waiting;
  const patch: TaskPatch = { lastUpdatedAt: scope.clock.now(), ...(waiting ? { inputRequired: true } : {}) };
  void scope.writes.inOrder("record input_required", taskId, async () => {
    const updated = await scope.store.patch(taskId, patch, { ifStatus: ["working"], ...(waiting ? {} : { unset: ["inputRequired"] as const }) });
    if (!updated) return;
    scope.events.logger?.debug({ taskId, server: updated.server, waiting }, "task_input_required");
    scope.statusChanged(updated);
  });
}

/** Records what the upstream last said about an upstream task that is still running. */
export async function noteUpstreamStatus(scope: TaskScope, taskId: string, statusMessage: string | undefined): Promise<void> {
  if (statusMessage === undefined) return;
  await scope.writes.inOrder("record the upstream's status", taskId, async () => {
    const record = await scope.store.get(taskId);
    if (!record || !visible(scope, record) || record.status !== "working" || record.statusMessage === statusMessage) return;
    await scope.store.patch(taskId, { statusMessage, lastUpdatedAt: scope.clock.now() }, { ifStatus: ["working"] });
  });
}
