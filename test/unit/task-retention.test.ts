import { test } from "node:test";
import assert from "node:assert/strict";
import { EventSystem } from "../../src/session/event-system.js";
import { MemoryTaskRecordStore } from "../../src/store/task-store.js";
import { TaskManager, type TaskManagerOptions } from "../../src/tasks/task-manager.js";
import { ManualClock } from "../fixtures/manual-clock.js";

function setup(options: Partial<TaskManagerOptions>) {
  const clock = new ManualClock();
  const store = new MemoryTaskRecordStore();
  let n = 0;
  const events = new EventSystem({ maxEvents: 1000, warningThreshold: 0.8 }, clock, () => `ev-${++n}`);
  const tm = new TaskManager(
    "s1",
    { defaultTtlMs: 10_000, maxTtlMs: 60_000, completedRetentionMs: 1_000, maxTasksPerSession: 100, ...options },
    store,
    events,
    clock,
    () => `task-${String(++n).padStart(4, "0")}`,
  );
  const run = (text: string, ttlMs?: number) => {
    const t = tm.create({ server: "s", toolName: "t", toolArgs: {}, abort: new AbortController(), ttlMs });
    clock.advance(1);
    tm.complete(t.taskId, { content: [{ type: "text", text }] });
    return t.taskId;
  };
  const exists = (id: string) => store.get(id) !== undefined;
  return { clock, store, tm, run, exists };
}

test("an ended task is kept until its TTL is over even when the retention period is shorter", () => {
  const { clock, run, exists } = setup({});
  const id = run("x", 30_000);
  clock.advance(5_000);
  assert.ok(exists(id), "past completedRetentionMs, within its TTL");
  clock.advance(25_000);
  assert.ok(!exists(id), "deleted once the TTL (from creation) is over");
});

test("the oldest ended tasks go first beyond maxRetainedPerSession or maxRetainedResultBytes", () => {
  const { run, exists } = setup({ maxRetainedPerSession: 2, maxRetainedResultBytes: 10_000 });
  const [a, b, c] = [run("a"), run("b"), run("c")];
  assert.deepEqual([exists(a), exists(b), exists(c)], [false, true, true]);
});

test("one result larger than maxRetainedResultBytes evicts older tasks but never itself", () => {
  const { run, exists } = setup({ maxRetainedResultBytes: 1_000 });
  const small = [run("a"), run("b")];
  const big = run("x".repeat(1_200));
  assert.ok(exists(big), "its client may be about to ask for the result");
  assert.ok(
    small.every((id) => !exists(id)),
    "older results made room",
  );
});
