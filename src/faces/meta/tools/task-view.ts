/** The snake_case view of a task record that meta-tool responses show (seed 000). */
import type { ProxyTaskRecord } from "../../../store/task-store.js";
import { iso } from "../define.js";

export function taskView(t: ProxyTaskRecord) {
  return {
    task_id: t.taskId,
    status: t.status,
    server: t.server,
    tool: t.toolName,
    created_at: iso(t.createdAt),
    last_updated_at: iso(t.lastUpdatedAt),
    ttl_ms: t.ttlMs,
    expires_at: iso(t.expiresAt),
    ...(t.statusMessage !== undefined ? { status_message: t.statusMessage } : {}),
    ...(t.progress ? { progress: t.progress } : {}),
    ...(t.error !== undefined ? { error: t.error } : {}),
  };
}
