import { test } from "node:test";
import assert from "node:assert/strict";
import { ReceiverTaskStore } from "../../src/tasks/receiver-tasks.js";
import { MemoryTaskRecordStore } from "../../src/store/task-store.js";
import { ManualClock } from "../fixtures/manual-clock.js";

function setup() {
  const clock = new ManualClock();
  const store = new MemoryTaskRecordStore();
  let n = 0;
  const make = (sessionId: string, server: string) =>
    new ReceiverTaskStore({ sessionId, server, store, clock, newId: () => `T${++n}`, defaultTtlMs: 60_000, maxTtlMs: 120_000 });
  return { clock, store, make };
}

const elicit = { method: "elicitation/create", params: {} };

test("a receiver task starts working, completes with its result, and is freed at its TTL", async () => {
  const { clock, store, make } = setup();
  const tasks = make("s1", "up");
  const task = await tasks.createTask({ ttl: 5000 }, 1, elicit);
  assert.equal(task.status, "working");
  assert.equal(task.ttl, 5000);
  await tasks.storeTaskResult(task.taskId, "completed", { action: "decline" });
  const done = await tasks.getTask(task.taskId);
  assert.equal(done?.status, "completed");
  assert.equal(done?.statusMessage, undefined, "the waiting message goes once answered");
  assert.deepEqual(await tasks.getTaskResult(task.taskId), { action: "decline" });
  await assert.rejects(tasks.storeTaskResult(task.taskId, "completed", {}), /already ended/);
  clock.advance(5000);
  assert.equal(await tasks.getTask(task.taskId), null);
  assert.equal(store.size, 0);
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

  const expiring = await tasks.createTask({}, 2, elicit);
  assert.equal(expiring.ttl, 60_000, "default TTL");
  const s2 = tasks.signalFor(expiring.taskId);
  clock.advance(60_000);
  assert.equal(s2.aborted, true);
  assert.equal(tasks.signalFor(expiring.taskId).aborted, true, "a gone task's signal is aborted");
});

test("tasks are scoped to one session and upstream; close() frees every record and timer", async () => {
  const { clock, store, make } = setup();
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
  mine.close();
  assert.equal(await mine.getTask(t.taskId), null);
  assert.equal(store.size, 1, "only the other store's task is left");
  otherServer.close();
  assert.equal(store.size, 0);
  assert.equal(clock.pendingTimers, 0);
});
