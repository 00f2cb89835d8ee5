/**
 * ulidGenerator draws its randomness from a pooled CSPRNG (issue 27): ids stay
 * valid ULIDs, unique, sortable by time and monotonic within one millisecond,
 * and the random part stays uniform over the 32 Crockford characters.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeTime } from "ulid";
import { pooledRandom, ulidGenerator } from "../../src/clock.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

test("ids are ULIDs of the injected clock's time, distinct and increasing within and across milliseconds", () => {
  const clock = new ManualClock(Date.UTC(2030, 0, 1));
  const next = ulidGenerator(clock);
  const ids: string[] = [];
  for (let ms = 0; ms < 50; ms++) {
    for (let i = 0; i < 100; i++) ids.push(next());
    clock.advance(1);
  }
  for (const id of ids) assert.match(id, ULID);
  assert.equal(new Set(ids).size, ids.length);
  assert.deepEqual([...ids].sort(), ids, "sorted as made");
  assert.equal(decodeTime(ids[0]!), Date.UTC(2030, 0, 1));
  assert.equal(decodeTime(ids.at(-1)!), Date.UTC(2030, 0, 1) + 49);
});

test("two generators at the same millisecond make different ids (the random part is random)", () => {
  const clock = new ManualClock(Date.UTC(2030, 0, 1));
  const a = ulidGenerator(clock);
  const b = ulidGenerator(clock);
  assert.notEqual(a().slice(10), b().slice(10));
});

test("pooledRandom draws in [0, 1), refills past its pool, and covers every one of 32 buckets about evenly", () => {
  const draw = pooledRandom(64);
  const buckets = new Array<number>(32).fill(0);
  const n = 32_000;
  for (let i = 0; i < n; i++) {
    const r = draw();
    assert.ok(r >= 0 && r < 1, `draw ${r} out of range`);
    buckets[Math.floor(r * 32)]!++;
  }
  // 1,000 expected per bucket; 6 sigma (≈ 190) apart from it is not chance.
  for (const [i, count] of buckets.entries()) assert.ok(Math.abs(count - n / 32) < 190, `bucket ${i}: ${count}`);
});
