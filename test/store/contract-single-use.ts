/** Contract cases for SingleUseStore (keys used once until they expire, across replicas); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

export function singleUseContract(factory: StoreFactory): void {
  describe("single-use marks", () => {
    test("the first use of a key is true, every later one before its expiry false; other keys are their own", () =>
      withStore(factory, async ({ store }) => {
        const now = Date.now();
        assert.equal(await store.singleUse.use("a", now + 60_000, now), true);
        assert.equal(await store.singleUse.use("a", now + 60_000, now), false, "a replay");
        assert.equal(await store.singleUse.use("a", now + 120_000, now + 30_000), false, "still live; a later expiry does not free it");
        assert.equal(await store.singleUse.use("b", now + 60_000, now), true);
      }));

    test("concurrent uses of one key: exactly one is first", () =>
      withStore(factory, async ({ store }) => {
        const now = Date.now();
        const got = await Promise.all(Array.from({ length: 8 }, () => store.singleUse.use("k", now + 60_000, now)));
        assert.equal(got.filter(Boolean).length, 1);
      }));

    test("an expiry at or before now marks nothing; deleteExpired removes the expired marks only", () =>
      withStore(factory, async ({ store }) => {
        const now = Date.now();
        assert.equal(await store.singleUse.use("gone", now, now), true);
        assert.equal(await store.singleUse.use("gone", now + 60_000, now), true, "the expired use kept no mark");
        assert.equal(await store.singleUse.use("short", now + 1, now), true);
        const deleted = await store.singleUse.deleteExpired(now + 1);
        assert.ok(deleted === 0 || deleted === 1, `deleted ${deleted}`);
        assert.equal(await store.singleUse.use("gone", now + 60_000, now + 1), false, "a live mark stays");
      }));
  });
}
