/**
 * The port through which the task runtime tells its session what happened to
 * a task: the events it stores, the changes it announces and the logger it
 * logs through. The session's EventSystem (src/session/event-system.ts)
 * implements it, so tasks/ does not depend on session/.
 */
import type { Logger } from "../logging.js";

/** The events a session's tool tasks add (design EV-3). */
export type TaskEventType = "task_created" | "task_completed" | "task_failed" | "task_cancelled" | "task_expired";

/** A running task's fields changed (progress, input_required): observers hear of it; no event is stored. */
export interface TaskUpdate {
  type: "task_updated";
  server: string;
  data: { taskId: string };
}

export interface TaskEvents {
  /** Stores an event for the session's client (in the background, in order). */
  add(type: TaskEventType, server: string, data: Record<string, unknown>): unknown;
  /** Tells the observers (the web console) of a change that is no event. */
  announce(change: TaskUpdate): void;
  /** The session's logger. */
  readonly logger?: Logger | undefined;
}
