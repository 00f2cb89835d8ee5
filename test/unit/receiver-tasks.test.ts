import { test } from "node:test";
import assert from "node:assert/strict";
import { ReceiverTaskStore } from "../../src/upstream/receiver-tasks.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

function setup() {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  let n = 0;
  const make = (sessionId: string, server: string, maxLive?: number) =>
    new ReceiverTaskStore({ sessionId, server, store: store.tasks, clock, newId: () => `T${++n}`, defaultTtlMs: 60_000, maxTtlMs: 120_000, maxLive });
  const rows = async () => (await store.tasks.listBySession("s1")).length + (await store.tasks.listBySession("s2")).length;
  return { clock, store, make, rows };
}

const elicit = { method: "elicitation/create", params: {} };

test("a receiver task starts working, completes with its result, and is freed at its TTL", async () => {
  const { clock, store, make, rows } = setup();
  const tasks = make("s1", "up");
  const task = await tasks.createTask({ ttl: 5000 }, 1, elicit);
  assert.equal(task.status, "working");
  assert.equal(task.ttl, 5000);
  const stored = await store.tasks.get(task.taskId);
  assert.equal(stored?.kind, "receiver");
  assert.equal(stored?.retainUntil, clock.now() + 5000, "its absolute expiry: a restart neither extends nor forgets it");
  await tasks.storeTaskResult(task.taskId, "completed", { action: "decline" });
  const done = await tasks.getTask(task.taskId);
  assert.equal(done?.status, "completed");
  assert.equal(done?.statusMessage, undefined, "the waiting message goes once answered");
  assert.deepEqual(await tasks.getTaskResult(task.taskId), { action: "decline" });
  await assert.rejects(tasks.storeTaskResult(task.taskId, "completed", {}), /already ended/);
  clock.advance(5000);
  await flush();
  assert.equal(await tasks.getTask(task.taskId), null);
  assert.equal(await rows(), 0);
  assert.equal(clock.pendingTimers, 0);
});

test("the TTL is capped, cancel and expiry abort the forwarded request, failure has no result", async () => {
  const { clock, make } = setup();
  const tasks = make("s1", "up");
  const capped = await tasks.createTask({ ttl: 10_000_000 }, 1, elicit);
  assert.equal(capped.ttl, 120_000);
  const signal = tasks.signalFor(capped.taskId);
  await tasks.updateTaskStatus(capped.taskId, "cancelled", "upstream cancelled");
  assert.equal(signal.aborted, true);
  await assert.rejects(tasks.getTaskResult(capped.taskId), /cancelled: upstream cancelled/);
  await assert.rejects(tasks.storeTaskResult(capped.taskId, "completed", {}), /already ended \(cancelled\)/, "a late answer cannot overwrite the cancel");

  const expiring = await tasks.createTask({}, 2, elicit);
  assert.equal(expiring.ttl, 60_000, "default TTL");
  const s2 = tasks.signalFor(expiring.taskId);
  clock.advance(60_000);
  assert.equal(s2.aborted, true);
  assert.equal(tasks.signalFor(expiring.taskId).aborted, true, "a gone task's signal is aborted");
});

test("a row whose timer died with its process reads as gone at its expiry, and the sweep deletes it", async () => {
  const { clock, store, make } = setup();
  const now = clock.now();
  // As a previous process left it: stored, its timer gone with the process.
  const task = { taskId: "T0", sessionId: "s1", kind: "receiver" as const, server: "up", toolName: "elicitation/create", toolArgs: {} };
  await store.tasks.create({ ...task, status: "working", createdAt: now, lastUpdatedAt: now, ttlMs: 5000, expiresAt: now + 5000, retainUntil: now + 5000 });
  const afterRestart = make("s1", "up");
  clock.advance(4999);
  assert.equal((await afterRestart.getTask(task.taskId))?.status, "working");
  clock.advance(1);
  assert.equal(await afterRestart.getTask(task.taskId), null);
  assert.deepEqual(await store.tasks.deleteExpired(clock.now()), [{ taskId: task.taskId, sessionId: "s1" }]);
});

test("live tasks are bounded per upstream; ended ones do not count", async () => {
  const { make } = setup();
  const tasks = make("s1", "up", 2);
  const a = await tasks.createTask({}, 1, elicit);
  await tasks.createTask({}, 2, elicit);
  await assert.rejects(tasks.createTask({}, 3, elicit), /already holds 2 tasks/);
  await tasks.storeTaskResult(a.taskId, "completed", { action: "cancel" });
  await tasks.createTask({}, 4, elicit);
  await tasks.close();
});

test("tasks are scoped to one session and upstream; listTasks pages; close() frees every record and timer", async () => {
  const { clock, make, rows } = setup();
  const mine = make("s1", "up");
  const otherSession = make("s2", "up");
  const otherServer = make("s1", "other");
  const t = await mine.createTask({}, 1, elicit);
  assert.equal(await otherSession.getTask(t.taskId), null);
  assert.equal(await otherServer.getTask(t.taskId), null);
  await assert.rejects(otherSession.getTaskResult(t.taskId), /Task not found/);
  assert.deepEqual((await otherSession.listTasks()).tasks, []);
  assert.deepEqual(
    (await mine.listTasks()).tasks.map((x) => x.taskId),
    [t.taskId],
  );
  await otherServer.createTask({}, 2, elicit);
  await mine.close();
  assert.equal(await mine.getTask(t.taskId), null);
  assert.equal(await rows(), 1, "only the other store's task is left");
  await otherServer.close();
  assert.equal(await rows(), 0);
  assert.equal(clock.pendingTimers, 0);
});

test("listTasks pages by 100 with a cursor", async () => {
  const { make } = setup();
  const tasks = make("s1", "up", 500);
  const ids: string[] = [];
  for (let i = 0; i < 150; i++) ids.push((await tasks.createTask({}, i, elicit)).taskId);
  const first = await tasks.listTasks();
  assert.equal(first.tasks.length, 100);
  assert.ok(first.nextCursor);
  const second = await tasks.listTasks(first.nextCursor);
  assert.equal(second.tasks.length, 50);
  assert.equal(second.nextCursor, undefined);
  assert.deepEqual([...first.tasks, ...second.tasks].map((t) => t.taskId).sort(), [...ids].sort());
  await tasks.close();
});

/** Four receiver tasks of session s1 created and completed with `result`, one ms apart, under `limits`: the store's rows, oldest first. */
async function fourEnded(limits: { maxRetained: number; maxRetainedBytes?: number }, result: Record<string, unknown>) {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  let n = 0;
  const tasks = new ReceiverTaskStore({
    sessionId: "s1",
    server: "up",
    store: store.tasks,
    clock,
    newId: () => `T${++n}`,
    defaultTtlMs: 60_000,
    maxTtlMs: 60_000,
    ...limits,
  });
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    const t = await tasks.createTask({}, i, elicit);
    ids.push(t.taskId);
    clock.advance(1);
    await tasks.storeTaskResult(t.taskId, "completed", result);
    await flush();
  }
  const kept = await store.tasks.listBySession("s1");
  await tasks.close();
  return { ids, kept };
}

test("ended receiver tasks are bounded per session in the store (oldest rows first, never the one that just ended)", async () => {
  const { ids, kept } = await fourEnded({ maxRetained: 2 }, { action: "decline" });
  assert.deepEqual(
    kept.map((r) => r.taskId),
    ids.slice(2),
  );
});

test("ended receiver tasks are bounded in result bytes too (gateway.tasks.maxRetainedResultBytes)", async () => {
  // Each result is a little over 1,000 bytes of JSON: two fit in 2,500, a third does not.
  const { ids, kept } = await fourEnded({ maxRetained: 100, maxRetainedBytes: 2_500 }, { action: "accept", content: { text: "x".repeat(1_000) } });
  assert.ok(
    kept.every((r) => (r.resultBytes ?? 0) > 1_000),
    "each stored result records its size",
  );
  assert.deepEqual(
    kept.map((r) => r.taskId),
    ids.slice(2),
  );
});
