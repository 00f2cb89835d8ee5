/**
 * The view of a task record that meta-tool responses show, in both spellings
 * (design MF-19): the project's snake_case (`task_id`, `created_at`, ...) and
 * the camelCase aliases (`taskId`, `toolName`, `toolArgs`, `ttl`, ...), so a
 * client written against either reads it (docs/adr/0004-reply-shapes.md).
 */
import type { TaskRecord } from "../../../store/contracts.js";
import { mcpStatus } from "../../../mcp/task-object.js";
import { iso } from "../define.js";

/** The view without `toolArgs` (execute_tool's reply: its caller just sent them). One argument, so `.map(taskView)` works. */
export function taskView(t: TaskRecord) {
  return view(t, false);
}

/** The view with the alias `toolArgs` (list_tasks, get_task). */
export function taskViewWithArgs(t: TaskRecord) {
  return view(t, true);
}

function view(t: TaskRecord, withArgs: boolean) {
  const createdAt = iso(t.createdAt);
  const lastUpdatedAt = iso(t.lastUpdatedAt);
  return {
    task_id: t.taskId,
    // A working task waiting for the client reads input_required (ADR 0002 §8); the meta face keeps its own terminal vocabulary.
    status: t.status === "working" && mcpStatus(t) === "input_required" ? ("input_required" as const) : t.status,
    server: t.server,
    tool: t.toolName,
    created_at: createdAt,
    last_updated_at: lastUpdatedAt,
    ttl_ms: t.ttlMs,
    expires_at: iso(t.expiresAt),
    ...(t.statusMessage !== undefined ? { status_message: t.statusMessage } : {}),
    ...(t.progress ? { progress: t.progress } : {}),
    ...(t.error !== undefined ? { error: t.error } : {}),
    // camelCase aliases (design MF-19).
    taskId: t.taskId,
    toolName: t.toolName,
    ...(withArgs ? { toolArgs: t.toolArgs } : {}),
    createdAt,
    lastUpdatedAt,
    ttl: t.ttlMs,
    ...(t.statusMessage !== undefined ? { statusMessage: t.statusMessage } : {}),
  };
}
