/**
 * Emulation (design TK-15): a tool the upstream only runs as a task, called
 * as one blocking tools/call — the upstream task, its keep-alives (progress,
 * status polls) and its cancel. Also the best-effort, bounded cancel of an
 * upstream task that native.ts uses for the gateway tasks it owns. The
 * task-augmented calls and tasks/get|result|cancel are in native.ts.
 */
import { RELATED_TASK_META_KEY, type CallToolRequest, type CallToolResult, type Task } from "@modelcontextprotocol/sdk/types.js";
import type { ProgressCallback } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { GatewaySettings } from "../config/schema.js";
import type { Clock } from "../clock.js";
import type { UpstreamHandle } from "../upstream/handle.js";
import type { CallOrigin } from "../upstream/origin.js";
import { DEFAULT_POLL_INTERVAL_MS } from "../mcp/task-object.js";

/** Floor on how often the gateway polls an upstream task (an upstream may suggest 0). */
const MIN_POLL_INTERVAL_MS = 250;

/** What emulation needs of the session (a NativeTaskContext has it). */
export interface EmulationContext {
  settings: GatewaySettings;
  clock: Clock;
}

/** Best effort, bounded by upstreamCancelTimeoutMs; the connection's close() waits for it. */
export function cancelUpstream(settings: GatewaySettings, conn: UpstreamHandle, upstreamTaskId: string): Promise<void> {
  if (conn.status !== "connected") return Promise.resolve();
  return conn.cancelTask(upstreamTaskId, settings.tasks.upstreamCancelTimeoutMs).then(
    () => undefined,
    () => undefined,
  );
}

/**
 * Emulation (design TK-15): runs a tool the upstream only runs as a task as one
 * blocking call. It blocks on the upstream's tasks/result, so queued
 * elicitations arrive inline and go to the client like any other (attributed
 * to `origin`). Keep-alives, while the upstream task runs:
 * - with `onprogress` (the client gave a progress token): the upstream's own
 *   progress, its status (polled with tasks/get at the upstream's poll
 *   interval) and, between those, a repeat of the last status at least every
 *   `gateway.tasks.progressKeepAliveMs`. A client with resetTimeoutOnProgress
 *   keeps waiting as long as these come.
 * - without a token nothing can be sent inside MCP (progress needs a token);
 *   over HTTP the request's SSE stream carries comment frames every
 *   `gateway.http.sseKeepAliveMs` (the SDK transport's keep-alive), which keeps
 *   proxies and HTTP idle timeouts from closing it, but does not reset a
 *   client's own request timeout (the SDK client's is 60 s): such a client
 *   needs a longer `timeout` for long calls (ADR 0002 §7).
 * The client's cancel cancels the upstream task. With `keepAlive: false`
 * (a tool the upstream also runs plainly) the upstream's own progress passes
 * through unchanged and nothing is polled: what a plain call would have sent.
 * `onTask` hears of the upstream task once it exists (execute_tool maps a
 * promoted call onto it, design MF-20).
 */
export async function runUpstreamTaskToEnd(
  ctx: EmulationContext,
  conn: UpstreamHandle,
  call: CallToolRequest["params"],
  o: {
    signal?: AbortSignal | undefined;
    timeoutMs: number;
    onprogress?: ProgressCallback | undefined;
    origin?: CallOrigin | undefined;
    /** @default true */
    keepAlive?: boolean | undefined;
    onTask?: ((task: Task) => void) | undefined;
  },
): Promise<CallToolResult> {
  const ttlMs = Math.min(o.timeoutMs, ctx.settings.tasks.maxTtlMs);
  const { clock } = ctx;
  // One increasing step counter for the upstream's own progress and the keep-alives (the client's
  // token never goes upstream: the call carries the gateway's).
  let step = 0;
  let running = true;
  let last: string | undefined;
  let heartbeat: ReturnType<Clock["setTimeout"]> | undefined;
  const keepAlive = o.keepAlive ?? true;
  const report = keepAlive ? o.onprogress : undefined;
  const progress = (message: string | undefined) => {
    if (!running || !report) return;
    if (message !== undefined) last = message;
    report({ progress: ++step, ...(last !== undefined ? { message: last } : {}) });
    // The longest silence is progressKeepAliveMs: each notification restarts the wait.
    clock.clearTimeout(heartbeat);
    heartbeat = clock.setTimeout(() => progress(undefined), ctx.settings.tasks.progressKeepAliveMs);
  };
  const task = await conn.callToolAsTask(call, ttlMs, {
    signal: o.signal,
    onprogress: keepAlive ? (p) => progress(p.message ?? `${p.progress}${p.total !== undefined ? `/${p.total}` : ""}`) : o.onprogress,
    origin: o.origin,
  });
  o.onTask?.(task);
  const onAbort = () => void cancelUpstream(ctx.settings, conn, task.taskId);
  o.signal?.addEventListener("abort", onAbort, { once: true });
  let stopPolling = () => undefined as void;
  if (report) {
    progress(task.statusMessage ? `${task.status}: ${task.statusMessage}` : task.status);
    stopPolling = pollStatus(ctx, conn, task, (t) => progress(t.statusMessage ? `${t.status}: ${t.statusMessage}` : t.status));
  }
  try {
    const result = await conn.getTaskResult(task.taskId, { signal: o.signal, timeoutMs: ttlMs, origin: o.origin });
    // The client made a plain call: the upstream's task stays out of its result.
    const { _meta, ...rest } = result;
    const { [RELATED_TASK_META_KEY]: _task, ...meta } = _meta ?? {};
    return Object.keys(meta).length ? { ...rest, _meta: meta } : rest;
  } finally {
    running = false;
    clock.clearTimeout(heartbeat);
    stopPolling();
    conn.releaseUpstreamTask(task.taskId);
    o.signal?.removeEventListener("abort", onAbort);
  }
}

/** Polls the upstream task and reports each status until stopped (a failed poll just waits for the next). */
function pollStatus(ctx: EmulationContext, conn: UpstreamHandle, task: Task, onstatus: (t: Task) => void): () => void {
  const { clock } = ctx;
  let stopped = false;
  let timer: ReturnType<Clock["setTimeout"]> | undefined;
  const every = (ms: number | undefined) => Math.max(MIN_POLL_INTERVAL_MS, ms ?? DEFAULT_POLL_INTERVAL_MS);
  const next = (ms: number | undefined) => {
    if (!stopped && conn.status === "connected") timer = clock.setTimeout(tick, every(ms));
  };
  const tick = () => {
    conn.getTask(task.taskId, { timeoutMs: ctx.settings.upstream.taskPollTimeoutMs }).then(
      (t) => {
        if (stopped) return;
        onstatus(t);
        if (t.status === "working" || t.status === "input_required") next(t.pollInterval ?? task.pollInterval);
      },
      () => next(task.pollInterval),
    );
  };
  next(task.pollInterval);
  return () => {
    stopped = true;
    clock.clearTimeout(timer);
  };
}
