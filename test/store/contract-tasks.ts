/** Contract cases for TaskStore (see contract.ts). */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { StoreFactory } from "./contract.js";
import { ids, rejectsWith, task, withStore } from "./fixtures.js";

export function taskContract(factory: StoreFactory): void {
  describe("tasks", () => {
    test("create then get returns an equal copy; unknown ids are undefined; undefined fields vanish as in JSON", () =>
      withStore(factory, async ({ store }) => {
        const r = task("01A", "s1", { statusMessage: undefined, progress: { progress: 1, total: 2 } } as never);
        await store.tasks.create(r);
        const got = await store.tasks.get("01A");
        assert.deepEqual(got, JSON.parse(JSON.stringify(r)));
        assert.equal("statusMessage" in got!, false);
        assert.equal(await store.tasks.get("nope"), undefined);
        // A returned record is a copy: changing it changes nothing stored.
        got!.status = "failed";
        (got!.toolArgs as { n: number }).n = 99;
        r.toolArgs.n = 42;
        const again = await store.tasks.get("01A");
        assert.equal(again?.status, "working");
        assert.deepEqual(again?.toolArgs, { n: 1 });
      }));

    test("create with an existing id fails with EMCP_INTERNAL and keeps the first record", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01A", "s1", { toolName: "first" }));
        const err = await rejectsWith(store.tasks.create(task("01A", "s2", { toolName: "second" })), "EMCP_INTERNAL");
        assert.match(err.message, /01A/);
        assert.equal((await store.tasks.get("01A"))?.toolName, "first");
        assert.deepEqual(ids(await store.tasks.listBySession("s2")), []);
      }));

    test("transition is compare-and-set: it moves only from the listed statuses and never overwrites another path's end", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01A"));
        const cancelled = await store.tasks.transition("01A", {
          from: ["working"],
          to: "cancelled",
          patch: { statusMessage: "by client", lastUpdatedAt: 2000 },
        });
        assert.equal(cancelled?.status, "cancelled");
        assert.equal(cancelled?.statusMessage, "by client");
        assert.equal(cancelled?.lastUpdatedAt, 2000);
        const late = await store.tasks.transition("01A", { from: ["working"], to: "completed", patch: { result: { content: [] }, resultBytes: 14 } });
        assert.equal(late, undefined, "working → completed must not overwrite cancelled");
        const stored = await store.tasks.get("01A");
        assert.equal(stored?.status, "cancelled");
        assert.equal(stored?.result, undefined);
        assert.equal(await store.tasks.transition("nope", { from: ["working"], to: "failed" }), undefined);
        // A status may move to itself (a guarded update), and from several.
        await store.tasks.create(task("01B", "s1", { status: "input_required" }));
        assert.equal((await store.tasks.transition("01B", { from: ["working", "input_required"], to: "working" }))?.status, "working");
      }));

    test("concurrent transitions from working: exactly one wins, and the stored record is the winner's", () =>
      withStore(factory, async ({ store }) => {
        const n = 40;
        for (let i = 0; i < n; i++) await store.tasks.create(task(`01R${String(i).padStart(3, "0")}`));
        for (let i = 0; i < n; i++) {
          const id = `01R${String(i).padStart(3, "0")}`;
          const outcomes = await Promise.all([
            store.tasks.transition(id, { from: ["working"], to: "completed", patch: { result: { ok: true }, resultBytes: 11 } }),
            store.tasks.transition(id, { from: ["working"], to: "cancelled", patch: { statusMessage: "cancel" } }),
            store.tasks.transition(id, { from: ["working"], to: "expired", patch: { error: "ttl" } }),
          ]);
          const winners = outcomes.filter((o) => o !== undefined);
          assert.equal(winners.length, 1, `task ${id}: ${winners.length} transitions won`);
          assert.deepEqual(await store.tasks.get(id), winners[0]);
        }
      }));

    test("transition and patch remove `unset` fields; patch keeps the status and honours ifStatus", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01A", "s1", { statusMessage: "waiting for the client" }));
        const p = await store.tasks.patch("01A", { progress: { progress: 3, total: 10, message: "3/10" }, lastUpdatedAt: 1500 });
        assert.equal(p?.status, "working");
        assert.deepEqual(p?.progress, { progress: 3, total: 10, message: "3/10" });
        assert.equal(p?.statusMessage, "waiting for the client");
        const done = await store.tasks.transition("01A", { from: ["working"], to: "completed", patch: { result: { x: 1 } }, unset: ["statusMessage"] });
        assert.equal(done && "statusMessage" in done, false);
        assert.equal("statusMessage" in (await store.tasks.get("01A"))!, false);
        assert.equal(await store.tasks.patch("01A", { progress: { progress: 9 } }, { ifStatus: ["working"] }), undefined);
        assert.deepEqual((await store.tasks.get("01A"))?.progress, { progress: 3, total: 10, message: "3/10" });
        assert.equal((await store.tasks.patch("01A", { retainUntil: 9000 }))?.retainUntil, 9000);
        assert.equal(await store.tasks.patch("nope", { retainUntil: 1 }), undefined);
      }));

    test("delete removes one task and says whether it existed", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01A"));
        assert.equal(await store.tasks.delete("01A"), true);
        assert.equal(await store.tasks.delete("01A"), false);
        assert.equal(await store.tasks.get("01A"), undefined);
        assert.deepEqual(await store.tasks.listBySession("s1"), []);
      }));

    test("listBySession: taskId order whatever the insertion order, filters, paging, and no other session's tasks", () =>
      withStore(factory, async ({ store }) => {
        for (const id of ["01E", "01B", "01D", "01A", "01C"]) await store.tasks.create(task(id, "s1", { server: id < "01C" ? "a" : "b" }));
        await store.tasks.create(task("01F", "s1", { kind: "receiver", toolName: "sampling/createMessage" }));
        await store.tasks.create(task("01AA", "s2"));
        await store.tasks.transition("01D", { from: ["working"], to: "failed" });
        await store.tasks.transition("01B", { from: ["working"], to: "input_required" });
        assert.deepEqual(ids(await store.tasks.listBySession("s1")), ["01A", "01B", "01C", "01D", "01E", "01F"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s2")), ["01AA"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s3")), []);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { kind: "tool" })), ["01A", "01B", "01C", "01D", "01E"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { kind: "receiver" })), ["01F"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { server: "a" })), ["01A", "01B"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { status: ["working"], kind: "tool" })), ["01A", "01C", "01E"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { status: ["failed", "input_required"] })), ["01B", "01D"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { status: [] })), []);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { limit: 2 })), ["01A", "01B"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { afterTaskId: "01B", limit: 2 })), ["01C", "01D"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1", { afterTaskId: "01F" })), []);
      }));

    test("findByUpstreamTask finds by (session, server, upstream id) and follows patches and deletes", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01A", "s1", { server: "a", upstreamTaskId: "up-1", upstreamSessionId: "mcp-sess-9" }));
        await store.tasks.create(task("01B", "s2", { server: "a", upstreamTaskId: "up-1" }));
        await store.tasks.create(task("01C", "s1", { server: "b", upstreamTaskId: "up-1" }));
        const found = await store.tasks.findByUpstreamTask("s1", "a", "up-1");
        assert.equal(found?.taskId, "01A");
        assert.equal(found?.upstreamSessionId, "mcp-sess-9");
        assert.equal((await store.tasks.findByUpstreamTask("s2", "a", "up-1"))?.taskId, "01B");
        assert.equal((await store.tasks.findByUpstreamTask("s1", "b", "up-1"))?.taskId, "01C");
        assert.equal(await store.tasks.findByUpstreamTask("s1", "a", "up-2"), undefined);
        assert.equal(await store.tasks.findByUpstreamTask("s3", "a", "up-1"), undefined);
        await store.tasks.patch("01A", { upstreamTaskId: "up-2" });
        assert.equal(await store.tasks.findByUpstreamTask("s1", "a", "up-1"), undefined);
        assert.equal((await store.tasks.findByUpstreamTask("s1", "a", "up-2"))?.taskId, "01A");
        await store.tasks.delete("01A");
        assert.equal(await store.tasks.findByUpstreamTask("s1", "a", "up-2"), undefined);
      }));

    test("listWorking: every working and input_required task of every session, in taskId order", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01C", "s2"));
        await store.tasks.create(task("01A", "s1"));
        await store.tasks.create(task("01B", "s1", { status: "input_required" }));
        await store.tasks.create(task("01D", "s1", { kind: "receiver" }));
        await store.tasks.create(task("01E", "s1"));
        await store.tasks.transition("01E", { from: ["working"], to: "completed" });
        assert.deepEqual(ids(await store.tasks.listWorking()), ["01A", "01B", "01C", "01D"]);
        await store.tasks.transition("01A", { from: ["working"], to: "expired" });
        assert.deepEqual(ids(await store.tasks.listWorking()), ["01B", "01C", "01D"]);
      }));

    test("deleteExpired deletes exactly the tasks whose retainUntil has come (absolute times) and says which", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01A", "s1", { retainUntil: 5000 }));
        await store.tasks.create(task("01B", "s2", { retainUntil: 4999 }));
        await store.tasks.create(task("01C", "s1", { retainUntil: 5001 }));
        await store.tasks.create(task("01D", "s1"));
        assert.deepEqual(await store.tasks.deleteExpired(4000), []);
        assert.deepEqual(await store.tasks.deleteExpired(5000), [
          { taskId: "01A", sessionId: "s1" },
          { taskId: "01B", sessionId: "s2" },
        ]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1")), ["01C", "01D"]);
        await store.tasks.transition("01D", { from: ["working"], to: "completed", patch: { retainUntil: 6000 } });
        assert.deepEqual(await store.tasks.deleteExpired(10_000), [
          { taskId: "01C", sessionId: "s1" },
          { taskId: "01D", sessionId: "s1" },
        ]);
        assert.equal(await store.tasks.get("01C"), undefined);
      }));

    test("enforceRetention deletes the oldest ended tasks beyond the count and byte bounds, never working ones or `keep`", () =>
      withStore(factory, async ({ store }) => {
        // Ended in this order (lastUpdatedAt): 01C, 01A, 01B, 01E; 01D still working; 01F a receiver task.
        const ended: Array<[string, number, number]> = [
          ["01A", 2000, 100],
          ["01B", 3000, 100],
          ["01C", 1500, 100],
          ["01E", 4000, 700],
        ];
        for (const [id, at, bytes] of ended) {
          await store.tasks.create(task(id));
          await store.tasks.transition(id, { from: ["working"], to: "completed", patch: { lastUpdatedAt: at, resultBytes: bytes, result: { id } } });
        }
        await store.tasks.create(task("01D"));
        await store.tasks.create(task("01F", "s1", { kind: "receiver", status: "completed", lastUpdatedAt: 1 }));
        await store.tasks.create(task("01Z", "s2", { status: "completed", lastUpdatedAt: 1 }));
        assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 10, maxBytes: 10_000 }), []);
        assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 3, maxBytes: 10_000 }), ["01C"]);
        // 01A, 01B, 01E = 900 bytes; at most 800: the oldest go first, but never `keep`.
        assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 10, maxBytes: 800, keep: "01A" }), ["01B"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s1")), ["01A", "01D", "01E", "01F"]);
        assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 1, maxBytes: 10_000, keep: "01E" }), ["01A"]);
        assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 1, maxBytes: 100 }), ["01E"]);
        assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 1, maxBytes: 1, kind: "receiver" }), []);
        assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 1, maxBytes: 1 }), []);
        assert.deepEqual(ids(await store.tasks.listBySession("s1")), ["01D", "01F"]);
        assert.deepEqual(ids(await store.tasks.listBySession("s2")), ["01Z"], "another session's tasks are untouched");
      }));

    test("deleteBySession deletes that session's tasks only", () =>
      withStore(factory, async ({ store }) => {
        await store.tasks.create(task("01A", "s1", { upstreamTaskId: "u" }));
        await store.tasks.create(task("01B", "s1", { status: "completed" }));
        await store.tasks.create(task("01C", "s2"));
        assert.equal(await store.tasks.deleteBySession("s1"), 2);
        assert.equal(await store.tasks.deleteBySession("s1"), 0);
        assert.deepEqual(ids(await store.tasks.listWorking()), ["01C"]);
        assert.equal(await store.tasks.findByUpstreamTask("s1", "srv", "u"), undefined);
        assert.equal((await store.tasks.get("01C"))?.sessionId, "s2");
      }));
  });
}
