/**
 * Native MCP tasks on the transparent face (MCP 2025-11-25 tasks; design TK-7, TK-8, TK-15):
 * tasks/get, tasks/result, tasks/list and tasks/cancel over the session's
 * tasks, plus the two ways a tools/call meets a task — a task-augmented call
 * (CreateTaskResult at once, for every upstream tool) and emulation (a plain
 * call of a tool the upstream only runs as a task blocks until it ends).
 */
import {
  CancelTaskRequestSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  type CallToolRequest,
  type CallToolResult,
  type CreateTaskResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { runUpstreamTaskToEnd } from "../../tasks/emulation.js";
import { cancelToolTask, getToolTask, getToolTaskResult, startToolTask, type NativeTaskContext } from "../../tasks/native.js";
import { toMcpTask } from "../../mcp/task-object.js";
import type { UpstreamHandle } from "../../upstream/handle.js";
import { CallOrigin } from "../../upstream/origin.js";
import { forwardProgress } from "../progress.js";
import { paginate } from "./catalog.js";
import { verbatimErrors, type HandlerContext } from "./context.js";

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** The capability the transparent face advertises: task-augmented tools/call for every tool. */
export const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

/**
 * The tool as this face serves it: the gateway runs every tool both ways
 * (gateway-owned tasks for upstreams that cannot, emulation for clients that
 * do not ask for a task), so `execution.taskSupport` is always `optional`.
 */
export function honouredTool(tool: Tool): Tool {
  return { ...tool, execution: { ...tool.execution, taskSupport: "optional" } };
}

export function nativeContext(h: HandlerContext): NativeTaskContext {
  return {
    tasks: h.session.tasks,
    settings: h.gateway.settings,
    clock: h.gateway.clock,
    downstream: h.server,
    progress: (progressToken, p) => h.session.bridge?.notify("", "notifications/progress", { ...p, progressToken }),
  };
}

/**
 * tools/call with its task semantics. Returns CreateTaskResult for a
 * task-augmented call, otherwise the tool's result (driving the upstream task
 * to its end when the upstream requires one).
 */
export async function callTool(
  h: HandlerContext,
  conn: UpstreamHandle,
  params: CallToolRequest["params"],
  upstreamName: string,
  extra: Extra,
): Promise<CallToolResult | CreateTaskResult> {
  const untrack = h.routes.track(extra.requestId);
  // Closing the session aborts the call first (an emulated call then cancels its upstream task before the connection closes);
  // so does the request's own signal. Not AbortSignal.any(): Node keeps a composite signal with a listener alive until it
  // aborts, and the SDK never removes the abort listener each request adds, so every call and its session stayed in memory.
  const closing = new AbortController();
  const unguard = h.session.tasks.abortOnClose(closing);
  const onAbort = () => closing.abort(extra.signal.reason);
  if (extra.signal.aborted) onAbort();
  else extra.signal.addEventListener("abort", onAbort, { once: true });
  const signal = closing.signal;
  try {
    if (params.task) return { task: await startToolTask(nativeContext(h), conn, params, upstreamName, extra.requestId) };
    const progress = forwardProgress(extra, params._meta?.progressToken);
    // What the upstream asks of the client during this call rides this request's stream (bridge.ts).
    const origin = new CallOrigin({ downstream: h.server, requestId: extra.requestId });
    const call = { ...params, name: upstreamName };
    const result =
      (await conn.taskSupport(upstreamName)) === "required"
        ? await runUpstreamTaskToEnd(nativeContext(h), conn, call, {
            signal,
            timeoutMs: h.gateway.settings.tasks.maxTtlMs,
            onprogress: progress.onprogress,
            origin,
          })
        : await conn.callTool(upstreamName, params.arguments, {
            signal,
            timeoutMs: h.gateway.settings.tasks.maxTtlMs,
            onprogress: progress.onprogress,
            _meta: params._meta,
            origin,
            // Past the SDK client as one raw message, where the tool allows it (docs/adr/0037 §2).
            raw: h.gateway.settings.transparent.fastPath,
          });
    await progress.flush();
    return result;
  } finally {
    extra.signal.removeEventListener("abort", onAbort);
    unguard();
    untrack();
  }
}

export function registerTaskHandlers(h: HandlerContext, connect: (server: string) => Promise<UpstreamHandle>): void {
  const server = verbatimErrors(h.server);
  const ctx = nativeContext(h);
  server.setRequestHandler(GetTaskRequestSchema, (req, extra) => getToolTask(ctx, req.params.taskId, connect, extra.signal));
  server.setRequestHandler(GetTaskPayloadRequestSchema, async (req, extra) => {
    // What the upstream asks of the client while the result is awaited rides this request's stream:
    // an upstream task's requests as they come, a gateway-owned task's queued ones (input_required) too.
    const { taskId } = req.params;
    const untrack = h.routes.track(extra.requestId);
    const stopConsuming = h.routes.consume(taskId, extra.requestId);
    try {
      return await getToolTaskResult(ctx, taskId, connect, { signal: extra.signal, requestId: extra.requestId });
    } finally {
      stopConsuming();
      untrack();
    }
  });
  server.setRequestHandler(ListTasksRequestSchema, async (req) => {
    const all = (await ctx.tasks.list({ includeCompleted: true })).map(toMcpTask);
    const { page, nextCursor } = paginate(all, req.params?.cursor);
    return { tasks: page, ...(nextCursor ? { nextCursor } : {}) };
  });
  server.setRequestHandler(CancelTaskRequestSchema, async (req) => cancelToolTask(ctx, req.params.taskId));
}
