/**
 * SDK workaround — progress handlers of task-augmented requests outlive the
 * task. The SDK (1.32) keeps a request's progress handler after it answers
 * with CreateTaskResult, for the task's life, but as the *requesting* side
 * only removes it when the connection closes: it never learns that the
 * receiver's task ended unless it polls through its own task helpers. The
 * gateway knows when an upstream task ends and releases the handler then, so
 * nothing is forwarded under an ended task's progress token.
 *
 * Touches the private `Protocol._cleanupTaskProgressHandler`. Canary:
 * test/unit/sdk-canaries.test.ts.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";

interface TaskProgressInternals {
  _cleanupTaskProgressHandler?: (taskId: string) => void;
}

/** Drops the progress handler `client` keeps for the receiver's task `taskId` (no-op if none). */
export function releaseTaskProgressHandler(client: Client, taskId: string): void {
  (client as unknown as TaskProgressInternals)._cleanupTaskProgressHandler?.call(client, taskId);
}
