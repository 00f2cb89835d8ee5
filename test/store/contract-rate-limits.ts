/** Contract cases for RateLimitStore (token buckets, gateway.rateLimits); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { RateBucketSpec } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

const bucket = (key: string, capacity: number, refillPerSecond: number): RateBucketSpec => ({ key, capacity, refillPerSecond });

export function rateLimitContract(factory: StoreFactory): void {
  describe("rate-limit buckets", () => {
    test("a full bucket gives capacity tokens, then refuses with the wait for the next one", () =>
      withStore(factory, async ({ store }) => {
        const b = [bucket("a", 3, 1)];
        for (let i = 0; i < 3; i++) assert.deepEqual(await store.rateLimits.take(b, 10_000), { ok: true, retryAfterMs: 0 });
        assert.deepEqual(await store.rateLimits.take(b, 10_000), { ok: false, refused: 0, retryAfterMs: 1000 });
        assert.deepEqual(await store.rateLimits.take(b, 10_400), { ok: false, refused: 0, retryAfterMs: 600 });
        assert.equal((await store.rateLimits.take(b, 11_000)).ok, true);
        assert.equal((await store.rateLimits.take(b, 11_000)).ok, false);
      }));

    test("refills at the rate up to the capacity, never beyond; a clock behind refills nothing", () =>
      withStore(factory, async ({ store }) => {
        const b = [bucket("r", 2, 4)]; // a token each 250 ms
        await store.rateLimits.take(b, 1000);
        await store.rateLimits.take(b, 1000);
        assert.equal((await store.rateLimits.take(b, 900)).ok, false);
        assert.equal((await store.rateLimits.take(b, 1250)).ok, true);
        // An hour idle: still only 2.
        const later = 1250 + 3_600_000;
        assert.equal((await store.rateLimits.take(b, later)).ok, true);
        assert.equal((await store.rateLimits.take(b, later)).ok, true);
        assert.equal((await store.rateLimits.take(b, later)).ok, false);
      }));

    test("several buckets: all or nothing, the first empty one named, the longest wait", () =>
      withStore(factory, async ({ store }) => {
        const wide = bucket("wide", 10, 1);
        const narrow = bucket("narrow", 1, 0.5);
        assert.equal((await store.rateLimits.take([wide, narrow], 0)).ok, true);
        assert.deepEqual(await store.rateLimits.take([wide, narrow], 0), { ok: false, refused: 1, retryAfterMs: 2000 });
        // The refusal took nothing from the wide bucket: 9 left.
        for (let i = 0; i < 9; i++) assert.equal((await store.rateLimits.take([wide], 0)).ok, true, `take ${i}`);
        assert.equal((await store.rateLimits.take([wide], 0)).ok, false);
        // Buckets are independent by key.
        assert.equal((await store.rateLimits.take([bucket("other", 1, 1)], 0)).ok, true);
      }));

    test("concurrent takes never exceed the capacity", () =>
      withStore(factory, async ({ store }) => {
        const b = [bucket("c", 5, 0.001), bucket("c2", 100, 1)];
        const got = await Promise.all(Array.from({ length: 20 }, () => store.rateLimits.take(b, 5000)));
        assert.equal(got.filter((g) => g.ok).length, 5);
        assert.ok(got.filter((g) => !g.ok).every((g) => g.refused === 0 && g.retryAfterMs > 0));
      }));

    test("a bucket full again is forgotten and behaves as new", () =>
      withStore(factory, async ({ store }) => {
        const b = [bucket("f", 1, 10)];
        assert.equal((await store.rateLimits.take(b, 0)).ok, true);
        assert.equal((await store.rateLimits.take(b, 50)).ok, false);
        // Long after it refilled (any sweep has run): one token, as a new bucket.
        assert.equal((await store.rateLimits.take(b, 200_000)).ok, true);
        assert.equal((await store.rateLimits.take(b, 200_000)).ok, false);
      }));
  });
}
