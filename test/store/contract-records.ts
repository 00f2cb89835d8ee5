/** Contract cases for SessionStore, PendingRequestStore, ServerStore and the Store bundle's lifecycle; see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { ServerRecord } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { event, pending, rejectsWith, session, task, withStore } from "./fixtures.js";

function requestIds(records: ReadonlyArray<{ requestId: string }>): string[] {
  return records.map((r) => r.requestId);
}

export function recordContract(factory: StoreFactory): void {
  describe("sessions", () => {
    test("put, get, update (merging top-level fields), delete", () =>
      withStore(factory, async ({ store }) => {
        const s = session("S1", {
          face: { kind: "server", server: "everything" },
          logLevel: "debug",
          subscriptions: { everything: ["demo://resource/static/document/1"] },
          upstreamSessionIds: { remote: "mcp-123" },
        });
        await store.sessions.put(s);
        assert.deepEqual(await store.sessions.get("S1"), s);
        assert.equal(await store.sessions.get("S2"), undefined);
        const updated = await store.sessions.update("S1", { upstreamSessionIds: { remote: "mcp-456" }, logLevel: "warning" });
        assert.deepEqual(updated, { ...s, upstreamSessionIds: { remote: "mcp-456" }, logLevel: "warning" });
        assert.deepEqual(await store.sessions.get("S1"), updated);
        assert.equal(await store.sessions.update("S2", { logLevel: "info" }), undefined);
        assert.equal(await store.sessions.get("S2"), undefined, "update never creates");
        await store.sessions.put({ ...s, protocolVersion: "2025-06-18" });
        assert.equal((await store.sessions.get("S1"))?.protocolVersion, "2025-06-18", "put replaces");
        assert.equal(await store.sessions.delete("S1"), true);
        assert.equal(await store.sessions.delete("S1"), false);
        assert.equal(await store.sessions.get("S1"), undefined);
      }));

    test("touch sets lastActivityAt (the store's clock by default); listExpired is strict, oldest first, limited", () =>
      withStore(factory, async ({ store, clock }) => {
        await store.sessions.put(session("S1", { lastActivityAt: 100 }));
        await store.sessions.put(session("S2", { lastActivityAt: 300 }));
        await store.sessions.put(session("S3", { lastActivityAt: 200 }));
        assert.equal(await store.sessions.touch("S9"), false);
        assert.deepEqual(
          (await store.sessions.listExpired(300)).map((s) => s.sessionId),
          ["S1", "S3"],
        );
        assert.deepEqual(
          (await store.sessions.listExpired(1000, 2)).map((s) => s.sessionId),
          ["S1", "S3"],
        );
        assert.equal(await store.sessions.touch("S1", 400), true);
        assert.equal((await store.sessions.get("S1"))?.lastActivityAt, 400);
        assert.deepEqual(
          (await store.sessions.listExpired(1000)).map((s) => s.sessionId),
          ["S3", "S2", "S1"],
        );
        clock.advance(5000);
        assert.equal(await store.sessions.touch("S3"), true);
        assert.equal((await store.sessions.get("S3"))?.lastActivityAt, clock.now());
        assert.deepEqual(
          (await store.sessions.listExpired(clock.now())).map((s) => s.sessionId),
          ["S2", "S1"],
        );
      }));
  });

  describe("pending requests", () => {
    test("put, get, list by session (oldest first, filtered), listAll; another session's requests are not listed", () =>
      withStore(factory, async ({ store }) => {
        await store.pending.put(pending("r3", "s1", { createdAt: 300, kind: "sampling", params: { messages: [], maxTokens: 10 } }));
        await store.pending.put(pending("r1", "s1", { createdAt: 100, taskId: "01T" }));
        await store.pending.put(pending("r2", "s1", { createdAt: 200, server: "other" }));
        await store.pending.put(pending("r4", "s2", { createdAt: 50 }));
        assert.deepEqual(await store.pending.get("r1"), pending("r1", "s1", { createdAt: 100, taskId: "01T" }));
        assert.equal(await store.pending.get("r9"), undefined);
        assert.deepEqual(requestIds(await store.pending.listBySession("s1")), ["r1", "r2", "r3"]);
        assert.deepEqual(requestIds(await store.pending.listBySession("s1", { kind: "elicitation" })), ["r1", "r2"]);
        assert.deepEqual(requestIds(await store.pending.listBySession("s1", { kind: "elicitation", server: "srv" })), ["r1"]);
        assert.deepEqual(requestIds(await store.pending.listBySession("s2")), ["r4"]);
        assert.deepEqual(requestIds(await store.pending.listAll()), ["r4", "r1", "r2", "r3"]);
        await store.pending.put(pending("r1", "s1", { createdAt: 100, server: "moved" }));
        assert.equal((await store.pending.get("r1"))?.server, "moved", "put replaces");
        assert.equal((await store.pending.listAll()).length, 4);
      }));

    test("delete is true for exactly one of several concurrent callers (whoever deletes it answers it)", () =>
      withStore(factory, async ({ store }) => {
        await store.pending.put(pending("r1"));
        const results = await Promise.all([store.pending.delete("r1"), store.pending.delete("r1"), store.pending.delete("r1")]);
        assert.deepEqual(
          results.filter((r) => r),
          [true],
        );
        assert.equal(await store.pending.get("r1"), undefined);
        assert.deepEqual(await store.pending.listBySession("s1"), []);
      }));

    test("deleteExpired returns and removes what expired (absolute times); deleteBySession one session's", () =>
      withStore(factory, async ({ store }) => {
        await store.pending.put(pending("r1", "s1", { createdAt: 1, expiresAt: 1000 }));
        await store.pending.put(pending("r2", "s2", { createdAt: 2, expiresAt: 999 }));
        await store.pending.put(pending("r3", "s1", { createdAt: 3, expiresAt: 1001 }));
        await store.pending.put(pending("r4", "s1", { createdAt: 4, expiresAt: 5000 }));
        assert.deepEqual(requestIds(await store.pending.deleteExpired(1000)), ["r1", "r2"]);
        assert.deepEqual(requestIds(await store.pending.listAll()), ["r3", "r4"]);
        await store.pending.put(pending("r5", "s2"));
        assert.equal(await store.pending.deleteBySession("s1"), 2);
        assert.deepEqual(requestIds(await store.pending.listAll()), ["r5"]);
      }));
  });

  describe("runtime-added servers", () => {
    const remote = (name: string, addedAt: number, url = "http://127.0.0.1:9/mcp"): ServerRecord => ({
      name,
      config: { url, headers: { Authorization: "Bearer x" } },
      addedAt,
      addedBy: "S1",
    });

    test("put, get, list in the order added, replace, and delete for good", () =>
      withStore(factory, async ({ store }) => {
        const stdio: ServerRecord = { name: "fs", config: { command: "npx", args: ["-y", "server-fs", "/tmp"], env: { A: "1" } }, addedAt: 300, addedBy: "S2" };
        await store.servers.put(remote("b", 200));
        await store.servers.put(stdio);
        await store.servers.put(remote("a", 100));
        assert.deepEqual(await store.servers.get("fs"), stdio);
        assert.equal(await store.servers.get("zz"), undefined);
        assert.deepEqual(
          (await store.servers.list()).map((s) => s.name),
          ["a", "b", "fs"],
        );
        await store.servers.put(remote("a", 100, "http://127.0.0.1:10/mcp"));
        assert.deepEqual((await store.servers.get("a"))?.config, { url: "http://127.0.0.1:10/mcp", headers: { Authorization: "Bearer x" } });
        assert.equal((await store.servers.list()).length, 3);
        assert.equal(await store.servers.delete("b"), true);
        assert.equal(await store.servers.delete("b"), false);
        assert.deepEqual(
          (await store.servers.list()).map((s) => s.name),
          ["a", "fs"],
        );
      }));
  });

  describe("lifecycle", () => {
    test("healthy until closed; close is idempotent; afterwards every kind fails with EMCP_CLOSED", async () => {
      const { store, cleanup } = await factory();
      try {
        assert.equal(await store.healthy(), true);
        await store.close();
        await store.close();
        assert.equal(await store.healthy(), false);
        await rejectsWith(store.tasks.create(task("01A")), "EMCP_CLOSED");
        await rejectsWith(store.tasks.get("01A"), "EMCP_CLOSED");
        await rejectsWith(store.sessions.put(session("S1")), "EMCP_CLOSED");
        await rejectsWith(store.events.append("A", event(), { maxPerSession: 10, maxTotal: 10 }), "EMCP_CLOSED");
        await rejectsWith(store.events.takeUndelivered("A"), "EMCP_CLOSED");
        await rejectsWith(store.pending.listAll(), "EMCP_CLOSED");
        await rejectsWith(store.replay.append("A", "s", {}, { maxEvents: 1, maxBytes: 10 }), "EMCP_CLOSED");
        await rejectsWith(store.servers.list(), "EMCP_CLOSED");
      } finally {
        await cleanup?.();
      }
    });
  });
}
