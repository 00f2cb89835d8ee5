/**
 * Timeout-based task promotion (design MF-6..MF-8): start the upstream call, wait
 * up to timeoutMs; if it answers, return its result unchanged; otherwise
 * create a gateway-owned task that the still-running call settles later.
 * The race timer is cleared on every path; a downstream cancel before
 * promotion cancels the upstream call. The call's CallOrigin gets the task on
 * promotion, so an elicitation or sampling request of the call (waiting in
 * the pending queue) makes the task read `input_required` (ADR 0002 §8).
 * With `keepUpstreamTask` the call runs as an upstream task from the start
 * and a promoted task maps onto it (upstream task id and session stored), so
 * that it survives a gateway restart (design MF-20, ADR 0014). The promotion
 * waits at most `mappingWaitMs` (1 s) for the upstream to name that task (the
 * client's cancel still counts meanwhile); a later answer is mapped onto the
 * task created without it.
 */
import type { CallToolResult, Task } from "@modelcontextprotocol/sdk/types.js";
import type { ProgressCallback } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Clock } from "../clock.js";
import { ErrorCodes, GatewayError, upstreamCallError } from "../errors.js";
import type { TaskRecord } from "../store/contracts.js";
import type { UpstreamHandle } from "../upstream/handle.js";
import { runMappingExtensionTask, type ExtensionTaskMapping } from "../upstream/modern/extension-task.js";
import { CallOrigin } from "../upstream/origin.js";
import type { TaskManager } from "./task-manager.js";
import type { CreateTaskInput } from "./task-types.js";

export type ExecuteOutcome = { kind: "result"; result: CallToolResult } | { kind: "task"; task: TaskRecord };

export interface ExecuteOptions {
  tasks: TaskManager;
  /** The upstream (its name, the default call, its session for a mapped task); run_code passes the gateway's own name with its `run`. */
  connection: Pick<UpstreamHandle, "name" | "callTool" | "upstreamSessionId">;
  clock: Clock;
  tool: string;
  args: Record<string, unknown> | undefined;
  /** How long to wait before promoting. 0 promotes at once. */
  timeoutMs: number;
  /** TTL of the task if promoted. */
  ttlMs?: number | undefined;
  /** Upper bound for the whole upstream call (timeout + max TTL). */
  callTimeoutMs: number;
  /** The downstream request's cancellation (before promotion only). */
  signal?: AbortSignal | undefined;
  /** Progress before promotion (forwarded to the downstream caller). */
  onprogress?: ProgressCallback | undefined;
  /** What caused the call. @default a new origin of no downstream request */
  origin?: CallOrigin | undefined;
  /** Runs the call (default: a plain tools/call; tools the upstream runs as tasks pass a driver, which reports the upstream task with `onTask`). */
  run?: ((o: RunOptions) => Promise<CallToolResult>) | undefined;
  /**
   * The upstream keeps its tasks across a gateway restart (an HTTP upstream) and `run` runs the
   * call as one: a promoted task maps onto that upstream task. @default false
   */
  keepUpstreamTask?: boolean | undefined;
  /**
   * With keepUpstreamTask: how long a promotion waits for the upstream to name its task
   * (CreateTaskResult) before the task is created without it. @default UPSTREAM_MAPPING_WAIT_MS
   */
  mappingWaitMs?: number | undefined;
}

/** How long a promotion waits for the upstream task's creation (design MF-20): a slow upstream does not hold execute_tool past timeout_ms by more. */
export const UPSTREAM_MAPPING_WAIT_MS = 1_000;

export interface RunOptions {
  signal: AbortSignal;
  timeoutMs: number;
  onprogress: ProgressCallback;
  origin: CallOrigin;
  onTask: (task: Task) => void;
}

const TIMEOUT = Symbol("timeout");

export async function executeWithPromotion(o: ExecuteOptions): Promise<ExecuteOutcome> {
  if (o.signal?.aborted) {
    throw new GatewayError(ErrorCodes.CANCELLED, `the client cancelled the call to '${o.tool}' before it was sent upstream`);
  }
  // Closing the session aborts the call (before promotion: here; after: as the task's).
  const abort = new AbortController();
  const release = o.tasks.reserveCall(abort);
  // Operator log events (design EV-13): tool_execution_start / _complete / _timeout.
  const log = o.tasks.logger;
  const started = o.clock.now();
  const about = { server: o.connection.name, tool: o.tool };
  log?.debug({ ...about, hasArgs: o.args !== undefined }, "tool_execution_start");
  const onDownstreamAbort = () => abort.abort("cancelled by the client");
  o.signal?.addEventListener("abort", onDownstreamAbort, { once: true });
  const stopListening = () => o.signal?.removeEventListener("abort", onDownstreamAbort);
  // Set once the call is promoted; onprogress reads it from then on.
  // eslint-disable-next-line prefer-const
  let taskId: string | undefined;
  const origin = o.origin ?? new CallOrigin();
  // The upstream task the driver runs the call as, once it exists (`at`: when, for the TTL it has left).
  let reportTask: (t: { task: Task; at: number }) => void = () => undefined;
  const upstreamTask = new Promise<{ task: Task; at: number }>((resolve) => (reportTask = resolve));
  const callOptions: RunOptions = {
    signal: abort.signal,
    timeoutMs: o.callTimeoutMs,
    onprogress: (p: Parameters<ProgressCallback>[0]) => (taskId ? o.tasks.setProgress(taskId, p) : o.onprogress?.(p)),
    origin,
    onTask: (task) => reportTask({ task, at: o.clock.now() }),
  };
  // A 2026-07-28 upstream's extension task the call becomes (bridge 4) is mapped onto the promoted task, once there is one.
  let extension: ExtensionTaskMapping | undefined;
  const onExtensionTask = (mapping: ExtensionTaskMapping) => {
    extension = mapping;
    if (taskId !== undefined) o.tasks.mapUpstream(taskId, mapping);
  };
  const call = o.run ? o.run(callOptions) : runMappingExtensionTask(onExtensionTask, () => o.connection.callTool(o.tool, o.args, callOptions));
  let timer: ReturnType<Clock["setTimeout"]> | undefined;
  const timeout = new Promise<typeof TIMEOUT>((resolve) => {
    timer = o.clock.setTimeout(() => resolve(TIMEOUT), o.timeoutMs);
  });
  let promoted = false;
  try {
    const first = await Promise.race([call, timeout]);
    promoted = first === TIMEOUT;
    if (first !== TIMEOUT) {
      release();
      log?.debug({ ...about, durationMs: o.clock.now() - started }, "tool_execution_complete");
      return { kind: "result", result: first };
    }
  } catch (err) {
    release();
    // The session closed under the call: say so, not that the upstream failed.
    if (abort.signal.aborted && abort.signal.reason instanceof GatewayError) throw abort.signal.reason;
    throw upstreamCallError(o.connection.name, o.tool, err);
  } finally {
    o.clock.clearTimeout(timer);
    // A promotion that waits for the upstream task's creation can still be cancelled by the client.
    if (!promoted || !o.keepUpstreamTask) stopListening();
  }
  // The call holds its reservation until its task exists (the working task counts from then on): no
  // other call takes its place toward maxTasksPerSession or the principal's limit meanwhile.
  let task: TaskRecord;
  let late = false;
  try {
    // Stored before the client hears of it: the task survives a restart (as failed: its call does not,
    // unless the task maps onto an upstream task the upstream keeps).
    let mapped: Mapping = {};
    if (o.keepUpstreamTask) {
      const found = await upstreamMapping(o, upstreamTask, call, abort.signal).finally(stopListening);
      if (abort.signal.aborted) {
        if (abort.signal.reason instanceof GatewayError) throw abort.signal.reason;
        throw new GatewayError(ErrorCodes.CANCELLED, `the client cancelled the call to '${o.tool}' before it became a task; it was cancelled upstream`);
      }
      late = found === "late";
      if (found !== "late") mapped = found;
    }
    task = await o.tasks.create({ server: o.connection.name, toolName: o.tool, toolArgs: o.args ?? {}, ttlMs: o.ttlMs, abort, settledByCall: true, ...mapped });
  } catch (err) {
    // No task will own the call (the session is closing, or the store failed): cancel it upstream.
    abort.abort("session closed");
    call.catch(() => undefined);
    throw err;
  } finally {
    release();
  }
  taskId = task.taskId;
  if (extension !== undefined) o.tasks.mapUpstream(taskId, extension);
  // The upstream named its task after the wait: mapped now (a restart before that loses the call, as an unmapped promotion's).
  if (late) {
    void upstreamTask.then((u) => {
      const { upstreamSessionId, pollIntervalMs } = mappingOf(o, u); // the task's TTL stays (its timer runs)
      o.tasks.mapUpstream(task.taskId, { upstreamTaskId: u.task.taskId, upstreamSessionId, pollIntervalMs });
    });
  }
  // What the call already waits for (an elicitation in the pending queue) makes the new task input_required.
  origin.attachTask(task.taskId, (waiting) => o.tasks.setInputRequired(task.taskId, waiting));
  log?.info({ ...about, taskId, timeoutMs: o.timeoutMs }, "tool_execution_timeout");
  // complete()/fail() never reject (a store failure is logged there); the result is stored before anyone hears the task completed.
  void call.then(
    (result) => {
      log?.debug({ ...about, taskId: task.taskId, durationMs: o.clock.now() - started }, "tool_execution_complete");
      return o.tasks.complete(task.taskId, result);
    },
    (err) => o.tasks.fail(task.taskId, upstreamCallError(o.connection.name, o.tool, err).message),
  );
  return { kind: "task", task: await o.tasks.get(task.taskId) };
}

type Mapping = Pick<CreateTaskInput, "upstreamTaskId" | "upstreamSessionId" | "pollIntervalMs" | "ttlMs">;

/**
 * What a promoted task stores of the upstream task its call runs as: its id,
 * the upstream session it belongs to, and a TTL it cannot outlive. Waits for
 * the task's creation if the promotion came first, at most `mappingWaitMs`
 * ("late": the task is created without it, mapped when it comes) and not past
 * an abort (the client's cancel, the session's close); a call that ends or
 * fails before that maps onto nothing.
 */
async function upstreamMapping(
  o: ExecuteOptions,
  created: Promise<{ task: Task; at: number }>,
  call: Promise<CallToolResult>,
  aborted: AbortSignal,
): Promise<Mapping | "late"> {
  const settled = call.then(
    () => undefined,
    () => undefined,
  );
  let timer: ReturnType<Clock["setTimeout"]> | undefined;
  let onAbort = () => undefined as void;
  const bound = new Promise<"late">((resolve) => {
    timer = o.clock.setTimeout(() => resolve("late"), o.mappingWaitMs ?? UPSTREAM_MAPPING_WAIT_MS);
    onAbort = () => resolve("late");
    aborted.addEventListener("abort", onAbort, { once: true });
  });
  try {
    const upstream = await Promise.race([created, settled, bound]);
    if (upstream === undefined) return {};
    if (upstream === "late") return "late";
    return mappingOf(o, upstream);
  } finally {
    o.clock.clearTimeout(timer);
    aborted.removeEventListener("abort", onAbort);
  }
}

function mappingOf(o: ExecuteOptions, { task, at }: { task: Task; at: number }): Mapping {
  const left = typeof task.ttl === "number" ? Math.max(1, task.ttl - (o.clock.now() - at)) : undefined;
  const ttlMs = o.ttlMs === undefined || left === undefined ? o.ttlMs : Math.min(o.ttlMs, left);
  return {
    upstreamTaskId: task.taskId,
    ...(o.connection.upstreamSessionId !== undefined ? { upstreamSessionId: o.connection.upstreamSessionId } : {}),
    ...(task.pollInterval !== undefined ? { pollIntervalMs: task.pollInterval } : {}),
    ...(ttlMs !== undefined ? { ttlMs } : {}),
  };
}
