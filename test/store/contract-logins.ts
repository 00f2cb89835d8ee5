/** Contract cases for LoginStateStore (started console logins); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { LoginStateRecord } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

function login(state: string, createdAt = 1000, ttlMs = 600_000): LoginStateRecord {
  return {
    state,
    verifier: `v-${state}`,
    nonce: `n-${state}`,
    bindingHash: "ab".repeat(32),
    redirectUri: "https://gw.example/console/callback",
    next: "/console/inbox",
    createdAt,
    expiresAt: createdAt + ttlMs,
  };
}

export function loginContract(factory: StoreFactory): void {
  describe("started console logins", () => {
    test("take returns a login once: a second take (a replayed callback) finds nothing", () =>
      withStore(factory, async ({ store }) => {
        const l = login("S1");
        await store.logins.put(l, 10);
        assert.equal(await store.logins.count(), 1);
        assert.deepEqual(await store.logins.take("S1", 2000), l);
        assert.equal(await store.logins.take("S1", 2000), undefined);
        assert.equal(await store.logins.take("never", 2000), undefined);
        assert.equal(await store.logins.count(), 0);
      }));

    test("concurrent takes of one login: exactly one gets it", () =>
      withStore(factory, async ({ store }) => {
        await store.logins.put(login("S1"), 10);
        const got = await Promise.all(Array.from({ length: 8 }, () => store.logins.take("S1", 2000)));
        assert.equal(got.filter((g) => g !== undefined).length, 1);
      }));

    test("an expired login is not returned (and is gone); deleteExpired deletes those at or before now", () =>
      withStore(factory, async ({ store }) => {
        await store.logins.put(login("old", 1000, 1000), 10);
        await store.logins.put(login("edge", 1000, 2000), 10);
        await store.logins.put(login("new", 1000, 5000), 10);
        assert.equal(await store.logins.take("old", 2000), undefined, "expiresAt 2000 ≤ now 2000");
        assert.equal(await store.logins.count(), 2);
        assert.equal(await store.logins.deleteExpired(3000), 1);
        assert.equal(await store.logins.take("edge", 2500), undefined, "deleted");
        assert.equal((await store.logins.take("new", 3000))?.state, "new");
      }));

    test("bounded: at max, the ones that expire first make room; put replaces a login with the same state", () =>
      withStore(factory, async ({ store }) => {
        await store.logins.put(login("a", 1000), 3);
        await store.logins.put(login("b", 1001), 3);
        await store.logins.put(login("c", 1002), 3);
        await store.logins.put({ ...login("c", 1002), next: "/console/tasks" }, 3);
        assert.equal(await store.logins.count(), 3, "a replaced state does not count twice");
        await store.logins.put(login("d", 1003), 3);
        assert.equal(await store.logins.count(), 3);
        assert.equal(await store.logins.take("a", 1004), undefined, "the first to expire was dropped");
        assert.equal((await store.logins.take("c", 1004))?.next, "/console/tasks");
        assert.ok(await store.logins.take("b", 1004));
        assert.ok(await store.logins.take("d", 1004));
      }));

    test("put sweeps what expired by the new login's creation", () =>
      withStore(factory, async ({ store }) => {
        await store.logins.put(login("a", 1000, 100), 10);
        await store.logins.put(login("b", 5000), 10);
        assert.equal(await store.logins.count(), 1);
      }));
  });
}
