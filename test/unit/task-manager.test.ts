import { test, describe } from "node:test";
import assert from "node:assert/strict";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { IdGenerator } from "../../src/clock.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import type { Logger } from "../../src/logging.js";
import { EventSystem } from "../../src/session/event-system.js";
import type { TaskStore } from "../../src/store/contracts.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { TaskManager, isTerminal } from "../../src/tasks/task-manager.js";
import type { TaskManagerOptions } from "../../src/tasks/task-types.js";
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

const EVENTS = { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 };

/** A session's TaskManager over a memory store (the store's contract suite proves SQLite the same). */
function setup(overrides: Partial<TaskManagerOptions> = {}, tasks?: (inner: TaskStore) => TaskStore) {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const taskStore = tasks ? tasks(store.tasks) : store.tasks;
  const events = new EventSystem("s1", EVENTS, store.events, clock, counterIds("ev"));
  const taskIds = counterIds("task");
  const tm = new TaskManager("s1", { ...OPTIONS, ...overrides }, taskStore, events, clock, taskIds);
  const other = () => {
    const otherEvents = new EventSystem("s2", EVENTS, store.events, clock, counterIds("ev2"));
    return { tm: new TaskManager("s2", { ...OPTIONS, ...overrides }, taskStore, otherEvents, clock, taskIds), events: otherEvents };
  };
  /** Rows stored for the session (whatever their status or retention). */
  const rows = async (sessionId = "s1") => (await store.tasks.listBySession(sessionId)).length;
  /** Advances the clock and lets what its timers started finish. */
  const advance = async (ms: number) => {
    clock.advance(ms);
    await flush();
  };
  return { clock, store, events, tm, other, rows, advance };
}

async function newTask(tm: TaskManager, server = "srv", ttlMs?: number) {
  const abort = new AbortController();
  const task = await tm.create({ server, toolName: "slow_tool", toolArgs: { n: 1 }, ttlMs, abort });
  return { task, abort };
}

const RESULT: CallToolResult = { content: [{ type: "text", text: "done" }] };

async function eventTypes(events: EventSystem): Promise<string[]> {
  return (await events.takeNew()).map((e) => e.type);
}

function unknownTask(err: unknown): boolean {
  assert.ok(err instanceof GatewayError, `expected GatewayError, got ${String(err)}`);
  assert.equal(err.code, ErrorCodes.UNKNOWN_TASK);
  return true;
}

async function status(tm: TaskManager, taskId: string): Promise<string> {
  return (await tm.get(taskId)).status;
}

describe("TaskManager: lifecycle", () => {
  test("create: a stored working record with its TTL timer and a task_created event", async () => {
    const { clock, events, tm, store } = setup();
    const { task } = await newTask(tm);
    assert.equal(task.status, "working");
    assert.equal(task.sessionId, "s1");
    assert.equal(task.server, "srv");
    assert.equal(task.toolName, "slow_tool");
    assert.deepEqual(task.toolArgs, { n: 1 });
    assert.equal(task.createdAt, clock.now());
    assert.equal(task.lastUpdatedAt, clock.now());
    assert.equal(task.ttlMs, OPTIONS.defaultTtlMs);
    assert.equal(task.expiresAt, clock.now() + OPTIONS.defaultTtlMs);
    assert.equal(task.retainUntil, task.expiresAt + OPTIONS.completedRetentionMs, "a backstop: deleted even if no process settles it");
    assert.equal(clock.pendingTimers, 1);
    assert.equal(tm.timerCount, 1);
    assert.deepEqual(await store.tasks.get(task.taskId), task, "stored before create() resolves");
    const evs = await events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_created"],
    );
    assert.deepEqual(evs[0]?.data, { taskId: task.taskId, toolName: "slow_tool", ttlMs: OPTIONS.defaultTtlMs });
    assert.equal(evs[0]?.server, "srv");
    // The returned record is a copy.
    task.status = "failed";
    assert.equal(await status(tm, task.taskId), "working");
  });

  test("complete: stored as completed with its result before anyone hears of it; no timer left", async () => {
    const { clock, events, tm, store } = setup();
    const { task, abort } = await newTask(tm);
    await events.takeNew();
    clock.advance(100);
    const heard: string[] = [];
    tm.onStatusChange = (r) => heard.push(`${r.status}:${JSON.stringify(r.result)}`);
    assert.equal(await tm.complete(task.taskId, RESULT), true);
    const r = await tm.get(task.taskId);
    assert.equal(r.status, "completed");
    assert.deepEqual(r.result, RESULT);
    assert.equal(r.lastUpdatedAt, clock.now());
    assert.equal(r.retainUntil, clock.now() + OPTIONS.completedRetentionMs);
    assert.deepEqual(heard, [`completed:${JSON.stringify(RESULT)}`]);
    assert.equal((await store.tasks.get(task.taskId))?.status, "completed");
    assert.equal(abort.signal.aborted, false, "completing does not abort");
    assert.equal(clock.pendingTimers, 0, "the TTL timer is gone; retention is an absolute time in the record");
    const evs = await events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_completed"],
    );
    assert.deepEqual(evs[0]?.data, { taskId: task.taskId, toolName: "slow_tool", isError: false });
    // Passing the old expiry does nothing.
    clock.advance(OPTIONS.defaultTtlMs);
    await flush();
    assert.equal(await status(tm, task.taskId), "completed");
    assert.deepEqual(await events.takeNew(), []);
  });

  test("complete with an isError result reports isError: true", async () => {
    const { events, tm } = setup();
    const { task } = await newTask(tm);
    await events.takeNew();
    await tm.complete(task.taskId, { content: [{ type: "text", text: "boom" }], isError: true });
    assert.equal(await status(tm, task.taskId), "completed");
    assert.equal((await events.takeNew())[0]?.data["isError"], true);
  });

  test("fail: failed with error and statusMessage, task_failed event, the call aborted", async () => {
    const { clock, events, tm } = setup();
    const { task, abort } = await newTask(tm);
    await events.takeNew();
    assert.equal(await tm.fail(task.taskId, "upstream exploded"), true);
    const r = await tm.get(task.taskId);
    assert.equal(r.status, "failed");
    assert.equal(r.error, "upstream exploded");
    assert.equal(r.statusMessage, "upstream exploded");
    assert.equal(r.result, undefined);
    assert.equal(abort.signal.aborted, true);
    const evs = await events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_failed"],
    );
    assert.equal(evs[0]?.data["error"], "upstream exploded");
    assert.equal(clock.pendingTimers, 0);
  });

  test("cancel: stores cancelled, then aborts the upstream call; task_cancelled event", async () => {
    const { clock, events, tm } = setup();
    const { task, abort } = await newTask(tm);
    await events.takeNew();
    let statusWhenAborted: string | undefined;
    abort.signal.addEventListener("abort", () => void tm.get(task.taskId).then((r) => (statusWhenAborted = r.status)));
    const res = await tm.cancel(task.taskId, "user changed their mind");
    assert.equal(res.success, true);
    assert.match(res.message, /cancelled/);
    assert.equal(abort.signal.aborted, true);
    assert.equal(abort.signal.reason, "user changed their mind");
    await flush();
    assert.equal(statusWhenAborted, "cancelled", "the cancel is stored before the call is aborted: its end cannot overwrite it");
    const r = await tm.get(task.taskId);
    assert.equal(r.status, "cancelled");
    assert.equal(r.statusMessage, "user changed their mind");
    const evs = await events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_cancelled"],
    );
    assert.equal(evs[0]?.data["reason"], "user changed their mind");
    assert.equal(clock.pendingTimers, 0);
  });

  test("cancel uses a default reason", async () => {
    const { tm } = setup();
    const { task, abort } = await newTask(tm);
    await tm.cancel(task.taskId);
    assert.equal(abort.signal.reason, "cancelled by the client");
    assert.equal((await tm.get(task.taskId)).statusMessage, "cancelled by the client");
  });

  test("racing ends: exactly one wins (compare-and-set); the others change nothing and emit nothing", async () => {
    const { events, tm } = setup();
    const { task } = await newTask(tm);
    await events.takeNew();
    const outcomes = await Promise.all([tm.complete(task.taskId, RESULT), tm.cancel(task.taskId), tm.fail(task.taskId, "late")]);
    const r = await tm.get(task.taskId);
    assert.equal(outcomes[0], true, "the first asked wins");
    assert.equal(outcomes[1].success, false);
    assert.equal(outcomes[2], false);
    assert.equal(r.status, "completed");
    assert.deepEqual(await eventTypes(events), ["task_completed"]);
  });

  test("transitions from terminal states are refused and change nothing", async () => {
    const { clock, events, tm } = setup();
    const done = (await newTask(tm)).task;
    const failed = (await newTask(tm)).task;
    const cancelled = (await newTask(tm)).task;
    await tm.complete(done.taskId, RESULT);
    await tm.fail(failed.taskId, "err");
    await tm.cancel(cancelled.taskId);
    await events.takeNew();
    const before = await Promise.all([done, failed, cancelled].map((t) => tm.get(t.taskId)));

    for (const t of [done, failed, cancelled]) {
      assert.equal(await tm.complete(t.taskId, { content: [{ type: "text", text: "late" }] }), false);
      assert.equal(await tm.fail(t.taskId, "late failure"), false);
      const c = await tm.cancel(t.taskId);
      assert.equal(c.success, false);
      assert.match(c.message, /already (completed|failed|cancelled)/);
    }
    assert.deepEqual(await Promise.all([done, failed, cancelled].map((t) => tm.get(t.taskId))), before);
    assert.deepEqual(await events.takeNew(), [], "no events for refused transitions");
    assert.equal(clock.pendingTimers, 0);
  });

  test("transitions on unknown ids: complete/fail resolve false, cancel/get reject with EMCP_UNKNOWN_TASK", async () => {
    const { tm } = setup();
    assert.equal(await tm.complete("nope", RESULT), false);
    assert.equal(await tm.fail("nope", "x"), false);
    await assert.rejects(tm.cancel("nope"), unknownTask);
    await assert.rejects(tm.get("nope"), (err: unknown) => {
      unknownTask(err);
      assert.match((err as Error).message, /nope/);
      assert.match((err as Error).message, /list_tasks/);
      return true;
    });
  });

  test("TTL expiry: expired status, upstream call aborted, task_expired event", async () => {
    const { clock, events, tm, advance } = setup();
    const { task, abort } = await newTask(tm);
    await events.takeNew();
    await advance(OPTIONS.defaultTtlMs - 1);
    assert.equal(await status(tm, task.taskId), "working");
    assert.equal(abort.signal.aborted, false);
    await advance(1);
    const r = await tm.get(task.taskId);
    assert.equal(r.status, "expired");
    assert.match(r.error ?? "", /TTL of 1000ms ran out/);
    assert.equal(r.statusMessage, r.error);
    assert.equal(abort.signal.aborted, true);
    const evs = await events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["task_expired"],
    );
    assert.equal(evs[0]?.data["ttlMs"], OPTIONS.defaultTtlMs);
    assert.equal(clock.pendingTimers, 0);
    // A late upstream answer cannot resurrect it.
    assert.equal(await tm.complete(task.taskId, RESULT), false);
    assert.equal(await status(tm, task.taskId), "expired");
  });

  test("retention: an ended task reads as gone at its retainUntil; the store's sweep deletes the row", async () => {
    const { clock, tm, store, rows, advance } = setup();
    const { task } = await newTask(tm);
    await tm.complete(task.taskId, RESULT);
    await advance(OPTIONS.completedRetentionMs - 1);
    assert.equal(await status(tm, task.taskId), "completed");
    await advance(1);
    await assert.rejects(tm.get(task.taskId), unknownTask);
    assert.deepEqual(await tm.list({ includeCompleted: true }), []);
    assert.equal(await rows(), 1, "until the sweep");
    assert.deepEqual(await store.tasks.deleteExpired(clock.now()), [{ taskId: task.taskId, sessionId: "s1" }]);
    assert.equal(await rows(), 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(tm.timerCount, 0);
  });

  test("retention after expiry: one timer in the whole life, none left", async () => {
    const { clock, tm, store, rows, advance } = setup();
    const { task } = await newTask(tm);
    await advance(OPTIONS.defaultTtlMs);
    assert.equal(await status(tm, task.taskId), "expired");
    await advance(OPTIONS.completedRetentionMs);
    await assert.rejects(tm.get(task.taskId), unknownTask);
    await store.tasks.deleteExpired(clock.now());
    assert.equal(await rows(), 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test("ttlMs: a requested ttl is honoured and capped at maxTtlMs", async () => {
    const { clock, tm, advance } = setup();
    const short = (await newTask(tm, "srv", 300)).task;
    assert.equal(short.ttlMs, 300);
    assert.equal(short.expiresAt, clock.now() + 300);
    const capped = (await newTask(tm, "srv", 60_000)).task;
    assert.equal(capped.ttlMs, OPTIONS.maxTtlMs);
    assert.equal(capped.expiresAt, clock.now() + OPTIONS.maxTtlMs);
    await advance(300);
    assert.equal(await status(tm, short.taskId), "expired");
    await advance(OPTIONS.maxTtlMs - 300 - 1);
    assert.equal(await status(tm, capped.taskId), "working");
    await advance(1);
    assert.equal(await status(tm, capped.taskId), "expired");
  });

  test("a default TTL above maxTtlMs is capped too", async () => {
    const { tm } = setup({ defaultTtlMs: 10_000, maxTtlMs: 2_000 });
    assert.equal((await newTask(tm)).task.ttlMs, 2_000);
  });

  test("setProgress updates working tasks only, in the order asked", async () => {
    const { clock, tm } = setup();
    const { task } = await newTask(tm);
    clock.advance(10);
    tm.setProgress(task.taskId, { progress: 3, total: 10, message: "step 3" });
    await flush(); // written in the background
    let r = await tm.get(task.taskId);
    assert.deepEqual(r.progress, { progress: 3, total: 10, message: "step 3" });
    assert.equal(r.statusMessage, "step 3");
    assert.equal(r.lastUpdatedAt, clock.now());
    for (let i = 4; i <= 8; i++) tm.setProgress(task.taskId, { progress: i });
    await flush();
    assert.deepEqual((await tm.get(task.taskId)).progress, { progress: 8 }, "the last one asked for is stored");
    await tm.complete(task.taskId, RESULT);
    tm.setProgress(task.taskId, { progress: 9 });
    await flush();
    r = await tm.get(task.taskId);
    assert.deepEqual(r.progress, { progress: 8 });
    assert.equal(r.status, "completed");
    tm.setProgress("unknown", { progress: 1 }); // no throw
    await flush();
  });

  test("setInputRequired: flagged while the call waits for the client, announced once per change", async () => {
    const { tm } = setup();
    const { task } = await newTask(tm);
    const heard: Array<boolean | undefined> = [];
    tm.onStatusChange = (r) => heard.push(r.inputRequired);
    tm.setInputRequired(task.taskId, true);
    tm.setInputRequired(task.taskId, true);
    await flush();
    assert.equal((await tm.get(task.taskId)).inputRequired, true);
    assert.deepEqual(
      (await tm.list({ status: "input_required" })).map((r) => r.taskId),
      [task.taskId],
    );
    tm.setInputRequired(task.taskId, false);
    await flush();
    assert.equal((await tm.get(task.taskId)).inputRequired, undefined);
    assert.deepEqual(heard, [true, undefined]);
    tm.setInputRequired(task.taskId, true);
    await flush();
    await tm.complete(task.taskId, RESULT);
    assert.equal((await tm.get(task.taskId)).inputRequired, undefined, "an ended task waits for nothing");
  });

  test("list: working by default; filters by server, status, includeCompleted", async () => {
    const { tm } = setup({ maxTasksPerSession: 10 });
    const a1 = (await newTask(tm, "a")).task;
    const a2 = (await newTask(tm, "a")).task;
    const b1 = (await newTask(tm, "b")).task;
    await tm.complete(a2.taskId, RESULT);
    const ids = async (rs: Promise<{ taskId: string }[]>) => (await rs).map((r) => r.taskId);
    assert.deepEqual(await ids(tm.list()), [a1.taskId, b1.taskId]);
    assert.deepEqual(await ids(tm.list({ includeCompleted: true })), [a1.taskId, a2.taskId, b1.taskId]);
    assert.deepEqual(await ids(tm.list({ server: "a" })), [a1.taskId]);
    assert.deepEqual(await ids(tm.list({ server: "a", includeCompleted: true })), [a1.taskId, a2.taskId]);
    assert.deepEqual(await ids(tm.list({ status: "completed" })), [a2.taskId]);
    assert.deepEqual(await ids(tm.list({ status: "working", server: "b" })), [b1.taskId]);
  });

  test("isTerminal", () => {
    assert.equal(isTerminal("working"), false);
    assert.equal(isTerminal("input_required"), false);
    for (const s of ["completed", "failed", "cancelled", "expired"] as const) assert.equal(isTerminal(s), true);
  });
});

describe("TaskManager: store failures", () => {
  /** A task store whose writes fail while `broken.on` (disk full), and whose reads fail too while `broken.reads` (Redis down). */
  function breakable(inner: TaskStore) {
    const broken = { on: false, reads: false };
    const fail = () => Promise.reject(new GatewayError(ErrorCodes.STORE_UNAVAILABLE, "the disk (or its quota) is full: nothing was written"));
    const store: TaskStore = {
      ...inner,
      get: (id) => (broken.reads ? fail() : inner.get(id)),
      listBySession: (id, q) => inner.listBySession(id, q),
      findByUpstreamTask: (...a) => inner.findByUpstreamTask(...a),
      create: (r) => (broken.on ? fail() : inner.create(r)),
      transition: (id, c) => (broken.on ? fail() : inner.transition(id, c)),
      patch: (id, p, o) => (broken.on ? fail() : inner.patch(id, p, o)),
      enforceRetention: (id, r) => (broken.on ? fail() : inner.enforceRetention(id, r)),
      deleteBySession: (id) => (broken.on ? fail() : inner.deleteBySession(id)),
    };
    return { store, broken };
  }

  test("create fails with EMCP_STORE_UNAVAILABLE and leaves no timer and no runtime", async () => {
    let broken = { on: false };
    const { clock, tm } = setup({}, (inner) => {
      const b = breakable(inner);
      broken = b.broken;
      return b.store;
    });
    broken.on = true;
    await assert.rejects(newTask(tm), (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.STORE_UNAVAILABLE);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(tm.timerCount, 0);
    tm.reserveCall()(); // the failed task holds no slot
  });

  test("a background end that cannot be stored is logged, never thrown; readers get it from memory and it is written again until stored", async () => {
    let broken = { on: false };
    const clock = new ManualClock();
    const mem = createMemoryStore(clock);
    const logged: string[] = [];
    const logger = {
      error: (_o: unknown, msg: string) => logged.push(msg),
      warn: () => undefined,
      info: () => undefined,
      debug: () => undefined,
    } as unknown as Logger;
    const b = breakable(mem.tasks);
    broken = b.broken;
    const events = new EventSystem("s1", EVENTS, mem.events, clock, counterIds("ev"), logger);
    const tm = new TaskManager("s1", OPTIONS, b.store, events, clock, counterIds("task"));
    const { task } = await newTask(tm);
    const waiting = tm.waitForTerminal(task.taskId, 60_000);
    broken.on = true;
    assert.equal(await tm.complete(task.taskId, RESULT), false, "not stored");
    assert.deepEqual(logged, ["task_store_write_failed"]);
    assert.equal((await waiting).status, "completed", "a waiting client gets the result");
    assert.equal(await status(tm, task.taskId), "completed", "…and so does a later reader");
    assert.equal((await mem.tasks.get(task.taskId))?.status, "working", "the store does not have it yet");
    const cancel = await tm.cancel(task.taskId);
    assert.equal(cancel.success, false, "it completed as far as the client knows: nothing to cancel");
    clock.advance(OPTIONS.defaultTtlMs);
    await flush();
    assert.equal(clock.pendingTimers, 1, "written again later, never expired (the call ended in time)");
    assert.equal(await status(tm, task.taskId), "completed");
    broken.on = false;
    clock.advance(60_000);
    await flush();
    assert.equal((await mem.tasks.get(task.taskId))?.status, "completed", "stored once the store takes it");
    assert.deepEqual((await mem.tasks.get(task.taskId))?.result, RESULT);
    assert.equal(clock.pendingTimers, 0);
  });

  test("a call's end is kept and written again when the store cannot even be read (Redis down): never expired, stored once it is back", async () => {
    const clock = new ManualClock();
    const mem = createMemoryStore(clock);
    const logged: string[] = [];
    const logger = {
      error: (_o: unknown, msg: string) => logged.push(msg),
      warn: (_o: unknown, msg: string) => logged.push(msg),
      info: () => undefined,
      debug: () => undefined,
    } as unknown as Logger;
    const b = breakable(mem.tasks);
    const events = new EventSystem("s1", EVENTS, mem.events, clock, counterIds("ev"), logger);
    const tm = new TaskManager("s1", OPTIONS, b.store, events, clock, counterIds("task"));
    const { task } = await newTask(tm);
    const waiting = tm.waitForTerminal(task.taskId, 60_000);
    await flush(); // the waiter read the task (working) and waits
    b.broken.on = true;
    b.broken.reads = true;
    assert.equal(await tm.complete(task.taskId, RESULT), false, "not stored");
    assert.deepEqual(logged, ["task_store_write_failed"]);
    const ended = await waiting;
    assert.equal(ended.status, "completed", "a waiting client gets the result");
    assert.deepEqual(ended.result, RESULT);
    assert.equal(await status(tm, task.taskId), "completed", "…and so does a later reader, the store unreadable");
    clock.advance(OPTIONS.defaultTtlMs);
    await flush();
    assert.equal(clock.pendingTimers, 1, "a retry is scheduled, no expiry");
    assert.ok(!logged.includes("task_expired"), "never expired: the upstream answered in time");
    b.broken.on = false;
    b.broken.reads = false;
    clock.advance(60_000);
    await flush();
    const stored = await mem.tasks.get(task.taskId);
    assert.equal(stored?.status, "completed", "stored once the store is back");
    assert.deepEqual(stored?.result, RESULT);
    assert.equal(clock.pendingTimers, 0);
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

  test("working tasks count toward the limit; terminal tasks do not", async () => {
    const { tm } = setup({ maxTasksPerSession: 2 });
    const t1 = (await newTask(tm)).task;
    await newTask(tm);
    assert.throws(
      () => tm.reserveCall(),
      (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.LIMIT_REACHED,
    );
    await tm.complete(t1.taskId, RESULT);
    const r = tm.reserveCall();
    r();
  });
});

describe("TaskManager: waitForTerminal", () => {
  test("resolves with the terminal record when the task completes; its timer is cleared", async () => {
    const { clock, tm } = setup();
    const { task } = await newTask(tm);
    const p = tm.waitForTerminal(task.taskId, 500);
    await flush();
    assert.equal(clock.pendingTimers, 2, "TTL + wait timer");
    await tm.complete(task.taskId, RESULT);
    const r = await settle(p);
    assert.equal(r.status, "completed");
    assert.deepEqual(r.result, RESULT);
    assert.equal(clock.pendingTimers, 0);
  });

  test("resolves with the working record after its timeout", async () => {
    const { clock, tm } = setup();
    const { task } = await newTask(tm);
    let settled = false;
    const p = tm.waitForTerminal(task.taskId, 500).then((r) => {
      settled = true;
      return r;
    });
    await flush();
    clock.advance(499);
    await flush();
    assert.equal(settled, false);
    clock.advance(1);
    const r = await settle(p);
    assert.equal(r.status, "working");
    assert.equal(r.taskId, task.taskId);
    assert.equal(clock.pendingTimers, 1, "the TTL timer only");
    // Completing later does not break anything.
    assert.equal(await tm.complete(task.taskId, RESULT), true);
  });

  test("resolves with the current record on abort", async () => {
    const { clock, tm } = setup();
    const { task } = await newTask(tm);
    const ctrl = new AbortController();
    const p = tm.waitForTerminal(task.taskId, 500, ctrl.signal);
    await flush();
    ctrl.abort();
    assert.equal((await settle(p)).status, "working");
    assert.equal(clock.pendingTimers, 1);
  });

  test("resolves at once for terminal tasks, without a timer", async () => {
    const { clock, tm } = setup();
    const { task } = await newTask(tm);
    await tm.fail(task.taskId, "x");
    const timers = clock.pendingTimers;
    const r = await settle(tm.waitForTerminal(task.taskId, 500));
    assert.equal(r.status, "failed");
    assert.equal(clock.pendingTimers, timers);
  });

  test("an end committed while the wait starts is not missed", async () => {
    const { tm } = setup();
    const { task } = await newTask(tm);
    const [wait] = [tm.waitForTerminal(task.taskId, 60_000), tm.complete(task.taskId, RESULT)];
    assert.equal((await settle(wait)).status, "completed");
  });

  test("several waiters all resolve on expiry", async () => {
    const { clock, tm } = setup();
    const { task } = await newTask(tm);
    const ps = [tm.waitForTerminal(task.taskId, 60_000), tm.waitForTerminal(task.taskId, 60_000)];
    await flush();
    clock.advance(OPTIONS.defaultTtlMs);
    const rs = await settle(Promise.all(ps));
    assert.deepEqual(
      rs.map((r) => r.status),
      ["expired", "expired"],
    );
    assert.equal(clock.pendingTimers, 0);
  });

  test("rejects with EMCP_UNKNOWN_TASK for an unknown id", async () => {
    const { tm } = setup();
    await assert.rejects(tm.waitForTerminal("nope", 10), unknownTask);
  });
});

describe("TaskManager: session isolation", () => {
  test("another session sharing the store cannot get, cancel, list, wait on or settle the task", async () => {
    const { tm, other, rows } = setup();
    const { task, abort } = await newTask(tm);
    const { tm: tm2, events: events2 } = other();
    await assert.rejects(tm2.get(task.taskId), unknownTask);
    await assert.rejects(tm2.cancel(task.taskId), unknownTask);
    await assert.rejects(tm2.waitForTerminal(task.taskId, 10), unknownTask);
    assert.deepEqual(await tm2.list({ includeCompleted: true }), []);
    assert.equal(await tm2.complete(task.taskId, RESULT), false);
    assert.equal(await tm2.fail(task.taskId, "x"), false);
    tm2.setProgress(task.taskId, { progress: 1 });
    assert.deepEqual(await tm2.failWorkingForServer("srv", "gone"), []);
    assert.equal(abort.signal.aborted, false);
    const r = await tm.get(task.taskId);
    assert.equal(r.status, "working");
    assert.equal(r.progress, undefined, "s2 could not write s1's progress");
    assert.deepEqual(await events2.takeNew(), []);
    // Closing the other session leaves this session's records alone.
    await tm2.close();
    assert.equal(await rows("s1"), 1);
    assert.equal(await status(tm, task.taskId), "working");
  });

  test("each session sees only its own tasks", async () => {
    const { tm, other } = setup();
    const { tm: tm2 } = other();
    const t1 = (await newTask(tm)).task;
    const t2 = (await newTask(tm2)).task;
    assert.deepEqual(
      (await tm.list()).map((r) => r.taskId),
      [t1.taskId],
    );
    assert.deepEqual(
      (await tm2.list()).map((r) => r.taskId),
      [t2.taskId],
    );
    assert.equal((await tm2.get(t2.taskId)).sessionId, "s2");
    await assert.rejects(tm.get(t2.taskId), unknownTask);
    await tm.close();
    await tm2.close();
  });
});

describe("TaskManager: failWorkingForServer, close and restore", () => {
  test("failWorkingForServer fails and aborts only that server's working tasks", async () => {
    const { events, tm } = setup({ maxTasksPerSession: 10 });
    const a1 = await newTask(tm, "a");
    const a2 = await newTask(tm, "a");
    const aDone = await newTask(tm, "a");
    const b1 = await newTask(tm, "b");
    await tm.complete(aDone.task.taskId, RESULT);
    await events.takeNew();
    const failed = await tm.failWorkingForServer("a", "server a disconnected");
    assert.deepEqual(failed.sort(), [a1.task.taskId, a2.task.taskId].sort());
    for (const t of [a1, a2]) {
      const r = await tm.get(t.task.taskId);
      assert.equal(r.status, "failed");
      assert.equal(r.error, "server a disconnected");
      assert.equal(t.abort.signal.aborted, true);
    }
    assert.equal(await status(tm, aDone.task.taskId), "completed");
    assert.equal(await status(tm, b1.task.taskId), "working");
    assert.equal(b1.abort.signal.aborted, false);
    assert.deepEqual(await eventTypes(events), ["task_failed", "task_failed"]);
  });

  test("close() clears every timer, aborts working calls, wakes waiters and deletes the session's records", async () => {
    const { clock, tm, rows } = setup({ maxTasksPerSession: 10 });
    const working = await newTask(tm);
    const done = await newTask(tm);
    await tm.complete(done.task.taskId, RESULT);
    const wait = tm.waitForTerminal(working.task.taskId, 60_000);
    await flush();
    assert.equal(clock.pendingTimers, 2, "TTL + wait");

    await tm.close();
    assert.equal(clock.pendingTimers, 0);
    assert.equal(tm.timerCount, 0);
    assert.equal(working.abort.signal.aborted, true);
    assert.equal(working.abort.signal.reason, "session closed");
    assert.equal(done.abort.signal.aborted, false, "finished calls are not aborted");
    const woke = await settle(wait);
    assert.equal(woke.status, "cancelled");
    assert.equal(woke.statusMessage, "session closed");
    assert.equal(await rows(), 0);
    await assert.rejects(tm.get(working.task.taskId), unknownTask);
    await assert.rejects(newTask(tm), (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.CLOSED);
    // Nothing fires later.
    clock.advance(OPTIONS.maxTtlMs + OPTIONS.completedRetentionMs);
    assert.equal(await tm.complete(working.task.taskId, RESULT), false);
  });

  test("close({ keepRecords }) (a gateway shutdown) keeps every record as stored; a late end of an aborted call writes nothing", async () => {
    const { clock, tm, store } = setup({ maxTasksPerSession: 10 });
    const working = await newTask(tm);
    const upstream = new AbortController();
    const upstreamTask = await tm.create({ server: "srv", toolName: "t", toolArgs: {}, abort: upstream, upstreamTaskId: "up-1" });
    const done = await newTask(tm);
    await tm.complete(done.task.taskId, RESULT);
    await tm.close({ keepRecords: true });
    assert.equal(clock.pendingTimers, 0);
    assert.equal(working.abort.signal.aborted, true, "a gateway-owned call stops with the process");
    assert.equal(upstream.signal.aborted, false, "an upstream task is not cancelled: it can be asked about after the restart");
    assert.equal(await tm.fail(working.task.taskId, "aborted"), false);
    const stored = await store.tasks.listBySession("s1");
    assert.deepEqual(
      stored.map((r) => [r.taskId, r.status]),
      [
        [working.task.taskId, "working"],
        [upstreamTask.taskId, "working"],
        [done.task.taskId, "completed"],
      ],
      "the next start settles what was running (src/server/recovery.ts)",
    );
  });

  test("restore() re-attaches a resumed session's stored working tasks with their absolute TTL", async () => {
    const { clock, store, events } = setup();
    const first = new TaskManager("s1", OPTIONS, store.tasks, events, clock, counterIds("task"));
    const up = await first.create({ server: "srv", toolName: "t", toolArgs: {}, abort: new AbortController(), upstreamTaskId: "up-1", ttlMs: 1_000 });
    await first.close({ keepRecords: true });
    clock.advance(600);
    const second = new TaskManager("s1", OPTIONS, store.tasks, events, clock, counterIds("next"));
    assert.equal(await second.restore(), 1);
    assert.equal(second.isRunning(up.taskId), true);
    assert.equal(second.runningByUpstreamId("srv", "up-1"), up.taskId);
    clock.advance(399);
    await flush();
    assert.equal(await status(second, up.taskId), "working");
    clock.advance(1);
    await flush();
    assert.equal(await status(second, up.taskId), "expired", "the restart neither extended nor forgot its TTL");
    assert.equal(clock.pendingTimers, 0);
    await second.close();
  });
});
