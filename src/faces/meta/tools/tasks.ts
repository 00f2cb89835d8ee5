/**
 * list_tasks, get_task, get_task_result, cancel_task (design MF-10). Task
 * views carry camelCase aliases besides the project's names (design MF-19,
 * task-view.ts); get_task also answers under `pending_elicitations`. A task whose
 * call waits for an elicitation or sampling request reads `input_required`
 * (ADR 0002 §8); the request itself is in `pending_client_action`.
 * get_task_result waits at most `timeout_ms` whoever runs the task (the
 * gateway, or an upstream whose task the transparent face created).
 * A task re-attached after a restart (MF-20) is asked of its upstream by
 * get_task and cancel_task, each waiting a bounded time for the connection:
 * an upstream that cannot be reached gives the stored status with a `note`,
 * or a cancel that says the upstream could not be told (never an error after
 * the local cancel).
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { Clock } from "../../../clock.js";
import { ErrorCodes, errorMessage, GatewayError } from "../../../errors.js";
import type { UpstreamHandle } from "../../../upstream/handle.js";
import { getToolTask, getToolTaskResult } from "../../../tasks/native.js";
import { defineTool, iso, json } from "../define.js";
import { elicitationSummary } from "../envelope.js";
import { taskViewWithArgs } from "./task-view.js";

const taskId = z.string().min(1).describe("task_id from execute_tool or list_tasks");

export const listTasks = defineTool({
  name: "list_tasks",
  title: "List tasks",
  description: "List this session's tasks (tool calls promoted after their timeout). Working tasks only unless include_completed or status is given.",
  input: {
    server: z.string().optional().describe("Only tasks of this server"),
    status: z
      .enum(["working", "input_required", "completed", "failed", "cancelled", "expired"])
      .optional()
      .describe("Only tasks in this status (input_required: waiting for an answer to an elicitation or sampling request)"),
    include_completed: z.boolean().default(false).describe("Include ended tasks (kept for a retention period)"),
  },
  annotations: { readOnlyHint: true },
  async run({ session }, { server, status, include_completed }) {
    // The manager's `working` includes tasks waiting for input; here each status lists only its own.
    const tasks = (await session.tasks.list({ server, status, includeCompleted: include_completed })).filter(
      (t) => status !== "working" || t.inputRequired !== true,
    );
    return json({ tasks: tasks.map(taskViewWithArgs) });
  },
});

export const getTask = defineTool({
  name: "get_task",
  title: "Get a task",
  description:
    "Get a task's status and the pending elicitations of its server (which may be what it waits for): a summary in `pending_elicitations_for_server`, the full requests in `pending_elicitations`.",
  input: { task_id: taskId },
  annotations: { readOnlyHint: true },
  async run({ session, gateway }, { task_id }, extra) {
    let task = await session.tasks.get(task_id);
    let note: string | undefined;
    if (task.upstreamTaskId !== undefined && task.status === "working" && session.tasks.isReattached(task_id)) {
      // Re-attached after a restart (MF-20): nothing here watches it, so its status is asked of the upstream now (TK-10).
      // A poll that fails (or an upstream not connected within taskPollTimeoutMs) shows the stored status with a note;
      // one the upstream answers "unknown task" has failed the task.
      const ctx = { tasks: session.tasks, settings: gateway.settings, clock: gateway.clock };
      const connect = (server: string) => within(gateway.clock, session.connection(server), gateway.settings.upstream.taskPollTimeoutMs, server);
      try {
        await getToolTask(ctx, task_id, connect, extra.signal);
      } catch (err) {
        note = `could not ask upstream '${task.server}' about this task now (${errorMessage(err)}): the status shown is the one stored; call get_task again later`;
      }
      task = await session.tasks.get(task_id);
    }
    const pending = session.pending.list("elicitation", task.server);
    return json({
      task: taskViewWithArgs(task),
      ...(note !== undefined ? { note } : {}),
      pending_elicitations_for_server: pending.map(elicitationSummary),
      // The alias shape (design MF-19): requestId, server, timestamp, params.
      pending_elicitations: pending.map((p) => ({ requestId: p.requestId, server: p.server, timestamp: iso(p.receivedAt), params: p.params })),
    });
  },
});

export const getTaskResult = defineTool({
  name: "get_task_result",
  title: "Get a task's result",
  description:
    "Wait up to `timeout_ms` (default: the task's remaining TTL) for a task to end and return the tool's original result. Failed, cancelled and expired tasks give an error that says why.",
  input: {
    task_id: taskId,
    timeout_ms: z.number().int().min(0).max(3_600_000).optional().describe("Longest wait in ms"),
  },
  async run({ session, gateway }, { task_id, timeout_ms }, extra) {
    const current = await session.tasks.get(task_id);
    const running = current.status === "working" && !session.tasks.settledByCall(task_id);
    if (current.upstreamTaskId !== undefined && (running || current.resultUpstream === true)) {
      // An upstream task (created through the transparent face, or a promoted execute_tool re-attached after a
      // restart: design MF-20): its result is fetched from the upstream now, waiting at most timeout_ms
      // (EMCP_TASK_STILL_WORKING then; the upstream task goes on). A promoted call still running here settles
      // its task itself: waited for below, without a second tasks/result upstream.
      const ctx = { tasks: session.tasks, settings: gateway.settings, clock: gateway.clock };
      return getToolTaskResult(ctx, task_id, (server) => session.connection(server), { signal: extra.signal, waitMs: timeout_ms });
    }
    const wait = timeout_ms ?? Math.max(0, current.expiresAt - gateway.clock.now());
    const task = await session.tasks.waitForTerminal(task_id, wait, extra.signal);
    switch (task.status) {
      case "completed":
        return task.result as CallToolResult;
      case "working":
        throw new GatewayError(
          ErrorCodes.TASK_STILL_WORKING,
          `task ${task_id} is still working after ${wait}ms (nothing is lost); call get_task_result again, or await_activity to be woken when it ends`,
          { details: { taskId: task_id } },
        );
      default:
        throw new GatewayError(ErrorCodes.TASK_NOT_COMPLETED, `task ${task_id} ${task.status}: ${task.error ?? task.statusMessage ?? "no result"}`, {
          details: { taskId: task_id, status: task.status },
        });
    }
  },
});

export const cancelTask = defineTool({
  name: "cancel_task",
  title: "Cancel a task",
  description: "Cancel a working task; the upstream server is sent notifications/cancelled for the call.",
  input: { task_id: taskId },
  annotations: { destructiveHint: true },
  async run({ session, gateway }, { task_id }) {
    const before = await session.tasks.get(task_id);
    const reattached = session.tasks.isReattached(task_id);
    const outcome = await session.tasks.cancel(task_id);
    // A task re-attached after a restart has no call here to abort: its upstream task is cancelled directly (TK-12).
    // The local cancel is done: what happened upstream is reported, never thrown.
    if (outcome.success && reattached && before.upstreamTaskId !== undefined) {
      const bound = gateway.settings.tasks.upstreamCancelTimeoutMs;
      try {
        const conn = await within(gateway.clock, session.connection(before.server), bound, before.server);
        await conn.cancelTask(before.upstreamTaskId, bound);
        const message = `task ${task_id} cancelled; upstream '${before.server}' cancelled its task`;
        return json({ ...outcome, message, upstream_cancelled: true }, message);
      } catch (err) {
        const message = `task ${task_id} cancelled here, but upstream '${before.server}' could not be told (${errorMessage(err)}): its task may run on there until its TTL ends`;
        return json({ ...outcome, message, upstream_cancelled: false }, message);
      }
    }
    return json(outcome, outcome.message);
  },
});

/** The connection, if it is there within `ms` (an injected-clock timer); the attempt goes on in the background. */
async function within(clock: Clock, connecting: Promise<UpstreamHandle>, ms: number, server: string): Promise<UpstreamHandle> {
  let timer: ReturnType<Clock["setTimeout"]> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(() => reject(new Error(`upstream '${server}' is not connected (no connection within ${ms}ms)`)), ms);
  });
  connecting.catch(() => undefined);
  try {
    return await Promise.race([connecting, late]);
  } finally {
    clock.clearTimeout(timer);
  }
}
