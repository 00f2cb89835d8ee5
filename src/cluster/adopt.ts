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
import type { Clock, IdGenerator } from "../clock.js";
import { isStdioConfig, type GatewaySettings } from "../config/schema.js";
import type { Logger } from "../logging.js";
import { eventLimits, type EventType } from "../session/event-system.js";
import type { Store, TaskRecord } from "../store/contracts.js";
import { ACTIVE_STATUSES, endedRetainUntil } from "../store/policy.js";
import type { ServerRegistry } from "../upstream/registry.js";

export interface AdoptDeps {
  store: Store;
  registry: ServerRegistry;
  settings: GatewaySettings;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
}

/** The status message of a call that ran on a replica that died. */
export function replicaStoppedCall(owner: string): string {
  return `replica ${owner} stopped while this call ran; its result is unknown`;
}

/** Settles a session's leftovers from `owner` (undefined: no owner was recorded); returns how many tasks and requests ended. */
export async function settleAdopted(deps: AdoptDeps, sessionId: string, owner: string | undefined): Promise<{ tasks: number; requests: number }> {
  const who = owner ?? "(unknown)";
  let tasks = 0;
  const active = await deps.store.tasks.listBySession(sessionId, { status: ACTIVE_STATUSES });
  for (const task of active) if (await settle(deps, task, who)) tasks++;
  let requests = 0;
  for (const request of await deps.store.pending.listBySession(sessionId)) {
    if (!(await deps.store.pending.delete(request.requestId))) continue;
    requests++;
    await addEvent(deps, sessionId, `${request.kind}_rejected`, request.server, {
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
  const now = deps.clock.now();
  const ended = await deps.store.tasks.transition(task.taskId, {
    from: ACTIVE_STATUSES,
    to: "failed",
    patch: {
      error: reason,
      statusMessage: reason,
      lastUpdatedAt: now,
      retainUntil: endedRetainUntil(task, now, receiver ? 0 : deps.settings.tasks.completedRetentionMs),
    },
    unset: ["inputRequired"],
  });
  if (!ended) return false;
  if (!receiver) await addEvent(deps, task.sessionId, "task_failed", task.server, { taskId: task.taskId, toolName: task.toolName, error: reason });
  return true;
}

async function addEvent(deps: AdoptDeps, sessionId: string, type: EventType, server: string, data: Record<string, unknown>): Promise<void> {
  await deps.store.events.append(sessionId, { id: deps.newId(), type, server, createdAt: deps.clock.now(), data }, eventLimits(deps.settings.events));
}
