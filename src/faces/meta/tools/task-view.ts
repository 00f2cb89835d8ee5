/**
 * The view of a task record that meta-tool responses show: seed 000's JSON
 * examples name its fields in snake_case (`task_id`, `created_at`, ...), its
 * `ProxyTask` type in camelCase (`taskId`, `toolName`, `toolArgs`, `ttl`, ...);
 * both are present so a client written against either reads it
 * (docs/adr/0004-seed-shapes.md).
 */
import type { ProxyTaskRecord } from "../../../store/task-store.js";
import { mcpStatus } from "../../../tasks/mcp-task.js";
import { iso } from "../define.js";

/** The view without `toolArgs` (execute_tool's reply: its caller just sent them). One argument, so `.map(taskView)` works. */
export function taskView(t: ProxyTaskRecord) {
  return view(t, false);
}

/** The view with seed 000's `toolArgs` (list_tasks, get_task). */
export function taskViewWithArgs(t: ProxyTaskRecord) {
  return view(t, true);
}

function view(t: ProxyTaskRecord, withArgs: boolean) {
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
    // Seed 000 ProxyTask.
    taskId: t.taskId,
    toolName: t.toolName,
    ...(withArgs ? { toolArgs: t.toolArgs } : {}),
    createdAt,
    lastUpdatedAt,
    ttl: t.ttlMs,
    ...(t.statusMessage !== undefined ? { statusMessage: t.statusMessage } : {}),
  };
}
