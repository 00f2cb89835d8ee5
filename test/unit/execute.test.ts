import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { ErrorCode, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { IdGenerator } from "../../src/clock.js";
import { ErrorCodes, GatewayError, upstreamCallError } from "../../src/errors.js";
import { EventSystem } from "../../src/session/event-system.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { executeWithPromotion, UPSTREAM_MAPPING_WAIT_MS, type ExecuteOptions, type ExecuteOutcome, type RunOptions } from "../../src/tasks/execute.js";
import { TaskManager } from "../../src/tasks/task-manager.js";
import type { TaskManagerOptions } from "../../src/tasks/task-types.js";
import type { UpstreamConnection } from "../../src/upstream/connection.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, settle, track } from "../helpers/promises.js";

type CallOpts = Parameters<UpstreamConnection["callTool"]>[2];

interface FakeCall {
  tool: string;
  args: Record<string, unknown> | undefined;
  opts: CallOpts;
  resolve(result: CallToolResult): void;
  reject(err: unknown): void;
}

/** The two members of UpstreamConnection that executeWithPromotion uses. */
class FakeConnection {
  readonly name = "slow";
  readonly calls: FakeCall[] = [];
  callTool(tool: string, args: Record<string, unknown> | undefined, opts: CallOpts): Promise<CallToolResult> {
    return new Promise<CallToolResult>((resolve, reject) => {
      this.calls.push({ tool, args, opts, resolve, reject });
      // Like the SDK: an aborted request rejects with the signal's reason.
      opts.signal?.addEventListener("abort", () => reject(opts.signal?.reason as Error), { once: true });
    });
  }
  get last(): FakeCall {
    const c = this.calls.at(-1);
    assert.ok(c, "no upstream call was made");
    return c;
  }
}

function counterIds(prefix: string): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

const TASK_OPTIONS: TaskManagerOptions = {
  defaultTtlMs: 10_000,
  maxTtlMs: 50_000,
  completedRetentionMs: 20_000,
  maxTasksPerSession: 1,
};
const TIMEOUT = 1_000;
const RESULT: CallToolResult = { content: [{ type: "text", text: "answer" }] };

function setup(taskOptions: Partial<TaskManagerOptions> = {}) {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const events = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds("ev"));
  const tasks = new TaskManager("s1", { ...TASK_OPTIONS, ...taskOptions }, store.tasks, events, clock, counterIds("task"));
  const fake = new FakeConnection();
  const run = (extra: Partial<ExecuteOptions> = {}) =>
    executeWithPromotion({
      tasks,
      connection: fake as unknown as UpstreamConnection,
      clock,
      tool: "compute",
      args: { x: 1 },
      timeoutMs: TIMEOUT,
      callTimeoutMs: TIMEOUT + TASK_OPTIONS.maxTtlMs,
      ...extra,
    });
  /** A reservation is free again (throws LIMIT_REACHED otherwise, since the limit is 1 by default). */
  const assertSlotFree = (message?: string) => {
    let release: (() => void) | undefined;
    assert.doesNotThrow(() => {
      release = tasks.reserveCall();
    }, message);
    release?.();
  };
  const assertSlotTaken = (message?: string) => {
    assert.throws(
      () => tasks.reserveCall(),
      (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.LIMIT_REACHED,
      message,
    );
  };
  return { clock, events, store, tasks, fake, run, assertSlotFree, assertSlotTaken };
}

function asTask(outcome: ExecuteOutcome | undefined) {
  assert.ok(outcome, "execute did not settle");
  assert.equal(outcome.kind, "task");
  if (outcome.kind !== "task") throw new Error("unreachable");
  return outcome.task;
}

describe("executeWithPromotion: before the timeout", () => {
  test("passes tool, args, signal and callTimeoutMs to the upstream", async () => {
    const { fake, run } = setup();
    const p = run();
    const call = fake.last;
    assert.equal(call.tool, "compute");
    assert.deepEqual(call.args, { x: 1 });
    assert.equal(call.opts.timeoutMs, TIMEOUT + TASK_OPTIONS.maxTtlMs);
    assert.ok(call.opts.signal instanceof AbortSignal);
    assert.equal(call.opts.signal.aborted, false);
    call.resolve(RESULT);
    await settle(p);
  });

  test("a result before the timeout is returned unchanged, with no task, timer or event", async () => {
    const { clock, events, tasks, fake, run, assertSlotFree, assertSlotTaken } = setup();
    const state = track(run());
    assertSlotTaken("the call holds a reservation while in flight");
    clock.advance(TIMEOUT - 1);
    await flush();
    assert.equal(state.settled, false);
    fake.last.resolve(RESULT);
    await flush();
    assert.deepEqual(state.value, { kind: "result", result: RESULT });
    assert.deepEqual(await tasks.list({ includeCompleted: true }), []);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(await events.takeNew(), []);
    assertSlotFree("released after the result");
  });

  test("an upstream error before the timeout rejects (no task) and releases the reservation", async () => {
    const { clock, tasks, fake, run, assertSlotFree } = setup();
    const p = run();
    fake.last.reject(new McpError(ErrorCode.InvalidParams, "bad x"));
    await assert.rejects(settle(p), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.UPSTREAM_ERROR);
      assert.match(err.message, /'slow'/);
      assert.match(err.message, /'compute'/);
      assert.match(err.message, /bad x/);
      assert.equal(err.details?.["upstreamCode"], ErrorCode.InvalidParams);
      return true;
    });
    assert.deepEqual(await tasks.list({ includeCompleted: true }), []);
    assert.equal(clock.pendingTimers, 0);
    assertSlotFree();
  });

  test("McpError ConnectionClosed maps to EMCP_UPSTREAM_UNAVAILABLE", async () => {
    const { clock, fake, run, assertSlotFree } = setup();
    const p = run();
    fake.last.reject(new McpError(ErrorCode.ConnectionClosed, "Connection closed"));
    await assert.rejects(settle(p), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.UPSTREAM_UNAVAILABLE);
      assert.equal(err.details?.["server"], "slow");
      return true;
    });
    assert.equal(clock.pendingTimers, 0);
    assertSlotFree();
  });

  test("downstream abort before promotion aborts the upstream call and rejects", async () => {
    const { clock, tasks, fake, run, assertSlotFree } = setup();
    const ctrl = new AbortController();
    const p = run({ signal: ctrl.signal });
    const upstreamSignal = fake.last.opts.signal;
    assert.ok(upstreamSignal);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 1);
    ctrl.abort();
    assert.equal(upstreamSignal.aborted, true);
    assert.equal(upstreamSignal.reason, "cancelled by the client");
    await assert.rejects(settle(p), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.UPSTREAM_ERROR);
      assert.match(err.message, /cancelled by the client/);
      return true;
    });
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
    assert.deepEqual(await tasks.list({ includeCompleted: true }), []);
    assertSlotFree();
  });

  test("regression: a downstream signal that is already aborted sends nothing upstream (EMCP_CANCELLED)", async () => {
    // The client may cancel while the gateway is still connecting / checking the
    // tool; that cancellation must not be lost.
    const { clock, tasks, fake, run, assertSlotFree } = setup();
    const ctrl = new AbortController();
    ctrl.abort();
    await assert.rejects(settle(run({ signal: ctrl.signal })), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.CANCELLED);
      assert.match(err.message, /'compute'/);
      return true;
    });
    assert.equal(fake.calls.length, 0, "no upstream call for an already-cancelled request");
    assert.deepEqual(await tasks.list({ includeCompleted: true }), []);
    assert.equal(clock.pendingTimers, 0);
    assertSlotFree("no reservation held");
  });

  test("progress before promotion goes to onprogress", async () => {
    const { fake, run } = setup();
    const seen: unknown[] = [];
    const p = run({ onprogress: (pr) => seen.push(pr) });
    fake.last.opts.onprogress?.({ progress: 1, total: 3 });
    assert.deepEqual(seen, [{ progress: 1, total: 3 }]);
    fake.last.resolve(RESULT);
    await settle(p);
  });
});

describe("executeWithPromotion: promotion", () => {
  test("timeout first: a working task; a later result completes it", async () => {
    const { clock, events, tasks, fake, run, assertSlotFree } = setup();
    const state = track(run({ ttlMs: 5_000 }));
    clock.advance(TIMEOUT);
    await flush();
    const task = asTask(state.value);
    assert.equal(task.status, "working");
    assert.equal(task.server, "slow");
    assert.equal(task.toolName, "compute");
    assert.deepEqual(task.toolArgs, { x: 1 });
    assert.equal(task.ttlMs, 5_000);
    assert.equal(clock.pendingTimers, 1, "the race timer is gone; only the task's TTL timer");
    assert.deepEqual(
      (await events.takeNew()).map((e) => e.type),
      ["task_created"],
    );

    fake.last.resolve(RESULT);
    await flush();
    const done = await tasks.get(task.taskId);
    assert.equal(done.status, "completed");
    assert.deepEqual(done.result, RESULT);
    assert.deepEqual(
      (await events.takeNew()).map((e) => e.type),
      ["task_completed"],
    );
    assert.equal(clock.pendingTimers, 0, "no timer once ended (retention is an absolute time in the record)");
    assertSlotFree("released once the promoted call settled");
  });

  test("timeout first: a later rejection fails the task with the mapped message", async () => {
    const { clock, events, tasks, fake, run, assertSlotFree } = setup();
    const state = track(run());
    clock.advance(TIMEOUT);
    await flush();
    const task = asTask(state.value);
    assert.equal(task.ttlMs, TASK_OPTIONS.defaultTtlMs, "default TTL when none requested");
    await events.takeNew();
    fake.last.reject(new McpError(ErrorCode.ConnectionClosed, "Connection closed"));
    await flush();
    const failed = await tasks.get(task.taskId);
    assert.equal(failed.status, "failed");
    assert.match(failed.error ?? "", /upstream 'slow' closed the connection during 'compute'/);
    assert.deepEqual(
      (await events.takeNew()).map((e) => e.type),
      ["task_failed"],
    );
    assert.equal(clock.pendingTimers, 0);
    assertSlotFree();
  });

  test("timeoutMs 0 promotes at once", async () => {
    const { clock, fake, run } = setup();
    const state = track(run({ timeoutMs: 0 }));
    clock.advance(0);
    await flush();
    asTask(state.value);
    fake.last.resolve(RESULT);
    await flush();
    assert.equal(clock.pendingTimers, 0);
  });

  test("after promotion the downstream signal no longer matters", async () => {
    const { clock, tasks, fake, run } = setup();
    const ctrl = new AbortController();
    const state = track(run({ signal: ctrl.signal }));
    clock.advance(TIMEOUT);
    await flush();
    const task = asTask(state.value);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0, "listener removed at promotion");
    ctrl.abort();
    assert.equal(fake.last.opts.signal?.aborted, false);
    assert.equal((await tasks.get(task.taskId)).status, "working");
    fake.last.resolve(RESULT);
    await flush();
    assert.equal((await tasks.get(task.taskId)).status, "completed");
  });

  test("progress after promotion is recorded on the task, not forwarded", async () => {
    const { clock, tasks, fake, run } = setup();
    const seen: unknown[] = [];
    const state = track(run({ onprogress: (p) => seen.push(p) }));
    clock.advance(TIMEOUT);
    await flush();
    const task = asTask(state.value);
    fake.last.opts.onprogress?.({ progress: 2, total: 4, message: "half" });
    await flush();
    assert.deepEqual(seen, []);
    assert.deepEqual((await tasks.get(task.taskId)).progress, { progress: 2, total: 4, message: "half" });
    await tasks.close();
  });

  test("cancel_task on a promoted task aborts the upstream call; the late rejection changes nothing", async () => {
    const { clock, tasks, fake, run, assertSlotFree } = setup();
    const state = track(run());
    clock.advance(TIMEOUT);
    await flush();
    const task = asTask(state.value);
    assert.equal((await tasks.cancel(task.taskId)).success, true);
    assert.equal(fake.last.opts.signal?.aborted, true);
    await flush();
    const r = await tasks.get(task.taskId);
    assert.equal(r.status, "cancelled");
    assert.equal(r.error, undefined);
    assertSlotFree();
  });

  test("TTL expiry of a promoted task aborts the upstream call and releases the reservation", async () => {
    const { clock, tasks, fake, run, assertSlotFree } = setup();
    const state = track(run({ ttlMs: 2_000 }));
    clock.advance(TIMEOUT);
    await flush();
    const task = asTask(state.value);
    clock.advance(2_000);
    await flush();
    assert.equal(fake.last.opts.signal?.aborted, true);
    assert.equal((await tasks.get(task.taskId)).status, "expired");
    assertSlotFree();
  });

  test("regression: a promoted call counts once toward maxTasksPerSession, not twice", async () => {
    // maxTasksPerSession is documented as "Working tasks plus not-yet-promoted
    // calls": after promotion the call must not also keep its in-flight
    // reservation (it used to, so one promoted call used two slots).
    const { clock, fake, run, tasks } = setup({ maxTasksPerSession: 2 });
    const state = track(run());
    clock.advance(TIMEOUT);
    await flush();
    asTask(state.value);
    assert.equal((await tasks.list({ status: "working" })).length, 1);
    let second: (() => void) | undefined;
    assert.doesNotThrow(() => {
      second = tasks.reserveCall();
    }, "one working task out of 2 allowed: a second call must be accepted");
    second?.();
    fake.last.resolve(RESULT);
    await flush();
  });

  test("a session closed while waiting: promotion fails with EMCP_CLOSED and leaves no timers", async () => {
    const { clock, tasks, run } = setup();
    const state = track(run());
    await tasks.close();
    clock.advance(TIMEOUT);
    await flush();
    assert.ok(state.error instanceof GatewayError);
    assert.equal(state.error.code, ErrorCodes.CLOSED);
    assert.equal(clock.pendingTimers, 0);
  });
});

/** A driver that runs the call as an upstream task (like runUpstreamTaskToEnd) and names it when the test says so. */
function upstreamTaskDriver() {
  const d: { opts?: RunOptions; resolve?: (r: CallToolResult) => void } = {};
  const run = (opts: RunOptions) => {
    d.opts = opts;
    return new Promise<CallToolResult>((resolve, reject) => {
      d.resolve = resolve;
      opts.signal.addEventListener("abort", () => reject(opts.signal.reason as Error), { once: true });
    });
  };
  const created = (taskId: string) => {
    assert.ok(d.opts, "the call was not started");
    d.opts.onTask({ taskId, status: "working", ttl: 60_000, pollInterval: 200, createdAt: new Date().toISOString(), lastUpdatedAt: new Date().toISOString() });
  };
  return { d, run, created };
}

describe("executeWithPromotion: mapped onto the upstream task (keepUpstreamTask, design MF-20)", () => {
  test("an upstream task named before the promotion is mapped at creation", async () => {
    const { clock, tasks, run } = setup();
    const driver = upstreamTaskDriver();
    const state = track(run({ keepUpstreamTask: true, run: driver.run }));
    driver.created("up-1");
    clock.advance(TIMEOUT);
    await flush();
    const task = asTask(state.value);
    assert.equal(task.upstreamTaskId, "up-1");
    assert.equal(task.pollIntervalMs, 200);
    assert.equal(tasks.runningByUpstreamId("slow", "up-1"), task.taskId);
  });

  test("regression: an upstream slow to name its task holds the promotion at most mappingWaitMs; the late name is mapped then", async () => {
    const { clock, tasks, run } = setup();
    const driver = upstreamTaskDriver();
    const state = track(run({ keepUpstreamTask: true, run: driver.run }));
    clock.advance(TIMEOUT);
    await flush();
    assert.equal(state.settled, false, "waits a little for the upstream's CreateTaskResult");
    clock.advance(UPSTREAM_MAPPING_WAIT_MS);
    await flush();
    const task = asTask(state.value);
    assert.equal(task.upstreamTaskId, undefined);
    assert.equal(clock.pendingTimers, 1, "only the task's TTL timer");

    driver.created("up-late");
    await flush();
    const mapped = await tasks.get(task.taskId);
    assert.equal(mapped.status, "working");
    assert.equal(mapped.upstreamTaskId, "up-late");
    assert.equal(mapped.pollIntervalMs, 200);
    assert.equal(mapped.ttlMs, task.ttlMs, "the TTL stays");
    assert.equal(tasks.runningByUpstreamId("slow", "up-late"), task.taskId);

    driver.d.resolve?.(RESULT);
    await flush();
    assert.equal((await tasks.get(task.taskId)).status, "completed");
    assert.equal(tasks.runningByUpstreamId("slow", "up-late"), undefined);
  });

  test("regression: the client's cancel while the promotion waits for the upstream task cancels the call (EMCP_CANCELLED, no task)", async () => {
    const { clock, tasks, run, assertSlotFree } = setup();
    const driver = upstreamTaskDriver();
    const ctrl = new AbortController();
    const state = track(run({ keepUpstreamTask: true, run: driver.run, signal: ctrl.signal }));
    clock.advance(TIMEOUT);
    await flush();
    assert.equal(state.settled, false);
    ctrl.abort();
    await flush();
    assert.ok(state.error instanceof GatewayError, `rejected: ${String(state.error)}`);
    assert.equal(state.error.code, ErrorCodes.CANCELLED);
    assert.equal(driver.d.opts?.signal.aborted, true, "the upstream call was aborted");
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0, "listener removed");
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(await tasks.list({ includeCompleted: true }), []);
    assertSlotFree();
  });
});

describe("upstreamCallError", () => {
  test("passes GatewayErrors through", () => {
    const e = new GatewayError(ErrorCodes.UNKNOWN_TOOL, "x");
    assert.equal(upstreamCallError("s", "t", e), e);
  });

  test("RequestTimeout becomes EMCP_UPSTREAM_ERROR saying it did not answer in time", () => {
    const e = upstreamCallError("s", "t", new McpError(ErrorCode.RequestTimeout, "Request timed out"));
    assert.equal(e.code, ErrorCodes.UPSTREAM_ERROR);
    assert.match(e.message, /did not answer 't' in time/);
  });

  test("plain errors become EMCP_UPSTREAM_ERROR with their message", () => {
    const e = upstreamCallError("s", "t", new Error("socket hang up"));
    assert.equal(e.code, ErrorCodes.UPSTREAM_ERROR);
    assert.match(e.message, /calling 't' on 's' failed: socket hang up/);
  });
});
