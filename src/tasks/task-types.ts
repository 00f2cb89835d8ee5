/**
 * The options and inputs of TaskManager (task-manager.ts): the session's
 * `gateway.tasks.*` settings, what a new task is made of, and how a session's
 * tasks end with it. Kept apart so the task modules share them without
 * importing the manager.
 */
/** `gateway.tasks.*` (src/config/schema.ts has each default). */
export interface TaskManagerOptions {
  defaultTtlMs: number;
  maxTtlMs: number;
  completedRetentionMs: number;
  /** Working tasks plus not-yet-promoted calls. */
  maxTasksPerSession: number;
  /** Ended tasks kept per session; the oldest go first. @default DEFAULT_SETTINGS.tasks.maxRetainedPerSession */
  maxRetainedPerSession?: number;
  /** Bytes of results kept per session; the oldest ended tasks go first. @default DEFAULT_SETTINGS.tasks.maxRetainedResultBytes */
  maxRetainedResultBytes?: number;
}

export interface CreateTaskInput {
  server: string;
  toolName: string;
  toolArgs: Record<string, unknown>;
  ttlMs?: number | undefined;
  /** Aborts the upstream call behind the task (for upstream tasks: cancels the upstream task). */
  abort: AbortController;
  /** Set when the call runs as an upstream task (its id never leaves the gateway). */
  upstreamTaskId?: string | undefined;
  /** The upstream's MCP session the upstream task belongs to (HTTP upstreams), kept with the task. */
  upstreamSessionId?: string | undefined;
  pollIntervalMs?: number | undefined;
  /** A call of this process settles the task with its result (execute_tool's promotion), even when it maps onto an upstream task. */
  settledByCall?: boolean | undefined;
}

/** How a session's tasks end with it (Session.close). */
export interface TaskCloseOptions {
  /**
   * The gateway is shutting down, not the session: the records stay for the
   * next start (recovery settles what was running), and upstream tasks are
   * not cancelled (they can be asked about again). @default false
   */
  keepRecords?: boolean;
}
