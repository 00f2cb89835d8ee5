/** Contract cases for ActivityStore (the console's Activity page: what happened, filtered, newest first, bounded); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { ActivityRecord } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

function activity(id: string, at: number, patch: Partial<ActivityRecord> = {}): ActivityRecord {
  return { id, at, kind: "tool_call", outcome: "ok", server: "fs", tool: "read_file", sessionHash: "aaaaaaaa", principalHash: "p1", durationMs: 12, ...patch };
}

const KEEP = (now: number) => ({ now, maxAgeMs: 1_000_000, maxRecords: 1000 });

export function activityContract(factory: StoreFactory): void {
  describe("activity", () => {
    test("append keeps each record as written; list is newest first, filtered by every given field, at most `limit`", () =>
      withStore(factory, async ({ store }) => {
        const b = activity("02", 2000, { kind: "elicitation", outcome: "answered", summary: "answered in the console", taskId: "t1" });
        delete b.tool;
        await store.activity.append([activity("01", 1000), b], KEEP(2000));
        await store.activity.append([activity("03", 3000, { server: "web", outcome: "error", sessionHash: "bbbbbbbb", principalHash: "p2" })], KEEP(3000));
        assert.equal(await store.activity.count(), 3);
        const ids = async (q: Parameters<typeof store.activity.list>[0]) => (await store.activity.list(q)).map((r) => r.id);
        assert.deepEqual(await ids({ limit: 10 }), ["03", "02", "01"]);
        assert.deepEqual((await store.activity.list({ limit: 10, kind: "elicitation" }))[0], b);
        assert.deepEqual(await ids({ limit: 10, server: "fs" }), ["02", "01"]);
        assert.deepEqual(await ids({ limit: 10, sessionHash: "bbbbbbbb" }), ["03"]);
        assert.deepEqual(await ids({ limit: 10, principalHash: "p1" }), ["02", "01"]);
        assert.deepEqual(await ids({ limit: 10, outcome: "ok" }), ["01"]);
        assert.deepEqual(await ids({ limit: 10, taskId: "t1" }), ["02"]);
        assert.deepEqual(await ids({ limit: 10, since: 2000 }), ["03", "02"]);
        assert.deepEqual(await ids({ limit: 1 }), ["03"]);
        assert.deepEqual(await ids({ limit: 10, kind: "config_reload" }), []);
      }));

    test("pages: `before` (at, id) continues where the last page ended, also within one millisecond", () =>
      withStore(factory, async ({ store }) => {
        const batch = ["a1", "a2", "a3", "a4", "a5"].map((id, i) => activity(id, i < 3 ? 1000 : 2000));
        await store.activity.append(batch, KEEP(2000));
        const first = await store.activity.list({ limit: 2 });
        assert.deepEqual(
          first.map((r) => r.id),
          ["a5", "a4"],
        );
        const last = first.at(-1)!;
        const second = await store.activity.list({ limit: 2, before: { at: last.at, id: last.id } });
        assert.deepEqual(
          second.map((r) => r.id),
          ["a3", "a2"],
        );
        const third = await store.activity.list({ limit: 2, before: { at: 1000, id: "a2" } });
        assert.deepEqual(
          third.map((r) => r.id),
          ["a1"],
        );
      }));

    test("retention: records at or before now - maxAgeMs are deleted, then the oldest beyond maxRecords", () =>
      withStore(factory, async ({ store }) => {
        for (let i = 1; i <= 5; i++) await store.activity.append([activity(`0${i}`, i * 1000)], { now: i * 1000, maxAgeMs: 3000, maxRecords: 100 });
        assert.deepEqual(
          (await store.activity.list({ limit: 10 })).map((r) => r.id),
          ["05", "04", "03"],
        );
        await store.activity.append([activity("06", 6000), activity("07", 6001)], { now: 6001, maxAgeMs: 100_000, maxRecords: 2 });
        assert.deepEqual(
          (await store.activity.list({ limit: 10 })).map((r) => r.id),
          ["07", "06"],
        );
        assert.equal(await store.activity.count(), 2);
        await store.activity.append([], { now: 1_000_000, maxAgeMs: 10, maxRecords: 2 });
        assert.equal(await store.activity.count(), 0, "an empty batch still applies the age bound");
      }));
  });
}
