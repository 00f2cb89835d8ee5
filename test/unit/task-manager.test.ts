import { test, describe } from "node:test";
import assert from "node:assert/strict";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { IdGenerator } from "../../src/clock.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { EventSystem } from "../../src/session/event-system.js";
import { MemoryTaskRecordStore } from "../../src/store/task-store.js";
import { TaskManager, isTerminal, type TaskManagerOptions } from "../../src/tasks/task-manager.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, settle } from "../helpers/promises.js";

function counterIds(prefix: string): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

const OPTIONS: TaskManagerOptions = {
  defaultTtlMs: 1_000,
  maxTtlMs: 5_000,
  completedRetentionMs: 2_000,
  maxTasksPerSession: 3,
};

function setup(overrides: Partial<TaskManagerOptions> = {}) {
  const clock = new ManualClock();
  const store = new MemoryTaskRecordStore();
  const events = new EventSystem({ maxEvents: 1000, warningThreshold: 0.8 }, clock, counterIds("ev"));
  const taskIds = counterIds("task");
  const tm = new TaskManager("s1", { ...OPTIONS, ...overrides }, store, events, clock, taskIds);
  const other = () => {
    const otherEvents = new EventSystem({ maxEvents: 1000, warningThreshold: 0.8 }, clock, counterIds("ev2"));
    return { tm: new TaskManager("s2", { ...OPTIONS, ...overrides }, store, otherEvents, clock, taskIds), events: otherEvents };
  };
  return { clock, store, events, tm, other };
}

function newTask(tm: TaskManager, server = "srv", ttlMs?: number) {
  const abort = new AbortController();
  const task = tm.create({ server, toolName: "slow_tool", toolArgs: { n: 1 }, ttlMs, abort });
  return { task, abort };
}

const RESULT: CallToolResult = { content: [{ type: "text", text: "done" }] };

function eventTypes(events: EventSystem): string[] {
  return events.takeNew().map((e) => e.type);
}

function unknownTask(err: unknown): boolean {
  assert.ok(err instanceof GatewayError, `expected GatewayError, got ${String(err)}`);
  assert.equal(err.code, ErrorCodes.UNKNOWN_TASK);
  return true;
}

describe("TaskManager: lifecycle", () => {
  test("create: a working record with its TTL timer and a task_created event", () => {
    const { clock, events, tm, store } = setup();
    const { task } = newTask(tm);
    assert.equal(task.status, "working");
    assert.equal(task.sessionId, "s1");
    assert.equal(task.server, "srv");
    assert.equal(task.toolName, "slow_tool");
    assert.deepEqual(task.toolArgs, { n: 1 });
    assert.equal(task.createdAt, clock.now());
    assert.equal(task.lastUpdatedAt, clock.now());
    assert.equal(task.ttlMs, OPTIONS.defaultTtlMs);
    assert.equal(task.expiresAt, clock.now() + OPTIONS.defaultTtlMs);
    assert.equal(clock.pendingTimers, 1);
    assert.equal(tm.timerCount, 1);
    assert.equal(store.size, 1);
    const evs = events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_created"],
    );
    assert.deepEqual(evs[0]?.data, { taskId: task.taskId, toolName: "slow_tool", ttlMs: OPTIONS.defaultTtlMs });
    assert.equal(evs[0]?.server, "srv");
    // The returned record is a copy.
    task.status = "failed";
    assert.equal(tm.get(task.taskId).status, "working");
  });

  test("complete: completed with result, TTL timer replaced by a retention timer", () => {
    const { clock, events, tm } = setup();
    const { task, abort } = newTask(tm);
    events.takeNew();
    clock.advance(100);
    assert.equal(tm.complete(task.taskId, RESULT), true);
    const r = tm.get(task.taskId);
    assert.equal(r.status, "completed");
    assert.deepEqual(r.result, RESULT);
    assert.equal(r.lastUpdatedAt, clock.now());
    assert.equal(abort.signal.aborted, false, "completing does not abort");
    assert.equal(clock.pendingTimers, 1, "only the retention timer");
    const evs = events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_completed"],
    );
    assert.deepEqual(evs[0]?.data, { taskId: task.taskId, toolName: "slow_tool", isError: false });
    // TTL timer is really gone: passing the old expiry does nothing.
    clock.advance(OPTIONS.defaultTtlMs);
    assert.equal(tm.get(task.taskId).status, "completed");
    assert.deepEqual(events.takeNew(), []);
  });

  test("complete with an isError result reports isError: true", () => {
    const { events, tm } = setup();
    const { task } = newTask(tm);
    events.takeNew();
    tm.complete(task.taskId, { content: [{ type: "text", text: "boom" }], isError: true });
    assert.equal(tm.get(task.taskId).status, "completed");
    assert.equal(events.takeNew()[0]?.data["isError"], true);
  });

  test("fail: failed with error and statusMessage, task_failed event", () => {
    const { clock, events, tm } = setup();
    const { task } = newTask(tm);
    events.takeNew();
    assert.equal(tm.fail(task.taskId, "upstream exploded"), true);
    const r = tm.get(task.taskId);
    assert.equal(r.status, "failed");
    assert.equal(r.error, "upstream exploded");
    assert.equal(r.statusMessage, "upstream exploded");
    assert.equal(r.result, undefined);
    const evs = events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_failed"],
    );
    assert.equal(evs[0]?.data["error"], "upstream exploded");
    assert.equal(clock.pendingTimers, 1);
  });

  test("cancel: aborts the upstream call, cancelled status, task_cancelled event", () => {
    const { clock, events, tm } = setup();
    const { task, abort } = newTask(tm);
    events.takeNew();
    const res = tm.cancel(task.taskId, "user changed their mind");
    assert.equal(res.success, true);
    assert.match(res.message, /cancelled/);
    assert.equal(abort.signal.aborted, true);
    assert.equal(abort.signal.reason, "user changed their mind");
    const r = tm.get(task.taskId);
    assert.equal(r.status, "cancelled");
    assert.equal(r.statusMessage, "user changed their mind");
    const evs = events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_cancelled"],
    );
    assert.equal(evs[0]?.data["reason"], "user changed their mind");
    assert.equal(clock.pendingTimers, 1);
  });

  test("cancel uses a default reason", () => {
    const { tm } = setup();
    const { task, abort } = newTask(tm);
    tm.cancel(task.taskId);
    assert.equal(abort.signal.reason, "cancelled by the client");
    assert.equal(tm.get(task.taskId).statusMessage, "cancelled by the client");
  });

  test("transitions from terminal states are refused and change nothing", () => {
    const { clock, events, tm } = setup();
    const done = newTask(tm).task;
    const failed = newTask(tm).task;
    const cancelled = newTask(tm).task;
    tm.complete(done.taskId, RESULT);
    tm.fail(failed.taskId, "err");
    tm.cancel(cancelled.taskId);
    events.takeNew();
    const before = [done, failed, cancelled].map((t) => tm.get(t.taskId));
    const timers = clock.pendingTimers;

    for (const t of [done, failed, cancelled]) {
      assert.equal(tm.complete(t.taskId, { content: [{ type: "text", text: "late" }] }), false);
      assert.equal(tm.fail(t.taskId, "late failure"), false);
      const c = tm.cancel(t.taskId);
      assert.equal(c.success, false);
      assert.match(c.message, /already (completed|failed|cancelled)/);
    }
    assert.deepEqual(
      [done, failed, cancelled].map((t) => tm.get(t.taskId)),
      before,
    );
    assert.deepEqual(events.takeNew(), [], "no events for refused transitions");
    assert.equal(clock.pendingTimers, timers, "no extra retention timers");
  });

  test("transitions on unknown ids: complete/fail return false, cancel/get throw EMCP_UNKNOWN_TASK", () => {
    const { tm } = setup();
    assert.equal(tm.complete("nope", RESULT), false);
    assert.equal(tm.fail("nope", "x"), false);
    assert.throws(() => tm.cancel("nope"), unknownTask);
    assert.throws(
      () => tm.get("nope"),
      (err: unknown) => {
        unknownTask(err);
        assert.match((err as Error).message, /nope/);
        assert.match((err as Error).message, /list_tasks/);
        return true;
      },
    );
  });

  test("TTL expiry: expired status, upstream call aborted, task_expired event", () => {
    const { clock, events, tm } = setup();
    const { task, abort } = newTask(tm);
    events.takeNew();
    clock.advance(OPTIONS.defaultTtlMs - 1);
    assert.equal(tm.get(task.taskId).status, "working");
    assert.equal(abort.signal.aborted, false);
    clock.advance(1);
    const r = tm.get(task.taskId);
    assert.equal(r.status, "expired");
    assert.match(r.error ?? "", /TTL of 1000ms ran out/);
    assert.equal(r.statusMessage, r.error);
    assert.equal(abort.signal.aborted, true);
    const evs = events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_expired"],
    );
    assert.equal(evs[0]?.data["ttlMs"], OPTIONS.defaultTtlMs);
    assert.equal(clock.pendingTimers, 1, "retention timer only");
    // A late upstream answer cannot resurrect it.
    assert.equal(tm.complete(task.taskId, RESULT), false);
    assert.equal(tm.get(task.taskId).status, "expired");
  });

  test("retention: terminal records are deleted after completedRetentionMs, then get throws", () => {
    const { clock, tm, store } = setup();
    const { task } = newTask(tm);
    tm.complete(task.taskId, RESULT);
    clock.advance(OPTIONS.completedRetentionMs - 1);
    assert.equal(tm.get(task.taskId).status, "completed");
    clock.advance(1);
    assert.throws(() => tm.get(task.taskId), unknownTask);
    assert.equal(store.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(tm.timerCount, 0);
    assert.deepEqual(tm.list({ includeCompleted: true }), []);
  });

  test("retention after expiry: the whole life uses two timers and leaves none", () => {
    const { clock, tm, store } = setup();
    const { task } = newTask(tm);
    clock.advance(OPTIONS.defaultTtlMs);
    assert.equal(tm.get(task.taskId).status, "expired");
    clock.advance(OPTIONS.completedRetentionMs);
    assert.throws(() => tm.get(task.taskId), unknownTask);
    assert.equal(store.size, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test("ttlMs: a requested ttl is honoured and capped at maxTtlMs", () => {
    const { clock, tm } = setup();
    const short = newTask(tm, "srv", 300).task;
    assert.equal(short.ttlMs, 300);
    assert.equal(short.expiresAt, clock.now() + 300);
    const capped = newTask(tm, "srv", 60_000).task;
    assert.equal(capped.ttlMs, OPTIONS.maxTtlMs);
    assert.equal(capped.expiresAt, clock.now() + OPTIONS.maxTtlMs);
    clock.advance(300);
    assert.equal(tm.get(short.taskId).status, "expired");
    clock.advance(OPTIONS.maxTtlMs - 300 - 1);
    assert.equal(tm.get(capped.taskId).status, "working");
    clock.advance(1);
    assert.equal(tm.get(capped.taskId).status, "expired");
  });

  test("a default TTL above maxTtlMs is capped too", () => {
    const { tm } = setup({ defaultTtlMs: 10_000, maxTtlMs: 2_000 });
    assert.equal(newTask(tm).task.ttlMs, 2_000);
  });

  test("setProgress updates working tasks only", () => {
    const { clock, tm } = setup();
    const { task } = newTask(tm);
    clock.advance(10);
    tm.setProgress(task.taskId, { progress: 3, total: 10, message: "step 3" });
    let r = tm.get(task.taskId);
    assert.deepEqual(r.progress, { progress: 3, total: 10, message: "step 3" });
    assert.equal(r.statusMessage, "step 3");
    assert.equal(r.lastUpdatedAt, clock.now());
    tm.setProgress(task.taskId, { progress: 4 });
    assert.deepEqual(tm.get(task.taskId).progress, { progress: 4 });
    tm.complete(task.taskId, RESULT);
    tm.setProgress(task.taskId, { progress: 9 });
    r = tm.get(task.taskId);
    assert.deepEqual(r.progress, { progress: 4 });
    assert.equal(r.status, "completed");
    tm.setProgress("unknown", { progress: 1 }); // no throw
  });

  test("list: working by default; filters by server, status, includeCompleted", () => {
    const { tm } = setup({ maxTasksPerSession: 10 });
    const a1 = newTask(tm, "a").task;
    const a2 = newTask(tm, "a").task;
    const b1 = newTask(tm, "b").task;
    tm.complete(a2.taskId, RESULT);
    const ids = (rs: { taskId: string }[]) => rs.map((r) => r.taskId);
    assert.deepEqual(ids(tm.list()), [a1.taskId, b1.taskId]);
    assert.deepEqual(ids(tm.list({ includeCompleted: true })), [a1.taskId, a2.taskId, b1.taskId]);
    assert.deepEqual(ids(tm.list({ server: "a" })), [a1.taskId]);
    assert.deepEqual(ids(tm.list({ server: "a", includeCompleted: true })), [a1.taskId, a2.taskId]);
    assert.deepEqual(ids(tm.list({ status: "completed" })), [a2.taskId]);
    assert.deepEqual(ids(tm.list({ status: "working", server: "b" })), [b1.taskId]);
  });

  test("isTerminal", () => {
    assert.equal(isTerminal("working"), false);
    for (const s of ["completed", "failed", "cancelled", "expired"] as const) assert.equal(isTerminal(s), true);
  });
});

describe("TaskManager: reserveCall", () => {
  test("limits in-flight calls to maxTasksPerSession; release frees a slot", () => {
    const { tm } = setup({ maxTasksPerSession: 2 });
    const r1 = tm.reserveCall();
    tm.reserveCall();
    assert.throws(
      () => tm.reserveCall(),
      (err: unknown) => {
        assert.ok(err instanceof GatewayError);
        assert.equal(err.code, ErrorCodes.LIMIT_REACHED);
        assert.match(err.message, /max 2/);
        return true;
      },
    );
    r1();
    const r3 = tm.reserveCall();
    assert.equal(typeof r3, "function");
    assert.throws(() => tm.reserveCall(), /EMCP|max 2/);
  });

  test("release is idempotent: releasing twice frees only one slot", () => {
    const { tm } = setup({ maxTasksPerSession: 1 });
    const r = tm.reserveCall();
    r();
    r();
    tm.reserveCall();
    assert.throws(
      () => tm.reserveCall(),
      (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.LIMIT_REACHED,
    );
  });

  test("working tasks count toward the limit; terminal tasks do not", () => {
    const { tm } = setup({ maxTasksPerSession: 2 });
    const t1 = newTask(tm).task;
    newTask(tm);
    assert.throws(
      () => tm.reserveCall(),
      (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.LIMIT_REACHED,
    );
    tm.complete(t1.taskId, RESULT);
    const r = tm.reserveCall();
    r();
  });
});

describe("TaskManager: waitForTerminal", () => {
  test("resolves with the terminal record when the task completes; its timer is cleared", async () => {
    const { clock, tm } = setup();
    const { task } = newTask(tm);
    const p = tm.waitForTerminal(task.taskId, 500);
    assert.equal(clock.pendingTimers, 2, "TTL + wait timer");
    tm.complete(task.taskId, RESULT);
    const r = await settle(p);
    assert.equal(r.status, "completed");
    assert.deepEqual(r.result, RESULT);
    assert.equal(clock.pendingTimers, 1, "retention timer only");
  });

  test("resolves with the working record after its timeout", async () => {
    const { clock, tm } = setup();
    const { task } = newTask(tm);
    let settled = false;
    const p = tm.waitForTerminal(task.taskId, 500).then((r) => {
      settled = true;
      return r;
    });
    clock.advance(499);
    await flush();
    assert.equal(settled, false);
    clock.advance(1);
    const r = await settle(p);
    assert.equal(r.status, "working");
    assert.equal(r.taskId, task.taskId);
    assert.equal(clock.pendingTimers, 1, "the TTL timer only");
    // Completing later does not break anything.
    assert.equal(tm.complete(task.taskId, RESULT), true);
  });

  test("resolves with the current record on abort", async () => {
    const { clock, tm } = setup();
    const { task } = newTask(tm);
    const ctrl = new AbortController();
    const p = tm.waitForTerminal(task.taskId, 500, ctrl.signal);
    ctrl.abort();
    assert.equal((await settle(p)).status, "working");
    assert.equal(clock.pendingTimers, 1);
  });

  test("resolves at once for terminal tasks, without a timer", async () => {
    const { clock, tm } = setup();
    const { task } = newTask(tm);
    tm.fail(task.taskId, "x");
    const timers = clock.pendingTimers;
    const r = await settle(tm.waitForTerminal(task.taskId, 500));
    assert.equal(r.status, "failed");
    assert.equal(clock.pendingTimers, timers);
  });

  test("several waiters all resolve on expiry", async () => {
    const { clock, tm } = setup();
    const { task } = newTask(tm);
    const ps = [tm.waitForTerminal(task.taskId, 60_000), tm.waitForTerminal(task.taskId, 60_000)];
    clock.advance(OPTIONS.defaultTtlMs);
    const rs = await settle(Promise.all(ps));
    assert.deepEqual(
      rs.map((r) => r.status),
      ["expired", "expired"],
    );
    assert.equal(clock.pendingTimers, 1);
  });

  test("throws EMCP_UNKNOWN_TASK for an unknown id", () => {
    const { tm } = setup();
    assert.throws(() => tm.waitForTerminal("nope", 10), unknownTask);
  });
});

describe("TaskManager: session isolation", () => {
  test("another session sharing the store cannot get, cancel, list, wait on or settle the task", () => {
    const { tm, other, store } = setup();
    const { task, abort } = newTask(tm);
    const { tm: tm2, events: events2 } = other();
    assert.throws(() => tm2.get(task.taskId), unknownTask);
    assert.throws(() => tm2.cancel(task.taskId), unknownTask);
    assert.throws(() => tm2.waitForTerminal(task.taskId, 10), unknownTask);
    assert.deepEqual(tm2.list({ includeCompleted: true }), []);
    assert.equal(tm2.complete(task.taskId, RESULT), false);
    assert.equal(tm2.fail(task.taskId, "x"), false);
    tm2.setProgress(task.taskId, { progress: 1 });
    assert.deepEqual(tm2.failWorkingForServer("srv", "gone"), []);
    assert.equal(abort.signal.aborted, false);
    assert.equal(tm.get(task.taskId).status, "working");
    assert.deepEqual(events2.takeNew(), []);
    // Closing the other session leaves this session's records alone.
    tm2.close();
    assert.equal(store.size, 1);
    assert.equal(tm.get(task.taskId).status, "working");
  });

  test("each session sees only its own tasks", () => {
    const { tm, other } = setup();
    const { tm: tm2 } = other();
    const t1 = newTask(tm).task;
    const t2 = newTask(tm2).task;
    assert.deepEqual(
      tm.list().map((r) => r.taskId),
      [t1.taskId],
    );
    assert.deepEqual(
      tm2.list().map((r) => r.taskId),
      [t2.taskId],
    );
    assert.equal(tm2.get(t2.taskId).sessionId, "s2");
    assert.throws(() => tm.get(t2.taskId), unknownTask);
    tm.close();
    tm2.close();
  });
});

describe("TaskManager: failWorkingForServer and close", () => {
  test("failWorkingForServer fails and aborts only that server's working tasks", () => {
    const { events, tm } = setup({ maxTasksPerSession: 10 });
    const a1 = newTask(tm, "a");
    const a2 = newTask(tm, "a");
    const aDone = newTask(tm, "a");
    const b1 = newTask(tm, "b");
    tm.complete(aDone.task.taskId, RESULT);
    events.takeNew();
    const failed = tm.failWorkingForServer("a", "server a disconnected");
    assert.deepEqual(failed.sort(), [a1.task.taskId, a2.task.taskId].sort());
    for (const t of [a1, a2]) {
      const r = tm.get(t.task.taskId);
      assert.equal(r.status, "failed");
      assert.equal(r.error, "server a disconnected");
      assert.equal(t.abort.signal.aborted, true);
    }
    assert.equal(tm.get(aDone.task.taskId).status, "completed");
    assert.equal(tm.get(b1.task.taskId).status, "working");
    assert.equal(b1.abort.signal.aborted, false);
    assert.deepEqual(eventTypes(events), ["task_failed", "task_failed"]);
  });

  test("close() clears every timer, aborts working calls, wakes waiters and deletes records", async () => {
    const { clock, tm, store } = setup({ maxTasksPerSession: 10 });
    const working = newTask(tm);
    const done = newTask(tm);
    tm.complete(done.task.taskId, RESULT);
    const wait = tm.waitForTerminal(working.task.taskId, 60_000);
    assert.equal(clock.pendingTimers, 3, "TTL + retention + wait");

    tm.close();
    assert.equal(clock.pendingTimers, 0);
    assert.equal(tm.timerCount, 0);
    assert.equal(working.abort.signal.aborted, true);
    assert.equal(working.abort.signal.reason, "session closed");
    assert.equal(done.abort.signal.aborted, false, "finished calls are not aborted");
    const woke = await settle(wait);
    assert.equal(woke.status, "cancelled");
    assert.equal(woke.statusMessage, "session closed");
    assert.equal(store.size, 0);
    assert.throws(() => tm.get(working.task.taskId), unknownTask);
    assert.throws(
      () => newTask(tm),
      (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.CLOSED,
    );
    // Nothing fires later.
    clock.advance(OPTIONS.maxTtlMs + OPTIONS.completedRetentionMs);
    assert.equal(tm.complete(working.task.taskId, RESULT), false);
  });
});
