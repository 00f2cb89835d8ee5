/**
 * MCP-native task operations over one session's TaskManager (design
 * TK-7..TK-14): task-augmented tools/call and tasks/get|result|cancel, for the
 * transparent faces and execute_tool. See docs/design/tasks.md, "How the code keeps it".
 */
import { ErrorCode, type CallToolRequest, type CallToolResult, type ProgressToken, type RequestId, type Task } from "@modelcontextprotocol/sdk/types.js";
import type { ProgressCallback } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { GatewaySettings } from "../config/schema.js";
import type { Clock } from "../clock.js";
import { ErrorCodes, GatewayError, errorMessage, isUpstreamAnswer, rpcErrorFromRecord, rpcErrorRecordOf } from "../errors.js";
import type { TaskRecord } from "../store/contracts.js";
import type { UpstreamHandle } from "../upstream/handle.js";
import { runMappingExtensionTask } from "../upstream/modern/extension-task.js";
import { CallOrigin } from "../upstream/origin.js";
import { cancelUpstream } from "./emulation.js";
import { DEFAULT_POLL_INTERVAL_MS, toMcpTask, withRelatedTask } from "../mcp/task-object.js";
import type { TaskManager } from "./task-manager.js";

export interface NativeTaskContext {
  tasks: TaskManager;
  settings: GatewaySettings;
  clock: Clock;
  /** The downstream connection the requests come from (a face's SDK Server), named in each call's origin. */
  downstream?: object | undefined;
  /** Sends a progress notification to the client under its own token (after the call has returned). */
  progress?: ((token: ProgressToken, progress: Parameters<ProgressCallback>[0]) => void) | undefined;
}

type ToolCallParams = CallToolRequest["params"];

/** Starts a task-augmented tools/call (downstream request `requestId`) and returns the gateway's task at once. */
export async function startToolTask(
  ctx: NativeTaskContext,
  conn: UpstreamHandle,
  params: ToolCallParams,
  upstreamName: string,
  requestId?: RequestId,
): Promise<Task> {
  const { tasks, settings } = ctx;
  const ttlMs = Math.min(params.task?.ttl ?? settings.tasks.defaultTtlMs, settings.tasks.maxTtlMs);
  const { task: _augmentation, ...plain } = params;
  const call = { ...plain, name: upstreamName };
  // A task for a tool that does not exist would only fail later: refuse it now, as the upstream would.
  if (!(await conn.cachedTools()).some((t) => t.name === upstreamName)) {
    throw new GatewayError(ErrorCodes.UNKNOWN_TOOL, `Tool ${params.name} not found; call tools/list to see the tools of this face`, {
      details: { tool: params.name },
    });
  }
  // The client's progress token stays valid for the task's life: progress is re-sent under it (the
  // upstream call gets the gateway's own token, so ids of two connections never mix).
  const token = params._meta?.progressToken;
  let taskId: string | undefined;
  const onprogress: ProgressCallback = (p) => {
    // Progress tokens are only valid while their operation runs: nothing is sent once the task has ended.
    if (taskId !== undefined && !ctx.tasks.isRunning(taskId)) return;
    if (taskId !== undefined) ctx.tasks.setProgress(taskId, p);
    if (token !== undefined) ctx.progress?.(token, p);
  };
  const release = tasks.reserveCall();
  try {
    const upstreamTask = (await conn.taskSupport(upstreamName)) !== "forbidden";
    // The tools/call is answered at once: only an upstream's own task creation happens inside it.
    const origin = new CallOrigin({ downstream: ctx.downstream, requestId: upstreamTask ? requestId : undefined });
    const record = upstreamTask
      ? await startUpstreamTask(ctx, conn, call, ttlMs, onprogress, origin)
      : await startGatewayTask(ctx, conn, call, ttlMs, onprogress, origin);
    taskId = record.taskId;
    return toMcpTask(await ctx.tasks.get(record.taskId));
  } finally {
    release();
  }
}

/**
 * The call starts once its task is stored (a task the client learns about
 * exists, also after a restart); its result is stored before anyone is told
 * the task completed. A call a 2026-07-28 upstream makes its extension task
 * (bridge 4) maps the task onto it, so a restart keeps it; while the call
 * runs here it settles the task (settledByCall: nobody else asks upstream).
 */
async function startGatewayTask(
  ctx: NativeTaskContext,
  conn: UpstreamHandle,
  call: ToolCallParams,
  ttlMs: number,
  onprogress: ProgressCallback,
  origin: CallOrigin,
): Promise<TaskRecord> {
  conn.assertConnected(); // throws now, before a record exists, if the connection just dropped
  const abort = new AbortController();
  const record = await ctx.tasks.create({ server: conn.name, toolName: call.name, toolArgs: call.arguments ?? {}, ttlMs, abort, settledByCall: true });
  attachTask(ctx.tasks, origin, record.taskId);
  const run = () => conn.callTool(call.name, call.arguments, { signal: abort.signal, timeoutMs: ttlMs, onprogress, _meta: call._meta, origin });
  // complete()/fail() never reject (a store failure is logged there).
  void runMappingExtensionTask((mapping) => ctx.tasks.mapUpstream(record.taskId, mapping), run).then(
    (result) => ctx.tasks.complete(record.taskId, result),
    (err) => ctx.tasks.fail(record.taskId, `upstream '${conn.name}': ${errorMessage(err)}`, rpcErrorRecordOf(err)),
  );
  return record;
}

async function startUpstreamTask(
  ctx: NativeTaskContext,
  conn: UpstreamHandle,
  call: ToolCallParams,
  ttlMs: number,
  onprogress: ProgressCallback,
  origin: CallOrigin,
): Promise<TaskRecord> {
  const upstream = await conn.callToolAsTask(call, ttlMs, { onprogress, origin });
  const cancel = () => void cancelUpstream(ctx.settings, conn, upstream.taskId);
  const abort = new AbortController();
  abort.signal.addEventListener("abort", cancel, { once: true });
  try {
    const record = await ctx.tasks.create({
      server: conn.name,
      toolName: call.name,
      toolArgs: call.arguments ?? {},
      // The upstream may keep its task for less time than asked: the gateway's task cannot outlive it.
      ttlMs: typeof upstream.ttl === "number" ? Math.min(ttlMs, upstream.ttl) : ttlMs,
      abort,
      upstreamTaskId: upstream.taskId,
      upstreamSessionId: conn.upstreamSessionId,
      pollIntervalMs: upstream.pollInterval ?? DEFAULT_POLL_INTERVAL_MS,
    });
    attachTask(ctx.tasks, origin, record.taskId);
    return record;
  } catch (err) {
    cancel(); // no gateway task will own it (the session is closing or full)
    throw err;
  }
}

/**
 * tasks/get. Upstream tasks still running are asked about now (and only now);
 * a terminal upstream status ends the gateway task, without fetching the result.
 */
export async function getToolTask(
  ctx: NativeTaskContext,
  taskId: string,
  connect: (server: string) => Promise<UpstreamHandle>,
  signal?: AbortSignal,
): Promise<Task> {
  const record = await lookup(ctx, taskId);
  if (record.upstreamTaskId === undefined || record.status !== "working" || ctx.tasks.settledByCall(taskId)) return toMcpTask(record);
  const conn = await connect(record.server);
  let upstream: Task;
  try {
    upstream = await conn.getTask(record.upstreamTaskId, { signal, timeoutMs: ctx.settings.upstream.taskPollTimeoutMs });
  } catch (err) {
    if (isUpstreamAnswer(err) && err.code === ErrorCode.InvalidParams) {
      await ctx.tasks.fail(taskId, `the upstream no longer knows this task: ${err.message}`);
      return toMcpTask(await lookup(ctx, taskId));
    }
    // The answer is about the gateway's task, in the gateway's words (the upstream's reply names its own ids).
    throw new GatewayError(ErrorCodes.UPSTREAM_ERROR, `could not ask upstream '${record.server}' about task ${taskId}: ${errorMessage(err)}; retry tasks/get`, {
      details: { taskId, server: record.server },
      cause: err,
      rpcCode: ErrorCode.InternalError,
    });
  }
  await applyUpstreamStatus(ctx.tasks, record, upstream);
  const now = await lookup(ctx, taskId);
  const view = toMcpTask(now);
  if (now.status === "working" && upstream.status === "input_required") view.status = "input_required";
  if (upstream.pollInterval !== undefined) view.pollInterval = upstream.pollInterval;
  return view;
}

async function applyUpstreamStatus(tasks: TaskManager, record: TaskRecord, upstream: Task): Promise<void> {
  switch (upstream.status) {
    case "completed":
    case "failed":
    case "cancelled":
      await tasks.endUpstream(record.taskId, upstream.status, upstream.statusMessage);
      break;
    default:
      await tasks.noteUpstreamStatus(record.taskId, upstream.statusMessage);
  }
}

/** How long and for whom tasks/result (or the meta face's get_task_result) waits. */
export interface TaskResultOptions {
  signal?: AbortSignal | undefined;
  /**
   * Longest wait before answering EMCP_TASK_STILL_WORKING (the task goes on).
   * @default the task's remaining TTL
   */
  waitMs?: number | undefined;
  /** The downstream request waiting (what the upstream asks meanwhile rides its stream). */
  requestId?: RequestId | undefined;
}

/**
 * tasks/result: waits for the task to end and returns what the tool call
 * returned (its JSON-RPC error is thrown as such). Upstream tasks are asked
 * for their result now; what they ask of the client meanwhile is forwarded.
 * A wait cut short by `waitMs` leaves the task as it is.
 */
export async function getToolTaskResult(
  ctx: NativeTaskContext,
  taskId: string,
  connect: (server: string) => Promise<UpstreamHandle>,
  o: TaskResultOptions = {},
): Promise<CallToolResult> {
  const record = await lookup(ctx, taskId);
  const remaining = Math.max(1, record.expiresAt - ctx.clock.now());
  // Upstream tasks: whatever the upstream returns for its task (result or JSON-RPC error) is the answer.
  // (A mapped task whose call runs here is waited for below: its call settles it.)
  const running = record.status === "working" && !ctx.tasks.settledByCall(taskId);
  if (record.upstreamTaskId !== undefined && (running || record.resultUpstream === true)) {
    const conn = await connect(record.server);
    const timeoutMs = record.status === "working" ? remaining : ctx.settings.upstream.requestTimeoutMs;
    const origin = new CallOrigin({ downstream: ctx.downstream, requestId: o.requestId });
    if (record.status === "working") attachTask(ctx.tasks, origin, taskId);
    const wait = boundedWait(ctx.clock, o.signal, o.waitMs);
    let result: CallToolResult;
    try {
      result = await conn.getTaskResult(record.upstreamTaskId, { signal: wait.signal, timeoutMs, origin });
    } catch (err) {
      if (wait.timedOut()) throw stillWorking(taskId, o.waitMs);
      if (!o.signal?.aborted) {
        if (isUpstreamAnswer(err)) await ctx.tasks.endUpstream(taskId, "failed", errorMessage(err));
        else await ctx.tasks.fail(taskId, `upstream '${record.server}': ${errorMessage(err)}`);
      }
      throw err;
    } finally {
      wait.clear();
    }
    await ctx.tasks.endUpstream(taskId, result.isError === true ? "failed" : "completed");
    return withRelatedTask(result, taskId);
  }
  const done = await ctx.tasks.waitForTerminal(taskId, Math.min(o.waitMs ?? Infinity, remaining + 1), o.signal);
  switch (done.status) {
    case "completed":
      return withRelatedTask(done.result as CallToolResult, taskId);
    case "working":
    case "input_required":
      throw stillWorking(taskId, o.waitMs);
    default: {
      const reason = `task ${taskId} ${done.status}: ${done.error ?? done.statusMessage ?? "no result"}`;
      // The upstream's own JSON-RPC error is the call's answer: the boundary passes it through verbatim.
      if (done.rpcError) throw new GatewayError(ErrorCodes.UPSTREAM_ERROR, reason, { details: { taskId }, cause: rpcErrorFromRecord(done.rpcError) });
      throw new GatewayError(ErrorCodes.TASK_NOT_COMPLETED, reason, { details: { taskId, status: done.status } });
    }
  }
}

function stillWorking(taskId: string, waitMs: number | undefined): GatewayError {
  const after = waitMs === undefined ? "" : ` after ${waitMs}ms`;
  return new GatewayError(
    ErrorCodes.TASK_STILL_WORKING,
    `task ${taskId} is still working${after} (nothing is lost); ask for its result again, or wait for its status to change`,
    { details: { taskId } },
  );
}

/** `signal`, also aborted after `waitMs` (when given); clear() drops the timer. */
function boundedWait(clock: Clock, signal: AbortSignal | undefined, waitMs: number | undefined) {
  if (waitMs === undefined) return { signal, timedOut: () => false, clear: () => undefined };
  const abort = new AbortController();
  let timedOut = false;
  const onAbort = () => abort.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  const timer = clock.setTimeout(() => {
    timedOut = true;
    abort.abort(`no result within ${waitMs}ms`);
  }, waitMs);
  return {
    signal: abort.signal,
    timedOut: () => timedOut,
    clear: () => {
      clock.clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

/** The call of `origin` belongs to task `taskId`: it reads input_required while a request of the call waits for the client. */
function attachTask(tasks: TaskManager, origin: CallOrigin, taskId: string): void {
  origin.attachTask(taskId, (waiting) => tasks.setInputRequired(taskId, waiting));
}

/** tasks/cancel: terminal tasks cannot be cancelled; upstream tasks are cancelled upstream too. */
export async function cancelToolTask(ctx: NativeTaskContext, taskId: string): Promise<Task> {
  const record = await lookup(ctx, taskId);
  if (record.status !== "working") {
    // The SDK's own wording for this case (spec: -32602), which clients match.
    throw new GatewayError(ErrorCodes.TASK_ENDED, `Cannot cancel task in terminal status: ${toMcpTask(record).status}`, { details: { taskId } });
  }
  await ctx.tasks.cancel(taskId, "cancelled by the client (tasks/cancel)");
  return toMcpTask(await lookup(ctx, taskId));
}

async function lookup(ctx: NativeTaskContext, taskId: string): Promise<TaskRecord> {
  try {
    return await ctx.tasks.get(taskId);
  } catch (err) {
    if (err instanceof GatewayError && err.code !== ErrorCodes.UNKNOWN_TASK) throw err; // the store failed: say so
    // The SDK's own wording for an unknown task (spec: -32602), which clients match.
    throw new GatewayError(ErrorCodes.UNKNOWN_TASK, `Task not found: ${taskId}`, { details: { taskId }, cause: err });
  }
}
