/** Contract cases for DecisionStore (governance decision records, the audit trail); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { DecisionRecord } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

function decision(id: string, at: number, patch: Partial<DecisionRecord> = {}): DecisionRecord {
  return {
    id,
    at,
    outcome: "allow",
    profile: "enforce",
    decidedBy: "rule",
    principalHash: "0123456789abcdef",
    face: "meta",
    sessionHash: "89abcdef",
    server: "fs",
    tool: "read_file",
    argumentsDigest: "ab".repeat(32),
    ruleId: "r1",
    policyVersion: "fedcba9876543210",
    ...patch,
  };
}

const KEEP = { maxAgeMs: 1_000_000, maxRecords: 1000 };

export function decisionContract(factory: StoreFactory): void {
  describe("governance decisions", () => {
    test("append keeps each record as written; list is oldest first, from `since`, at most `limit`", () =>
      withStore(factory, async ({ store }) => {
        const b = decision("02", 2000, { outcome: "deny", policyIds: ["p1", "p2"], error: "boom", arguments: { a: [1, "x"] } });
        await store.decisions.append(decision("01", 1000), KEEP);
        await store.decisions.append(b, KEEP);
        await store.decisions.append(decision("03", 3000, { outcome: "would_deny", profile: "dry-run" }), KEEP);
        assert.equal(await store.decisions.count(), 3);
        assert.deepEqual(
          (await store.decisions.list()).map((d) => d.id),
          ["01", "02", "03"],
        );
        assert.deepEqual((await store.decisions.list({ since: 2000 }))[0], b);
        assert.deepEqual(
          (await store.decisions.list({ since: 1500, limit: 1 })).map((d) => d.id),
          ["02"],
        );
      }));

    test("retention: records at or before at - maxAgeMs are deleted, then the oldest beyond maxRecords", () =>
      withStore(factory, async ({ store }) => {
        for (let i = 1; i <= 5; i++) await store.decisions.append(decision(`0${i}`, i * 1000), { maxAgeMs: 3000, maxRecords: 100 });
        // at 5000, maxAgeMs 3000: 1000 and 2000 are gone.
        assert.deepEqual(
          (await store.decisions.list()).map((d) => d.id),
          ["03", "04", "05"],
        );
        await store.decisions.append(decision("06", 6000), { maxAgeMs: 100_000, maxRecords: 2 });
        assert.deepEqual(
          (await store.decisions.list()).map((d) => d.id),
          ["05", "06"],
        );
        assert.equal(await store.decisions.count(), 2);
      }));
  });
}
