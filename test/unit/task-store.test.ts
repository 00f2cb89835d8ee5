import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { MemoryTaskRecordStore, TERMINAL_STATUSES, type ProxyTaskRecord } from "../../src/store/task-store.js";

function record(taskId: string, sessionId: string, patch: Partial<ProxyTaskRecord> = {}): ProxyTaskRecord {
  return {
    taskId,
    sessionId,
    server: "srv",
    toolName: "tool",
    toolArgs: {},
    status: "working",
    createdAt: 1,
    lastUpdatedAt: 1,
    ttlMs: 1000,
    expiresAt: 1001,
    ...patch,
  };
}

describe("MemoryTaskRecordStore", () => {
  test("put then get returns the record; unknown ids are undefined", () => {
    const store = new MemoryTaskRecordStore();
    const r = record("01A", "s1");
    store.put(r);
    assert.deepEqual(store.get("01A"), r);
    assert.equal(store.get("nope"), undefined);
    assert.equal(store.size, 1);
  });

  test("put with an existing id replaces the record without duplicating it", () => {
    const store = new MemoryTaskRecordStore();
    store.put(record("01A", "s1"));
    store.put(record("01A", "s1", { status: "completed", lastUpdatedAt: 5 }));
    assert.equal(store.size, 1);
    assert.equal(store.get("01A")?.status, "completed");
    const listed = store.listBySession("s1");
    assert.equal(listed.length, 1);
    assert.equal(listed[0]?.status, "completed");
  });

  test("delete removes the record from get and listBySession; deleting twice is harmless", () => {
    const store = new MemoryTaskRecordStore();
    store.put(record("01A", "s1"));
    store.put(record("01B", "s1"));
    store.delete("01A");
    assert.equal(store.get("01A"), undefined);
    assert.deepEqual(
      store.listBySession("s1").map((r) => r.taskId),
      ["01B"],
    );
    store.delete("01A");
    store.delete("never");
    assert.equal(store.size, 1);
    store.delete("01B");
    assert.deepEqual(store.listBySession("s1"), []);
    assert.equal(store.size, 0);
  });

  test("listBySession is oldest first (by time-sortable id), whatever the insertion order", () => {
    const store = new MemoryTaskRecordStore();
    for (const id of ["01C", "01A", "01D", "01B"]) store.put(record(id, "s1"));
    assert.deepEqual(
      store.listBySession("s1").map((r) => r.taskId),
      ["01A", "01B", "01C", "01D"],
    );
  });

  test("listBySession is scoped to one session", () => {
    const store = new MemoryTaskRecordStore();
    store.put(record("01A", "s1"));
    store.put(record("01B", "s2"));
    store.put(record("01C", "s1"));
    assert.deepEqual(
      store.listBySession("s1").map((r) => r.taskId),
      ["01A", "01C"],
    );
    assert.deepEqual(
      store.listBySession("s2").map((r) => r.taskId),
      ["01B"],
    );
    assert.deepEqual(store.listBySession("s3"), []);
    for (const r of store.listBySession("s1")) assert.equal(r.sessionId, "s1");
  });

  test("records are plain JSON and survive a JSON round trip", () => {
    const store = new MemoryTaskRecordStore();
    const r = record("01A", "s1", {
      status: "completed",
      result: { content: [{ type: "text", text: "ok" }] },
      progress: { progress: 1, total: 2 },
    });
    store.put(r);
    assert.deepEqual(JSON.parse(JSON.stringify(store.get("01A"))), r);
  });

  test("TERMINAL_STATUSES lists every status except working", () => {
    assert.deepEqual([...TERMINAL_STATUSES].sort(), ["cancelled", "completed", "expired", "failed"]);
  });
});
