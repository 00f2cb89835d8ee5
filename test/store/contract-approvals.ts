/** Contract cases for ApprovalStore (tool calls waiting for a person's decision); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { ApprovalRecord } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

function approval(id: string, createdAt: number, patch: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    id,
    taskId: `t-${id}`,
    sessionId: "s1",
    face: "meta",
    requester: { hash: "0123456789abcdef", issuer: "urn:x", subject: "alice" },
    server: "fs",
    tool: "delete_file",
    arguments: { path: "/tmp/x", nested: { a: [1, "b"] } },
    argumentsDigest: "ab".repeat(32),
    policyVersion: "fedcba9876543210",
    ruleId: "r1",
    createdAt,
    expiresAt: createdAt + 60_000,
    state: "pending",
    ...patch,
  };
}

export function approvalContract(factory: StoreFactory): void {
  describe("approvals", () => {
    test("create, get as written; list oldest first, by state, at most limit", () =>
      withStore(factory, async ({ store }) => {
        const a = approval("a", 2000);
        await store.approvals.create(a);
        await store.approvals.create(approval("b", 1000, { state: "rejected", decidedBy: "bob", decidedAt: 1500, reason: "no" }));
        await store.approvals.create(approval("c", 3000));
        assert.deepEqual(await store.approvals.get("a"), a);
        assert.equal(await store.approvals.get("nope"), undefined);
        assert.deepEqual(
          (await store.approvals.list()).map((r) => r.id),
          ["b", "a", "c"],
        );
        assert.deepEqual(
          (await store.approvals.list({ states: ["pending"] })).map((r) => r.id),
          ["a", "c"],
        );
        assert.deepEqual(
          (await store.approvals.list({ states: ["pending"], limit: 1 })).map((r) => r.id),
          ["a"],
        );
        assert.deepEqual(await store.approvals.list({ states: [] }), []);
      }));

    test("update is a compare-and-set on the state: one of two racing decisions wins, the loser changes nothing", () =>
      withStore(factory, async ({ store }) => {
        await store.approvals.create(approval("a", 1000));
        const [x, y] = await Promise.all([
          store.approvals.update("a", { state: "approved", decidedBy: "bob", decidedAt: 2000 }, { ifState: ["pending"] }),
          store.approvals.update("a", { state: "rejected", decidedBy: "carol", decidedAt: 2001, reason: "no" }, { ifState: ["pending"] }),
        ]);
        assert.equal([x, y].filter((r) => r !== undefined).length, 1);
        const won = (x ?? y)!;
        assert.deepEqual(await store.approvals.get("a"), won);
        assert.equal(await store.approvals.update("a", { state: "expired" }, { ifState: ["pending"] }), undefined);
        assert.equal(await store.approvals.update("nope", { state: "expired" }, { ifState: ["pending"] }), undefined);
      }));

    test("a claim succeeds once (ifUnclaimed); unset drops the arguments", () =>
      withStore(factory, async ({ store }) => {
        await store.approvals.create(approval("a", 1000, { state: "approved", decidedBy: "bob", decidedAt: 1500 }));
        const claims = await Promise.all(
          [1, 2, 3].map((n) => store.approvals.update("a", { claimedAt: 2000 + n }, { ifState: ["approved"], ifUnclaimed: true })),
        );
        assert.equal(claims.filter((c) => c !== undefined).length, 1);
        const done = await store.approvals.update("a", {}, { ifState: ["approved"], unset: ["arguments"] });
        assert.ok(done);
        assert.equal("arguments" in done, false);
        assert.equal("arguments" in (await store.approvals.get("a"))!, false);
        assert.equal((await store.approvals.get("a"))!.argumentsDigest, "ab".repeat(32));
      }));

    test("deleteEndedBefore keeps pending ones and newer ones", () =>
      withStore(factory, async ({ store }) => {
        await store.approvals.create(approval("old-pending", 1000));
        await store.approvals.create(approval("old-ended", 1000, { state: "expired" }));
        await store.approvals.create(approval("new-ended", 5000, { state: "approved" }));
        assert.equal(await store.approvals.deleteEndedBefore(2000), 1);
        assert.deepEqual(
          (await store.approvals.list()).map((r) => r.id),
          ["old-pending", "new-ended"],
        );
      }));
  });
}
