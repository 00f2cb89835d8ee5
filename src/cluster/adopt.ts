/**
 * Settling what died with a session's owner replica, before the session is
 * resumed here (docs/adr/0013, "adopted"). The rules are those of start-up
 * recovery (src/server/recovery.ts, ADR 0007) applied to one session, with
 * the dead replica named in the reason: gateway-owned calls, receiver tasks
 * and stdio upstream tasks → failed (with a task_failed event for tool
 * tasks); upstream tasks of HTTP upstreams stay working (restore() re-attaches
 * them by their upstream session); pending elicitation/sampling requests →
 * rejected with an event. Every end is a compare-and-set: a task another
 * path ended first is left alone.
 */
import { isStdioConfig } from "../config/server-entry.js";
import { tasksAwaitingApproval } from "../governance/approvals.js";
import { addStoredEvent, endStoredTask, type LeftoverDeps } from "../session/stored-leftovers.js";
import type { TaskRecord } from "../store/contracts.js";
import { ACTIVE_STATUSES } from "../store/policy.js";

/** The same as start-up recovery's: adopting settles a session's leftovers the way a restart does (src/server/recovery.ts). */
export type AdoptDeps = LeftoverDeps;

/** The status message of a call that ran on a replica that died. */
export function replicaStoppedCall(owner: string): string {
  return `replica ${owner} stopped while this call ran; its result is unknown`;
}

/** Settles a session's leftovers from `owner` (undefined: no owner was recorded); returns how many tasks and requests ended. */
export async function settleAdopted(deps: AdoptDeps, sessionId: string, owner: string | undefined): Promise<{ tasks: number; requests: number }> {
  const who = owner ?? "(unknown)";
  let tasks = 0;
  const active = await deps.store.tasks.listBySession(sessionId, { status: ACTIVE_STATUSES });
  // A call waiting for a person's approval stays a working task: the adopting replica acts on the decision (docs/adr/0025).
  const awaiting = active.length ? await tasksAwaitingApproval(deps.store) : new Set<string>();
  for (const task of active) if (!awaiting.has(task.taskId) && (await settle(deps, task, who))) tasks++;
  let requests = 0;
  for (const request of await deps.store.pending.listBySession(sessionId)) {
    if (!(await deps.store.pending.delete(request.requestId))) continue;
    requests++;
    await addStoredEvent(deps, sessionId, `${request.kind}_rejected`, request.server, {
      requestId: request.requestId,
      reason: `replica ${who} stopped while this request waited; its upstream call ended`,
    });
  }
  if (tasks || requests) deps.logger.warn({ owner: who, tasks, requests }, "cluster_session_adopted_settled");
  return { tasks, requests };
}

async function settle(deps: AdoptDeps, task: TaskRecord, owner: string): Promise<boolean> {
  const entry = deps.registry.get(task.server);
  const receiver = (task.kind ?? "tool") === "receiver";
  if (!receiver && task.upstreamTaskId !== undefined && entry && !isStdioConfig(entry.config)) return false;
  const reason = receiver
    ? `replica ${owner} stopped while this request waited for its client; the upstream connection that sent it is gone`
    : task.upstreamTaskId === undefined
      ? replicaStoppedCall(owner)
      : `replica ${owner} stopped; upstream '${task.server}' ran there over stdio and ended with it, and this task with it`;
  const ended = await endStoredTask(deps, task, "failed", reason, "cluster_task_settled");
  if (!ended) return false;
  if (!receiver) await addStoredEvent(deps, task.sessionId, "task_failed", task.server, { taskId: task.taskId, toolName: task.toolName, error: reason });
  return true;
}
