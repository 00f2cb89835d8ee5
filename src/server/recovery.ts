/**
 * What the gateway does with its state store at start (recoverState: settle
 * what a previous process left) and while it runs (sweepStore). See
 * docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import type { GatewaySettings } from "../config/schema.js";
import { isStdioConfig } from "../config/server-entry.js";
import { errorMessage } from "../errors.js";
import { isLoopbackHost } from "../http/guards.js";
import type { Logger } from "../logging.js";
import { tasksAwaitingApproval } from "../governance/approvals.js";
import { addStoredEvent, endStoredTask, type LeftoverDeps } from "../session/stored-leftovers.js";
import type { ServerRecord, Store, TaskRecord } from "../store/contracts.js";

/** The status message of a gateway-owned call that was running when the gateway stopped. */
export const RESTARTED_CALL = "the gateway restarted while this call ran; its result is unknown";
/** Why a stored elicitation/sampling request is rejected at start. */
export const RESTARTED_REQUEST = "the gateway restarted while this request waited; its upstream call ended";

export interface RecoveryReport {
  /** Gateway-owned calls, stdio upstream tasks and receiver tasks that ended as failed. */
  failedTasks: number;
  /** Upstream tasks of HTTP upstreams past their TTL. */
  expiredTasks: number;
  /** Upstream tasks of HTTP upstreams left working (to be asked about again). */
  keptTasks: number;
  rejectedRequests: number;
  restoredServers: string[];
  /** Stored runtime servers whose name the config file now has (the file's config is used). */
  shadowedServers: string[];
  /** Stored runtime servers the current settings no longer allow. */
  refusedServers: Array<{ name: string; reason: string }>;
  /** Rows past their retention or expiry, deleted. */
  deletedTasks: number;
}

export async function recoverState(deps: LeftoverDeps): Promise<RecoveryReport> {
  const { store, registry, settings, logger } = deps;
  const servers = registry.restoreRuntime(await store.servers.list(), (record) => runtimeServerRefusal(settings, record));
  for (const name of servers.shadowed) logger.warn({ server: name }, "stored_server_shadowed_by_config");
  for (const { name, reason } of servers.refused) logger.warn({ server: name, reason }, "stored_server_not_restored");
  const report: RecoveryReport = {
    failedTasks: 0,
    expiredTasks: 0,
    keptTasks: 0,
    rejectedRequests: 0,
    restoredServers: servers.restored,
    shadowedServers: servers.shadowed,
    refusedServers: servers.refused,
    deletedTasks: 0,
  };
  // A call waiting for a person's approval stays a working task: the approval can still be decided (docs/adr/0025).
  const awaiting = await tasksAwaitingApproval(store);
  for (const task of await store.tasks.listWorking()) {
    if (awaiting.has(task.taskId)) report.keptTasks++;
    else await settleTask(deps, task, report);
  }
  for (const request of await store.pending.listAll()) {
    // Whoever deletes it answers it: here, with the reason and an event for its session.
    if (!(await store.pending.delete(request.requestId))) continue;
    report.rejectedRequests++;
    await addStoredEvent(deps, request.sessionId, `${request.kind}_rejected`, request.server, { requestId: request.requestId, reason: RESTARTED_REQUEST });
  }
  report.deletedTasks = (await sweepStore(store, deps.clock.now())).tasks;
  return report;
}

async function settleTask(deps: LeftoverDeps, task: TaskRecord, report: RecoveryReport): Promise<void> {
  const now = deps.clock.now();
  const entry = deps.registry.get(task.server);
  if ((task.kind ?? "tool") === "receiver") {
    if (
      await endStoredTask(deps, task, "failed", "the gateway restarted while this request waited for its client; the upstream connection that sent it is gone")
    ) {
      report.failedTasks++;
    }
    return;
  }
  if (task.upstreamTaskId !== undefined && entry && !isStdioConfig(entry.config)) {
    if (task.expiresAt > now) {
      report.keptTasks++;
      return;
    }
    const reason = `task expired: its TTL of ${task.ttlMs}ms ran out while the gateway was restarting`;
    if (await endStoredTask(deps, task, "expired", reason)) {
      report.expiredTasks++;
      await addStoredEvent(deps, task.sessionId, "task_expired", task.server, { taskId: task.taskId, toolName: task.toolName, ttlMs: task.ttlMs });
    }
    return;
  }
  const reason =
    task.upstreamTaskId === undefined
      ? RESTARTED_CALL
      : entry
        ? `the gateway restarted, and upstream '${task.server}' runs over stdio: its process ended with the gateway, and this task with it`
        : `the gateway restarted, and upstream '${task.server}' is no longer configured; the task's state is unknown`;
  if (await endStoredTask(deps, task, "failed", reason)) {
    report.failedTasks++;
    await addStoredEvent(deps, task.sessionId, "task_failed", task.server, { taskId: task.taskId, toolName: task.toolName, error: reason });
  }
}

/**
 * Whether a stored runtime server may come back under the current settings
 * (the rules add_server applies, docs/adr/0006): undefined when it may, else why not.
 */
export function runtimeServerRefusal(settings: GatewaySettings, record: ServerRecord): string | undefined {
  const { servers, host, token } = settings;
  if (isStdioConfig(record.config) && !servers.allowRuntimeStdio) return "gateway.servers.allowRuntimeStdio is false now";
  if (!isStdioConfig(record.config) && !servers.allowRuntimeRemote) return "gateway.servers.allowRuntimeRemote is false now";
  if (token === undefined && !isLoopbackHost(host)) return `the gateway listens on ${host}, beyond loopback, without a token`;
  return undefined;
}

/** Deletes tasks past `retainUntil`, pending requests, started console logins, started upstream OAuth flows and single-use marks past `expiresAt`; returns how many. */
export async function sweepStore(
  store: Store,
  now: number,
): Promise<{ tasks: number; pending: number; logins: number; oauthFlows: number; singleUse: number }> {
  const tasks = await store.tasks.deleteExpired(now);
  const pending = await store.pending.deleteExpired(now);
  const logins = await store.logins.deleteExpired(now);
  const oauthFlows = await store.oauthFlows.deleteExpired(now);
  const singleUse = await store.singleUse.deleteExpired(now);
  return { tasks: tasks.length, pending: pending.length, logins, oauthFlows, singleUse };
}

/** sweepStore() for a timer: a failure is logged, never thrown. */
export async function sweepStoreLogged(store: Store, now: number, logger: Logger): Promise<void> {
  try {
    const deleted = await sweepStore(store, now);
    if (deleted.tasks || deleted.pending || deleted.logins || deleted.oauthFlows || deleted.singleUse) logger.debug(deleted, "store_swept");
  } catch (err) {
    logger.error({ err: errorMessage(err) }, "store_sweep_failed");
  }
}
