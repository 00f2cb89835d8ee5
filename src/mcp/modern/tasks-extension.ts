/**
 * The tasks extension's wire shapes (`io.modelcontextprotocol/tasks`, SEP-2663)
 * for 2026-07-28 clients, made from the 2025-11-25 `Task` object the faces
 * serve (docs/adr/0032-two-protocol-eras.md, "Tasks across eras"): the
 * CreateTaskResult of a tools/call and the DetailedTask of tasks/get, with the
 * result or error inlined and what the task waits for as `inputRequests`.
 */
import type { Task } from "@modelcontextprotocol/sdk/types.js";

/** The tasks extension's identifier (SEP-2663). */
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** One request the task waits for the client to answer (tasks/update's `inputResponses` answer it by key). */
export interface InputRequest {
  method: string;
  params: Record<string, unknown>;
}

/** How a task ended, as the 2025 side's tasks/result said. */
export type TaskOutcome = { result: Record<string, unknown> } | { error: { code: number; message: string; data?: unknown } };

/** The fields every 2026-07-28 task object carries, from a 2025 Task. */
function base(task: Task): Record<string, unknown> {
  return {
    taskId: task.taskId,
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: typeof task.ttl === "number" ? task.ttl : null,
    ...(task.pollInterval !== undefined ? { pollIntervalMs: task.pollInterval } : {}),
    ...(task.statusMessage !== undefined ? { statusMessage: task.statusMessage } : {}),
  };
}

/** tools/call's answer when the call became a task: `resultType: "task"` and the task at the top level. */
export function createTaskResult(task: Task): Record<string, unknown> {
  const status = task.status === "input_required" ? "working" : task.status;
  return { ...base(task), status, resultType: "task" };
}

/**
 * tasks/get's answer. A 2025 task that ended is `completed` with the tool's
 * result inlined (a tool result with `isError` too: the 2025 side calls that
 * `failed`, but the tool ran), `failed` with the JSON-RPC error when there is
 * no result, `cancelled` as it is. A running task is `input_required` only
 * while the gateway holds requests for the client (`inputs`); the 2025 side's
 * `input_required` without them reads `working` until they arrive.
 */
export function detailedTask(task: Task, inputs: Record<string, InputRequest>, outcome: TaskOutcome | undefined): Record<string, unknown> {
  const hint = { resultType: "complete" };
  if (task.status === "cancelled") return { ...base(task), status: "cancelled", ...hint };
  if ((task.status === "completed" || task.status === "failed") && outcome !== undefined) {
    // The inlined result is a 2026-07-28 tool result: it carries its own resultType.
    if ("result" in outcome) return { ...base(task), status: "completed", result: { ...outcome.result, ...hint }, ...hint };
    return { ...base(task), status: "failed", error: outcome.error, ...hint };
  }
  if (task.status === "completed" || task.status === "failed") {
    // Ended, but what it ended with could not be had: say so rather than leave the client polling.
    return {
      ...base(task),
      status: "failed",
      error: { code: -32603, message: task.statusMessage ?? `the task ${task.status} and its outcome is gone` },
      ...hint,
    };
  }
  if (Object.keys(inputs).length > 0) return { ...base(task), status: "input_required", inputRequests: inputs, ...hint };
  return { ...base(task), status: "working", ...hint };
}
