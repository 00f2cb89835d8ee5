/**
 * The MCP `Task` object (spec 2025-11-25) for a gateway task record. Task ids
 * are always the gateway's own. `expired` is not an MCP status: an expired
 * task reads as `failed` with a status message saying its TTL ran out.
 */
import { RELATED_TASK_META_KEY, type Task } from "@modelcontextprotocol/sdk/types.js";
import type { TaskRecord } from "../store/contracts.js";

/** Suggested poll interval when the upstream gave none. */
export const DEFAULT_POLL_INTERVAL_MS = 1000;

export function toMcpTask(r: TaskRecord): Task {
  return {
    taskId: r.taskId,
    status: mcpStatus(r),
    ttl: r.ttlMs,
    createdAt: new Date(r.createdAt).toISOString(),
    lastUpdatedAt: new Date(r.lastUpdatedAt).toISOString(),
    pollInterval: r.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
    ...(r.statusMessage !== undefined ? { statusMessage: r.statusMessage } : {}),
  };
}

/** The MCP status of a record. */
export function mcpStatus(r: TaskRecord): Task["status"] {
  // A tool result with isError is a failed task in MCP terms (its result is still returned by tasks/result).
  if (r.status === "expired" || (r.status === "completed" && r.result?.isError === true)) return "failed";
  return shownStatus(r) === "input_required" ? "input_required" : r.status;
}

/** The gateway's status with `input_required` for a running task whose call waits for the client (ADR 0002 §8). */
export function shownStatus(r: Pick<TaskRecord, "status" | "inputRequired">): TaskRecord["status"] | "input_required" {
  return r.status === "working" && r.inputRequired === true ? "input_required" : r.status;
}

/** Sets (or replaces) the related-task metadata of a result or request params. */
export function withRelatedTask<T extends { _meta?: Record<string, unknown> | undefined }>(value: T, taskId: string): T {
  return { ...value, _meta: { ...value._meta, [RELATED_TASK_META_KEY]: { taskId } } };
}

/** The related-task id carried in `_meta`, if any. */
export function relatedTaskId(meta: Record<string, unknown> | undefined): string | undefined {
  const related = meta?.[RELATED_TASK_META_KEY] as { taskId?: unknown } | undefined;
  return typeof related?.taskId === "string" ? related.taskId : undefined;
}
