import { test } from "node:test";
import assert from "node:assert/strict";
import { EventSystem } from "../../src/session/event-system.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { TaskManager } from "../../src/tasks/task-manager.js";
import type { TaskManagerOptions } from "../../src/tasks/task-types.js";
import { ManualClock } from "../fixtures/manual-clock.js";

/** Ended tasks are bounded in the store itself: by absolute retainUntil (swept) and per session by count and bytes. */
function setup(options: Partial<TaskManagerOptions>) {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  let n = 0;
  const events = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, () => `ev-${++n}`);
  const tm = new TaskManager(
    "s1",
    { defaultTtlMs: 10_000, maxTtlMs: 60_000, completedRetentionMs: 1_000, maxTasksPerSession: 100, ...options },
    store.tasks,
    events,
    clock,
    () => `task-${String(++n).padStart(4, "0")}`,
  );
  const run = async (text: string, ttlMs?: number) => {
    const t = await tm.create({ server: "s", toolName: "t", toolArgs: {}, abort: new AbortController(), ttlMs });
    clock.advance(1);
    await tm.complete(t.taskId, { content: [{ type: "text", text }] });
    return t.taskId;
  };
  /** What the gateway's sweep does, then whether the row is still there. */
  const exists = async (id: string) => {
    await store.tasks.deleteExpired(clock.now());
    return (await store.tasks.get(id)) !== undefined;
  };
  return { clock, store, tm, run, exists };
}

test("an ended task is kept until its TTL is over even when the retention period is shorter", async () => {
  const { clock, run, exists } = setup({});
  const id = await run("x", 30_000);
  clock.advance(5_000);
  assert.ok(await exists(id), "past completedRetentionMs, within its TTL");
  clock.advance(25_000);
  assert.ok(!(await exists(id)), "deleted once the TTL (from creation) is over");
});

test("the oldest ended tasks go first beyond maxRetainedPerSession or maxRetainedResultBytes", async () => {
  const { run, exists } = setup({ maxRetainedPerSession: 2, maxRetainedResultBytes: 10_000 });
  const [a, b, c] = [await run("a"), await run("b"), await run("c")];
  assert.deepEqual([await exists(a), await exists(b), await exists(c)], [false, true, true]);
});

test("one result larger than maxRetainedResultBytes evicts older tasks but never itself", async () => {
  const { run, exists } = setup({ maxRetainedResultBytes: 1_000 });
  const small = [await run("a"), await run("b")];
  const big = await run("x".repeat(1_200));
  assert.ok(await exists(big), "its client may be about to ask for the result");
  for (const id of small) assert.ok(!(await exists(id)), "older results made room");
});

test("working tasks never count toward retention and are never deleted by it", async () => {
  const { tm, run, exists } = setup({ maxRetainedPerSession: 1 });
  const working = await tm.create({ server: "s", toolName: "t", toolArgs: {}, abort: new AbortController() });
  await run("a");
  await run("b");
  assert.ok(await exists(working.taskId));
  await tm.close();
});
