/** Contract cases for DecisionStore (governance decision records, the audit trail); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { DecisionQuery, DecisionRecord } from "../../src/store/contracts.js";
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

function withoutPrincipal(r: DecisionRecord): DecisionRecord {
  delete r.principalHash;
  return r;
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

    test("query: every filter in the store, newest first by (at, id), at most `limit`", () =>
      withStore(factory, async ({ store }) => {
        const records = [
          decision("01", 1000),
          decision("02", 2000, { server: "web", tool: "fetch", outcome: "deny" }),
          decision("03", 3000, { principalHash: "fedcba9876543210", outcome: "approval_required" }),
          decision("04", 4000, { tool: "write_file", outcome: "deny" }),
          withoutPrincipal(decision("05", 5000)),
          decision("06", 5000, { outcome: "deny" }),
        ];
        for (const r of records) await store.decisions.append(r, KEEP);
        const ids = async (q: Partial<DecisionQuery>) => (await store.decisions.query({ limit: 100, ...q })).map((d) => d.id);
        assert.deepEqual(await ids({}), ["06", "05", "04", "03", "02", "01"]);
        assert.deepEqual(await ids({ limit: 2 }), ["06", "05"]);
        assert.deepEqual(await ids({ outcome: "deny" }), ["06", "04", "02"]);
        assert.deepEqual(await ids({ principalHash: "fedcba9876543210" }), ["03"]);
        assert.deepEqual(await ids({ principalHash: "0123456789abcdef" }), ["06", "04", "02", "01"], "a record without a principal matches no hash");
        assert.deepEqual(await ids({ server: "fs", tool: "read_file" }), ["06", "05", "03", "01"]);
        assert.deepEqual(await ids({ server: "web" }), ["02"]);
        assert.deepEqual(await ids({ tool: "write_file", outcome: "deny" }), ["04"]);
        assert.deepEqual(await ids({ since: 2000, until: 5000 }), ["04", "03", "02"], "since inclusive, until exclusive");
        assert.deepEqual(await ids({ outcome: "allow", until: 1000 }), []);
        assert.deepEqual((await store.decisions.query({ limit: 1, outcome: "approval_required" }))[0], records[2], "the record as written");
      }));

    test("query: the (at, id) cursor pages through every match once, records of one millisecond included", () =>
      withStore(factory, async ({ store }) => {
        const written: DecisionRecord[] = [];
        for (let i = 0; i < 23; i++) {
          // Several records share a millisecond; every third is another tool.
          const r = decision(`id${String(i).padStart(3, "0")}`, 1000 + Math.floor(i / 4), i % 3 === 0 ? { tool: "other" } : {});
          written.push(r);
          await store.decisions.append(r, KEEP);
        }
        const want = written
          .filter((r) => r.tool === "read_file")
          .map((r) => r.id)
          .reverse();
        const seen: string[] = [];
        let before: DecisionQuery["before"];
        for (let pages = 0; pages < 20; pages++) {
          const page = await store.decisions.query({ tool: "read_file", limit: 4, before });
          seen.push(...page.map((d) => d.id));
          if (page.length < 4) break;
          before = { at: page.at(-1)!.at, id: page.at(-1)!.id };
        }
        assert.deepEqual(seen, want);
      }));

    test("prune: the retention sweep deletes by age (at <= now - maxAgeMs), then the oldest beyond maxRecords, and says how many", () =>
      withStore(factory, async ({ store }) => {
        for (let i = 1; i <= 6; i++) await store.decisions.append(decision(`0${i}`, i * 1000), KEEP);
        assert.equal(await store.decisions.prune({ now: 10_000, maxAgeMs: 8000, maxRecords: 100 }), 2);
        assert.deepEqual(
          (await store.decisions.list()).map((d) => d.id),
          ["03", "04", "05", "06"],
        );
        assert.equal(await store.decisions.prune({ now: 10_000, maxAgeMs: 8000, maxRecords: 3 }), 1);
        assert.deepEqual(
          (await store.decisions.list()).map((d) => d.id),
          ["04", "05", "06"],
        );
        assert.equal(await store.decisions.prune({ now: 10_000, maxAgeMs: 8000, maxRecords: 3 }), 0, "nothing more to delete");
      }));
  });
}
