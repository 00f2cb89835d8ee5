/** Contract cases for LeaseStore (short exclusive holds shared by replicas); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";
import { waitFor } from "../helpers/tasks.js";

export function leaseContract(factory: StoreFactory): void {
  describe("leases", () => {
    test("one holder at a time per key; only the holder gives it back; then another takes it", () =>
      withStore(factory, async ({ store }) => {
        const now = Date.now();
        assert.equal(await store.leases.acquire("refresh:a", "r1", now, 60_000), true);
        assert.equal(await store.leases.acquire("refresh:a", "r2", now, 60_000), false);
        assert.equal(await store.leases.acquire("refresh:a", "r1", now, 60_000), false, "not re-entrant: a second job of the same holder waits too");
        assert.equal(await store.leases.acquire("refresh:b", "r2", now, 60_000), true, "another key is free");
        assert.equal(await store.leases.release("refresh:a", "r2"), false, "not the holder");
        assert.equal(await store.leases.acquire("refresh:a", "r2", now, 60_000), false);
        assert.equal(await store.leases.release("refresh:a", "r1"), true);
        assert.equal(await store.leases.release("refresh:a", "r1"), false, "given back once");
        assert.equal(await store.leases.acquire("refresh:a", "r2", now, 60_000), true);
      }));

    test("a hold lapses at its expiry (its holder died): another takes it, and the old holder's release does nothing", () =>
      withStore(factory, async ({ store }) => {
        assert.equal(await store.leases.acquire("k", "dead", Date.now(), 300), true);
        assert.equal(await store.leases.acquire("k", "next", Date.now(), 60_000), false);
        // Real time (Redis times the hold on its own clock): polled until it has lapsed.
        await waitFor(async () => (await store.leases.acquire("k", "next", Date.now(), 60_000)) || undefined, "the lapsed lease taken", 15_000);
        assert.equal(await store.leases.release("k", "dead"), false);
        assert.equal(await store.leases.acquire("k", "third", Date.now(), 60_000), false, "still next's");
      }));

    test("the holder renews its hold (a heartbeat): it outlasts its first expiry, and lapses once the renewals stop", () =>
      withStore(factory, async ({ store }) => {
        const taken = Date.now();
        assert.equal(await store.leases.acquire("k", "alive", taken, 1_000), true);
        assert.equal(await store.leases.renew("k", "other", Date.now(), 60_000), false, "only the holder renews");
        assert.equal(await store.leases.renew("never-taken", "alive", Date.now(), 60_000), false, "nothing held: nothing to renew");
        assert.equal(await store.leases.renew("k", "alive", Date.now(), 60_000), true);
        // Real time past the first expiry (polled): the renewed hold is still there.
        await waitFor(async () => (Date.now() > taken + 1_500 ? true : undefined), "the first expiry passed", 15_000);
        assert.equal(await store.leases.acquire("k", "next", Date.now(), 60_000), false, "renewed past its first expiry");
        // The holder stops renewing (it died): a short last renewal lapses and another takes it; a late renewal then fails.
        assert.equal(await store.leases.renew("k", "alive", Date.now(), 300), true);
        await waitFor(async () => (await store.leases.acquire("k", "next", Date.now(), 60_000)) || undefined, "the lapsed lease taken", 15_000);
        assert.equal(await store.leases.renew("k", "alive", Date.now(), 60_000), false, "taken over: the old holder's renewal does nothing");
        assert.equal(await store.leases.release("k", "next"), true);
        assert.equal(await store.leases.renew("k", "next", Date.now(), 60_000), false, "given back: not renewed");
      }));
  });
}
