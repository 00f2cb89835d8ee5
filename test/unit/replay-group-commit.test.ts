/**
 * The SQLite replay store commits the SSE messages appended in one turn of
 * the event loop in one transaction (issue 27: one commit per message was
 * the largest store cost of a forwarded call): fewer WAL frames, the same
 * ids and messages, each id on disk before it is handed out, and the appends
 * of a turn still committed when the store closes in that turn.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { openSqliteDatabase } from "../../src/store/sqlite/driver.js";
import { openSqliteStore } from "../../src/store/sqlite/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const ROOT = mkdtempSync(path.join(os.tmpdir(), "emceepee-replay-group-"));
after(() => rmSync(ROOT, { recursive: true, force: true }));
const LIMITS = { maxEvents: 1000, maxBytes: 1 << 20 };
const message = (i: number) => ({ jsonrpc: "2.0", id: i, result: { content: [{ type: "text", text: `Echo: ${i}` }] } });

/** Frames in the file's WAL (a passive checkpoint's `log`), read through a connection of the test's own. */
function walFrames(file: string, truncate = false): number {
  const db = openSqliteDatabase(file);
  try {
    const [row] = db.pragma(`wal_checkpoint(${truncate ? "TRUNCATE" : "PASSIVE"})`) as Array<{ log: number }>;
    return row!.log;
  } finally {
    db.close();
  }
}

test("16 messages appended in one turn take one commit's WAL frames, with consecutive ids, in order, replayable", async () => {
  const file = path.join(ROOT, "group.db");
  const store = openSqliteStore(file, new ManualClock(0));
  try {
    await store.replay.append("s1", "stream-a", message(0), LIMITS);
    walFrames(file, true);
    const ids = await Promise.all(Array.from({ length: 16 }, (_, i) => store.replay.append("s1", "stream-a", message(i + 1), LIMITS)));
    assert.deepEqual(
      ids,
      Array.from({ length: 16 }, (_, i) => String(i + 2)),
    );
    // One commit writes each touched page once (the replay table's: a handful); sixteen commits wrote one or more each.
    const frames = walFrames(file);
    assert.ok(frames <= 8, `${frames} WAL frames for 16 appends in one turn`);
    const replayed = await store.replay.replayAfter("s1", "1");
    assert.deepEqual(
      replayed?.messages.map((m) => m.message),
      Array.from({ length: 16 }, (_, i) => message(i + 1)),
    );
    assert.deepEqual(await store.replay.size("s1"), { events: 17, bytes: sizes(17) });
  } finally {
    await store.close();
  }
});

test("appends of the turn the store closes in are committed before it closes", async () => {
  const file = path.join(ROOT, "close.db");
  const store = openSqliteStore(file, new ManualClock(0));
  const pending = [store.replay.append("s2", "st", message(1), LIMITS), store.replay.append("s3", "st", message(2), LIMITS)];
  await store.close();
  assert.deepEqual(await Promise.all(pending), ["1", "1"]);
  const reopened = openSqliteStore(file, new ManualClock(0));
  try {
    assert.deepEqual(
      (await reopened.replay.replayStream("s2", "st", 0)).messages.map((m) => m.message),
      [message(1)],
    );
    assert.deepEqual(
      (await reopened.replay.replayStream("s3", "st", 0)).messages.map((m) => m.message),
      [message(2)],
    );
  } finally {
    await reopened.close();
  }
});

test("an append refused for its limits (before queuing) leaves the others of its turn alone", async () => {
  const file = path.join(ROOT, "fail.db");
  const store = openSqliteStore(file, new ManualClock(0));
  try {
    const refused = store.replay.append("s4", "st", message(1), { maxEvents: 0, maxBytes: 1 });
    const kept = [store.replay.append("s4", "st", message(2), LIMITS), store.replay.append("s4", "st", message(3), LIMITS)];
    await assert.rejects(refused);
    assert.deepEqual(await Promise.all(kept), ["1", "2"]);
  } finally {
    await store.close();
  }
});

function sizes(n: number): number {
  let total = 0;
  for (let i = 0; i < n; i++) total += Buffer.byteLength(JSON.stringify(message(i)));
  return total;
}
