import { test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../fixtures/manual-clock.js";

test("manual clock fires timers in order and only when advanced", () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  clock.setTimeout(() => fired.push("b"), 20);
  const h = clock.setTimeout(() => fired.push("x"), 15);
  clock.setTimeout(() => fired.push("a"), 10);
  clock.clearTimeout(h);
  clock.advance(9);
  assert.deepEqual(fired, []);
  clock.advance(11);
  assert.deepEqual(fired, ["a", "b"]);
  assert.equal(clock.pendingTimers, 0);
});
