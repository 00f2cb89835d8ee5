/**
 * Settling a session's stored leftovers from outside any live session: one
 * compare-and-set end of a stored task, one event appended to a stored
 * session. Start-up recovery (src/server/recovery.ts, ADR 0007) and a replica
 * adopting a dead replica's session (src/cluster/adopt.ts, ADR 0013) both use
 * them; they stand here, below both, so neither imports the other.
 */
import type { Clock, IdGenerator } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import type { Logger } from "../logging.js";
import type { Store, TaskPatch, TaskRecord } from "../store/contracts.js";
import { ACTIVE_STATUSES, endedRetainUntil } from "../store/policy.js";
import type { ServerRegistry } from "../upstream/registry.js";
import { eventLimits, type EventType } from "./event-system.js";

/** What settling stored leftovers reads and writes (start-up recovery and adoption pass the same). */
export interface LeftoverDeps {
  store: Store;
  registry: ServerRegistry;
  settings: GatewaySettings;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
}

/**
 * One compare-and-set of a stored task from a running status; false when
 * another writer ended it first. `logAs`: the log line when it ended.
 */
export async function endStoredTask(
  deps: LeftoverDeps,
  task: TaskRecord,
  status: "failed" | "expired",
  reason: string,
  logAs = "task_settled_at_start",
): Promise<boolean> {
  const now = deps.clock.now();
  const retention = task.kind === "receiver" ? 0 : deps.settings.tasks.completedRetentionMs;
  const patch: TaskPatch = {
    error: reason,
    statusMessage: reason,
    lastUpdatedAt: now,
    retainUntil: endedRetainUntil(task, now, retention),
  };
  const ended = await deps.store.tasks.transition(task.taskId, { from: ACTIVE_STATUSES, to: status, patch, unset: ["inputRequired"] });
  if (ended) deps.logger.warn({ taskId: task.taskId, server: task.server, tool: task.toolName, status, reason }, logAs);
  return ended !== undefined;
}

/** Appends an event to a stored session's events (read by the session when it runs again). */
export async function addStoredEvent(deps: LeftoverDeps, sessionId: string, type: EventType, server: string, data: Record<string, unknown>): Promise<void> {
  const event = { id: deps.newId(), type, server, createdAt: deps.clock.now(), data };
  await deps.store.events.append(sessionId, event, eventLimits(deps.settings.events));
}
