/**
 * The meta face's tasks as 2026-07-28 tasks (ADR 0032, "The meta face across
 * eras"; design EV-21). The meta face runs no 2025 task-augmented calls: its
 * tasks are execute_tool (and run_code) calls promoted past their timeout_ms,
 * and approvals, kept in its session's TaskManager. For a modern caller that
 * session is the principal's task host on the meta face (modern-tasks.ts), so
 * this backend reads and ends them there directly: tasks/get is the task
 * record (the result inlined once it ended), what it waits for is the host
 * session's pending elicitations and sampling requests related to the task,
 * tasks/update answers them, tasks/cancel is cancel_task's cancel. Status
 * changes reach listen streams through the session's event observers.
 */
import { RELATED_TASK_META_KEY, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { createTaskResult, detailedTask, type InputRequest, type TaskOutcome } from "../mcp/modern/tasks-extension.js";
import { relatedTaskId, toMcpTask } from "../mcp/task-object.js";
import type { GatewayContext } from "../session/gateway-context.js";
import type { PendingInfo, PendingKind } from "../session/pending-requests.js";
import type { Session } from "../session/session.js";
import type { TaskRecord } from "../store/contracts.js";
import { getToolTask, getToolTaskResult } from "../tasks/native.js";

type RpcAnswer = { result: Record<string, unknown> } | { error: { code: number; message: string; data?: unknown } };

/** The meta tools whose result may be a promotion to a task (their `structuredContent.task_id`). */
const PROMOTING = new Set(["execute_tool", "run_code"]);
const PENDING_KINDS: readonly PendingKind[] = ["elicitation", "sampling"];
const METHOD_OF: Record<PendingKind, string> = { elicitation: "elicitation/create", sampling: "sampling/createMessage" };

function withoutRelated(params: Record<string, unknown>): Record<string, unknown> {
  const meta = params._meta as Record<string, unknown> | undefined;
  if (meta === undefined || !(RELATED_TASK_META_KEY in meta)) return params;
  const { [RELATED_TASK_META_KEY]: _related, ...rest } = meta;
  const { _meta: _replaced, ...copy } = params;
  return Object.keys(rest).length > 0 ? { ...copy, _meta: rest } : copy;
}

export class MetaTasks {
  private readonly stopObserving: () => void;

  constructor(
    private readonly gateway: GatewayContext,
    private readonly session: Session,
    /** Tells the host's listeners that a task's state may have changed. */
    announce: (taskId: string) => void,
  ) {
    this.stopObserving = session.events.observe((change) => {
      if (change.type.startsWith("task_")) {
        const { taskId } = change.data;
        if (typeof taskId === "string") announce(taskId);
        return;
      }
      if (change.type === "elicitation_request" || change.type === "sampling_request") {
        const params = change.data.params as { _meta?: Record<string, unknown> } | undefined;
        const taskId = relatedTaskId(params?._meta);
        if (taskId !== undefined) announce(taskId);
      }
    });
  }

  /**
   * A modern tools/call of a meta tool by a client that declared the tasks
   * extension, given the face's answer to it: a promotion is the task it
   * promoted to, anything else the result as it is.
   */
  async answer(name: unknown, created: RpcAnswer): Promise<RpcAnswer> {
    if ("error" in created) return created;
    const taskId = (created.result.structuredContent as { task_id?: unknown } | undefined)?.task_id;
    if (typeof name === "string" && PROMOTING.has(name) && typeof taskId === "string") {
      const record = await this.session.tasks.get(taskId).catch(() => undefined);
      if (record) return { result: createTaskResult(toMcpTask(record)) };
    }
    return { result: { ...created.result, resultType: "complete" } };
  }

  /** tasks/get: the task, what it waits for, and once it ended its result (or error) inlined. */
  async getTask(taskId: string): Promise<RpcAnswer> {
    let record = await this.session.tasks.get(taskId);
    if (record.upstreamTaskId !== undefined && record.status === "working" && this.session.tasks.isReattached(taskId)) {
      // Re-attached after a restart (ADR 0014): nothing watches it here, so its upstream is asked now, as get_task does.
      await getToolTask(this.native(), taskId, (server) => this.session.connection(server)).catch((err: unknown) =>
        this.session.logger.debug({ taskId, err: errorMessage(err) }, "meta_task_poll_failed"),
      );
      record = await this.session.tasks.get(taskId);
    }
    return { result: detailedTask(toMcpTask(record), this.inputsOf(taskId), await this.outcome(record)) };
  }

  /** tasks/update: answers the task's waiting requests named in `inputResponses` (unknown keys are ignored, as on the other faces). */
  async updateTask(taskId: string, inputResponses: Record<string, unknown>): Promise<RpcAnswer> {
    await this.session.tasks.get(taskId);
    const waiting = this.waitingFor(taskId);
    for (const [key, response] of Object.entries(inputResponses)) {
      const info = waiting.get(key);
      if (!info) continue;
      await this.session.pending.respond(info.kind, key, response as never).catch((err: unknown) => {
        // Answered meanwhile (the console, respond_to_elicitation) or gone: nothing waits for this answer any more.
        if (!(err instanceof GatewayError && err.code === ErrorCodes.UNKNOWN_REQUEST)) throw err;
      });
    }
    return { result: { resultType: "complete" } };
  }

  /** tasks/cancel: cancel_task's cancel; a task that ended already is acknowledged too (SEP-2663: idempotent). */
  async cancelTask(taskId: string): Promise<RpcAnswer> {
    await this.session.tasks.get(taskId);
    await this.session.tasks.cancel(taskId, "cancelled by the client (tasks/cancel)");
    return { result: { resultType: "complete" } };
  }

  /** Whether the task is this host's (the principal's). */
  async owns(taskId: string): Promise<boolean> {
    return this.session.tasks.get(taskId).then(
      () => true,
      () => false,
    );
  }

  close(): void {
    this.stopObserving();
  }

  /** The host session's requests waiting for the client that belong to the task, by request id. */
  private waitingFor(taskId: string): Map<string, PendingInfo> {
    const waiting = new Map<string, PendingInfo>();
    for (const kind of PENDING_KINDS) {
      for (const info of this.session.pending.list(kind)) {
        const meta = (info.params as { _meta?: Record<string, unknown> })._meta;
        if (relatedTaskId(meta) === taskId) waiting.set(info.requestId, info);
      }
    }
    return waiting;
  }

  private inputsOf(taskId: string): Record<string, InputRequest> {
    const inputs: Record<string, InputRequest> = {};
    for (const [key, info] of this.waitingFor(taskId)) {
      inputs[key] = { method: METHOD_OF[info.kind], params: withoutRelated(info.params) };
    }
    return inputs;
  }

  /** How an ended task ended: its stored result, its upstream task's result, or its error. */
  private async outcome(record: TaskRecord): Promise<TaskOutcome | undefined> {
    if (record.status === "working" || record.status === "cancelled") return undefined;
    if (record.status === "completed" && record.resultUpstream !== true && record.result !== undefined) return { result: withoutRelated(record.result) };
    if (record.status === "completed") {
      try {
        const result = await getToolTaskResult(this.native(), record.taskId, (server) => this.session.connection(server), {
          waitMs: this.gateway.settings.upstream.taskPollTimeoutMs,
        });
        return { result: withoutRelated(result) };
      } catch (err) {
        return { error: { code: -32603, message: `the task completed upstream, but its result could not be fetched: ${errorMessage(err)}` } };
      }
    }
    const message = record.error ?? record.statusMessage ?? `the task ${record.status}`;
    return { error: record.rpcError ? { ...record.rpcError } : { code: -32603, message } };
  }

  private native() {
    return { tasks: this.session.tasks, settings: this.gateway.settings, clock: this.gateway.clock };
  }
}

/** A JSON-RPC request id the host's face answers; exported for the notifications/cancelled of a caller that hung up. */
export function cancelledNotification(requestId: string | number, reason: string): JSONRPCMessage {
  return { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason } };
}
