/**
 * The SQLite backend: the shared contract suite on temporary files, then what
 * only a file can show — data kept across reopen, migration from version 1
 * with rows kept, clear start-up errors for corrupt, newer and unwritable
 * files (never a fallback to memory), index use of the hot queries, bounded
 * size under churn, a full disk, and crash safety: writer processes SIGKILLed
 * mid-loop lose nothing they reported as committed.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, openSync, writeSync, closeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SqliteDb } from "../../src/store/sqlite/db.js";
import { openSqliteDatabase } from "../../src/store/sqlite/driver.js";
import { GatewayError } from "../../src/errors.js";
import type { Store } from "../../src/store/contracts.js";
import { defaultStorePath } from "../../src/store/default-path.js";
import { openStore } from "../../src/store/open.js";
import { openSqliteStore } from "../../src/store/sqlite/index.js";
import { LATEST_VERSION, MIGRATIONS } from "../../src/store/sqlite/migrations.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { waitExit } from "../helpers/core-extra.js";
import { storeContract } from "../store/contract.js";
import { event, pending, rejectsWith, session, task } from "../store/fixtures.js";

/** The crash writers load src/*.ts as this process does (the compiled cache npm test fills; tsx with EMCEEPEE_TEST_TS=tsx). */
const TS_LOADER = process.env.EMCEEPEE_TEST_TS === "tsx" ? "tsx" : new URL("../helpers/ts-register.mjs", import.meta.url).href;
const ROOT = mkdtempSync(path.join(os.tmpdir(), "emceepee-store-"));
after(() => rmSync(ROOT, { recursive: true, force: true }));
let fileCounter = 0;

/** A fresh file path in a fresh folder (the folder does not exist yet: open must create it). */
function tempFile(): string {
  return path.join(ROOT, `case-${++fileCounter}`, "nested", "emceepee.db");
}

storeContract("sqlite", async () => {
  const file = tempFile();
  const clock = new ManualClock();
  return {
    store: await openStore({ kind: "sqlite", path: file }, { clock }),
    clock,
    cleanup: async () => rmSync(path.dirname(file), { recursive: true, force: true }),
  };
});

async function reopen(file: string): Promise<Store> {
  return openStore({ kind: "sqlite", path: file }, { clock: new ManualClock() });
}

describe("sqlite: the file", () => {
  test("creates missing folders, uses WAL and is at the latest schema version", async () => {
    const file = tempFile();
    const store = await reopen(file);
    assert.equal(store.location, file);
    await store.close();
    const raw = openSqliteDatabase(file, { readonly: true });
    try {
      assert.equal(raw.pragma("journal_mode", { simple: true }), "wal");
      assert.equal(raw.pragma("user_version", { simple: true }), LATEST_VERSION);
      // Versions are reserved per store kind, so the list may have gaps; it must stay strictly increasing.
      assert.ok(
        MIGRATIONS.every((m, i) => i === 0 || m.version > MIGRATIONS[i - 1]!.version),
        "migrations sorted by version",
      );
      assert.equal(LATEST_VERSION, MIGRATIONS.at(-1)!.version);
    } finally {
      raw.close();
    }
  });

  test("reopening keeps every kind of state, including what was already delivered", async () => {
    const file = tempFile();
    const limits = { maxPerSession: 100, maxTotal: 1000 };
    const first = await reopen(file);
    await first.tasks.create(task("01A", "s1", { upstreamTaskId: "up-1", upstreamSessionId: "mcp-1" }));
    await first.tasks.create(task("01B", "s1"));
    await first.tasks.transition("01B", {
      from: ["working"],
      to: "completed",
      patch: { result: { content: [{ type: "text", text: "done" }] }, retainUntil: 9000 },
    });
    await first.sessions.put(session("s1", { face: { kind: "all" }, subscriptions: { a: ["file:///x"] } }));
    const delivered = event();
    const undelivered = event();
    await first.events.append("s1", delivered, limits);
    await first.events.takeUndelivered("s1");
    await first.events.append("s1", undelivered, limits);
    await first.pending.put(pending("r1", "s1"));
    const replayId = await first.replay.append("s1", "stream", { jsonrpc: "2.0", method: "x" }, { maxEvents: 10, maxBytes: 10_000 });
    await first.replay.append("s1", "stream", { jsonrpc: "2.0", method: "y" }, { maxEvents: 10, maxBytes: 10_000 });
    await first.servers.put({ name: "remote", config: { url: "http://127.0.0.1:9/mcp" }, addedAt: 5, addedBy: "s1" });
    await first.servers.put({ name: "gone", config: { url: "http://127.0.0.1:8/mcp" }, addedAt: 6, addedBy: "s1" });
    await first.servers.delete("gone");
    await first.close();

    const second = await reopen(file);
    try {
      assert.equal((await second.tasks.findByUpstreamTask("s1", "srv", "up-1"))?.upstreamSessionId, "mcp-1");
      assert.deepEqual((await second.tasks.get("01B"))?.result, { content: [{ type: "text", text: "done" }] });
      assert.deepEqual(
        (await second.tasks.listWorking()).map((t) => t.taskId),
        ["01A"],
      );
      assert.deepEqual((await second.sessions.get("s1"))?.subscriptions, { a: ["file:///x"] });
      const take = await second.events.takeUndelivered("s1");
      assert.deepEqual(
        take.events.map((e) => e.id),
        [undelivered.id],
        "delivered before the restart stays delivered",
      );
      assert.equal((await second.events.append("s1", event(), limits)).event.seq, 3, "seq continues");
      assert.equal((await second.pending.get("r1"))?.sessionId, "s1");
      assert.deepEqual((await second.replay.replayAfter("s1", replayId))?.messages.length, 1);
      assert.deepEqual(await second.replay.size("s1"), { events: 2, bytes: 2 * Buffer.byteLength('{"jsonrpc":"2.0","method":"x"}') }, "counted from the rows");
      assert.equal(await second.replay.append("s1", "stream", { jsonrpc: "2.0", method: "z" }, { maxEvents: 2, maxBytes: 10_000 }), "3", "seq continues");
      assert.equal(await second.replay.streamOf("s1", replayId), undefined, "the bound holds across the restart: the oldest went");
      assert.deepEqual(
        (await second.servers.list()).map((s) => s.name),
        ["remote"],
        "removed servers stay removed",
      );
      assert.deepEqual(await second.tasks.deleteExpired(9000), [{ taskId: "01B", sessionId: "s1" }], "absolute expiry survives the restart");
    } finally {
      await second.close();
    }
  });

  test("a version-1 file migrates to the latest version with every row kept and the new columns back-filled", async () => {
    const file = tempFile();
    const v1 = openSqliteStore(file, new ManualClock(), { migrations: MIGRATIONS.slice(0, 1) });
    await v1.close();
    const raw = openSqliteDatabase(file);
    assert.equal(raw.pragma("user_version", { simple: true }), 1);
    const insertTask = raw.prepare("INSERT INTO tasks (task_id, session_id, record) VALUES (?, ?, ?)");
    insertTask.run("01A", "s1", JSON.stringify(task("01A", "s1", { server: "a", upstreamTaskId: "up-7" })));
    insertTask.run("01B", "s1", JSON.stringify(task("01B", "s1", { status: "completed", retainUntil: 5000, resultBytes: 10, lastUpdatedAt: 3000 })));
    insertTask.run("01C", "s2", JSON.stringify(task("01C", "s2", { kind: "receiver", status: "input_required" })));
    raw.prepare("INSERT INTO sessions (session_id, record) VALUES (?, ?)").run("s1", JSON.stringify(session("s1", { lastActivityAt: 700 })));
    raw.prepare("INSERT INTO sessions (session_id, record) VALUES (?, ?)").run("s2", JSON.stringify(session("s2", { lastActivityAt: 300 })));
    raw
      .prepare("INSERT INTO servers (name, record) VALUES (?, ?)")
      .run("z", JSON.stringify({ name: "z", config: { url: "http://h/mcp" }, addedAt: 1, addedBy: "s1" }));
    raw
      .prepare("INSERT INTO servers (name, record) VALUES (?, ?)")
      .run("a", JSON.stringify({ name: "a", config: { url: "http://h/mcp" }, addedAt: 2, addedBy: "s1" }));
    raw.close();

    const store = await reopen(file);
    try {
      assert.deepEqual(await store.tasks.get("01A"), task("01A", "s1", { server: "a", upstreamTaskId: "up-7" }));
      assert.equal((await store.tasks.findByUpstreamTask("s1", "a", "up-7"))?.taskId, "01A");
      assert.deepEqual(
        (await store.tasks.listWorking()).map((t) => t.taskId),
        ["01A", "01C"],
      );
      assert.deepEqual(
        (await store.tasks.listBySession("s2", { kind: "receiver" })).map((t) => t.taskId),
        ["01C"],
      );
      assert.deepEqual(await store.tasks.enforceRetention("s1", { maxCount: 1, maxBytes: 5 }), ["01B"], "result_bytes back-filled");
      assert.deepEqual(
        (await store.sessions.listExpired(1000)).map((s) => s.sessionId),
        ["s2", "s1"],
        "last_activity_at back-filled",
      );
      assert.deepEqual(
        (await store.servers.list()).map((s) => s.name),
        ["z", "a"],
        "added_at back-filled",
      );
      await store.events.append("s1", event(), { maxPerSession: 10, maxTotal: 10 });
      assert.equal(await store.events.total(), 1, "the tables version 2 adds work");
    } finally {
      await store.close();
    }
    const check = openSqliteDatabase(file, { readonly: true });
    assert.equal(check.pragma("user_version", { simple: true }), LATEST_VERSION);
    check.close();
  });

  test("a version-14 file's SSE replay carries over to version 15: sizes and ids go on from its rows", async () => {
    const file = tempFile();
    const v14 = openSqliteStore(file, new ManualClock(), { migrations: MIGRATIONS.filter((m) => m.version <= 14) });
    await v14.close();
    const raw = openSqliteDatabase(file);
    // As the version-14 code left a session with seq 1–2 evicted and 3–5 kept: its rows, and its counters in replay_sessions.
    const row = raw.prepare("INSERT INTO replay (session_id, seq, stream_id, bytes, message) VALUES (?, ?, ?, ?, ?)");
    for (const seq of [3, 4, 5]) row.run("s1", seq, seq === 4 ? "get" : "post-1", 7, `{"i":${seq}}`);
    raw.prepare("INSERT INTO replay_sessions (session_id, next_seq, count, bytes) VALUES ('s1', 6, 3, 21)").run();
    raw.close();
    const store = await reopen(file);
    try {
      assert.deepEqual(await store.replay.size("s1"), { events: 3, bytes: 21 });
      assert.equal(await store.replay.append("s1", "post-1", { i: 6 }, { maxEvents: 3, maxBytes: 1_000 }), "6", "ids go on after the kept rows");
      assert.deepEqual(await store.replay.replayStream("s1", "post-1", 0), {
        keptFrom: 4,
        messages: [
          { eventId: "5", message: { i: 5 } },
          { eventId: "6", message: { i: 6 } },
        ],
      });
    } finally {
      await store.close();
    }
  });

  test("SSE replay: another writer on the file costs at most one failed append, and never the message just stored", async () => {
    const file = tempFile();
    const a = await reopen(file);
    const b = await reopen(file); // not a gateway's way (serve claims the file), but a library user's
    const roomy = { maxEvents: 3, maxBytes: 1_000_000 };
    try {
      assert.equal(await a.replay.append("s1", "x", { n: 1 }, roomy), "1");
      assert.equal(await b.replay.append("s1", "x", { n: 2 }, roomy), "2", "B reads the rows: after A's");
      await rejectsWith(a.replay.append("s1", "x", { n: 3 }, roomy), "EMCP_STORE_UNAVAILABLE"); // A's kept counters said 2 was free
      assert.equal(await a.replay.append("s1", "x", { n: 3 }, roomy), "3", "read from the rows again after the failure");
      for (let n = 4; n <= 5; n++) await a.replay.append("s2", "x", { n }, roomy);
      await a.replay.append("s2", "x", { n: 6 }, roomy); // A keeps s2 at its bound: 3 rows
      await b.replay.deleteBySession("s2");
      const id = await a.replay.append("s2", "x", { n: 7 }, roomy); // A's counters say 4 rows: one too many, and the oldest is this one
      assert.equal(await a.replay.streamOf("s2", id), "x", "the message just stored is kept");
      assert.deepEqual(await a.replay.size("s2"), { events: 1, bytes: Buffer.byteLength('{"n":7}') });
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a file from a newer emceepee is refused, naming both versions, and left alone", async () => {
    const file = tempFile();
    await (await reopen(file)).close();
    const raw = openSqliteDatabase(file);
    raw.pragma(`user_version = ${LATEST_VERSION + 5}`);
    raw.close();
    const err = await rejectsWith(reopen(file), "EMCP_STORE_UNAVAILABLE");
    assert.ok(err.message.includes(file), err.message);
    assert.match(err.message, new RegExp(`schema version ${LATEST_VERSION + 5}, newer than this emceepee knows \\(${LATEST_VERSION}\\)`));
    const again = openSqliteDatabase(file, { readonly: true });
    assert.equal(again.pragma("user_version", { simple: true }), LATEST_VERSION + 5);
    again.close();
  });
});

describe("sqlite: the writes of one turn (SqliteDb.inTurn, issue 27)", () => {
  const meta = (db: SqliteDb, key: string) =>
    db.read("read", () => (db.stmt("SELECT value FROM meta WHERE key = ?").get(key) as { value: string } | undefined)?.value);
  const put = (db: SqliteDb, key: string, value: string) => db.stmt("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)").run(key, value);

  test("commit in one transaction; one that throws is undone and rejected alone; none is confirmed before the commit", async () => {
    const statements: string[] = [];
    const db = SqliteDb.open(tempFile(), { verbose: (sql) => statements.push(sql) });
    try {
      statements.length = 0;
      let confirmed = 0;
      const a = db.inTurn("write a", () => put(db, "a", "1")).then(() => confirmed++);
      const b = db.inTurn("write b, then fail", () => {
        put(db, "b", "1");
        throw new Error("boom");
      });
      const c = db.inTurn("write c", () => put(db, "c", "1")).then(() => confirmed++);
      await new Promise((r) => process.nextTick(r));
      assert.equal(confirmed, 0, "nothing is confirmed before the turn's commit");
      const settled = await Promise.allSettled([a, b, c]);
      assert.deepEqual(
        settled.map((r) => r.status),
        ["fulfilled", "rejected", "fulfilled"],
      );
      const err = (settled[1] as PromiseRejectedResult).reason as GatewayError;
      assert.ok(err instanceof GatewayError && err.code === "EMCP_STORE_UNAVAILABLE", String(err));
      assert.match(err.message, /failed to write b, then fail: boom/);
      assert.equal(statements.filter((s) => s.startsWith("BEGIN")).length, 1, statements.join("\n"));
      assert.equal(statements.filter((s) => s === "COMMIT").length, 1, statements.join("\n"));
      assert.deepEqual([meta(db, "a"), meta(db, "b"), meta(db, "c")], ["1", undefined, "1"]);
    } finally {
      db.close();
    }
  });

  test("a failure that ends the whole transaction (a full disk) fails the turn with its own error, and the store stays unhealthy", async () => {
    const db = SqliteDb.open(tempFile());
    try {
      const raw = (db as unknown as { db: { pragma(sql: string, o?: { simple: boolean }): unknown } }).db;
      raw.pragma(`max_page_count = ${Number(raw.pragma("page_count", { simple: true })) + 2}`); // a disk that is full
      const settled = await Promise.allSettled([
        db.inTurn("write a", () => put(db, "a", "1")),
        db.inTurn("write a large value", () => db.stmt("INSERT INTO meta (key, value) VALUES ('big', zeroblob(1000000))").run()),
        db.inTurn("write c", () => put(db, "c", "1")),
      ]);
      for (const r of settled) {
        if (r.status !== "rejected") return assert.fail("a write of the turn was confirmed");
        const err: unknown = r.reason;
        assert.ok(err instanceof GatewayError, String(err));
        assert.equal((err.details as { reason?: string }).reason, "SQLITE_FULL", err.message);
      }
      assert.deepEqual([meta(db, "a"), meta(db, "c")], [undefined, undefined], "nothing of the turn is on the file");
      assert.equal(db.healthy(), false);
      // A later turn whose writes all fail on their own writes nothing: no sign that the disk has room again.
      const boom = () => {
        throw new Error("not a store failure");
      };
      await Promise.allSettled([db.inTurn("fail 1", boom), db.inTurn("fail 2", boom)]);
      assert.match(db.problem() ?? "", /SQLITE_FULL|full/, "still unhealthy");
      assert.equal(db.healthy(), false);
    } finally {
      db.close();
    }
  });

  test("SSE replay: an append asked for after a session's replay was deleted, in the same turn, is kept", async () => {
    const store = openSqliteStore(tempFile(), new ManualClock(0));
    try {
      const limits = { maxEvents: 100, maxBytes: 1 << 20 };
      await store.replay.append("s", "st", { jsonrpc: "2.0", method: "old" }, limits);
      const [, , deleted, id] = await Promise.all([
        store.replay.append("other", "st", { jsonrpc: "2.0", method: "a" }, limits), // opens this turn's batch
        store.replay.append("s", "st", { jsonrpc: "2.0", method: "before" }, limits),
        store.replay.deleteBySession("s"),
        store.replay.append("s", "st", { jsonrpc: "2.0", method: "after" }, limits),
      ]);
      assert.equal(deleted, 2, "the delete took what was asked before it");
      assert.deepEqual(await store.replay.size("s"), { events: 1, bytes: Buffer.byteLength(JSON.stringify({ jsonrpc: "2.0", method: "after" })) });
      const next = await store.replay.append("s", "st", { jsonrpc: "2.0", method: "next" }, limits);
      assert.equal(Number(next), Number(id) + 1, "ids go on from the kept message");
    } finally {
      await store.close();
    }
  });

  test("any other use of the file commits the waiting writes first: statements run in the order asked", async () => {
    const file = tempFile();
    const db = SqliteDb.open(file);
    const waiting = db.inTurn("write x", () => put(db, "x", "first"));
    assert.equal(meta(db, "x"), "first", "a read sees a write asked for before it");
    const later = db.inTurn("write y", () => put(db, "y", "turn"));
    db.write("write y now", () => put(db, "y", "now"));
    await Promise.all([waiting, later]);
    assert.equal(meta(db, "y"), "now", "the write asked for last is the one kept");
    const atClose = db.inTurn("write z", () => put(db, "z", "kept"));
    db.close();
    await atClose;
    const again = SqliteDb.open(file);
    try {
      assert.equal(meta(again, "z"), "kept", "close commits what waits");
      await assert.rejects(
        db.inTurn("after close", () => put(db, "w", "1")),
        (e: unknown) => e instanceof GatewayError && e.code === "EMCP_CLOSED",
      );
    } finally {
      again.close();
    }
  });
});

describe("sqlite: start-up errors name the file and never fall back to memory", () => {
  test("a file that is not a database", async () => {
    const file = tempFile();
    mkdirSync(path.dirname(file), { recursive: true });
    const text = "this is a config file someone pointed gateway.store.path at\n".repeat(200);
    writeFileSync(file, text);
    const err = await rejectsWith(reopen(file), "EMCP_STORE_UNAVAILABLE");
    assert.ok(err.message.includes(file), err.message);
    assert.match(err.message, /not a readable SQLite database.*Move it aside/);
    assert.equal(err.details?.reason, "SQLITE_NOTADB");
    assert.ok(err.cause instanceof Error);
    assert.equal(readFileSync(file, "utf8"), text, "the file is left as it was");
  });

  test("a database whose pages are damaged fails the integrity check at start", async () => {
    const file = tempFile();
    const store = await reopen(file);
    for (let i = 0; i < 200; i++) await store.tasks.create(task(`01T${String(i).padStart(4, "0")}`, "s1", { toolArgs: { pad: "x".repeat(200) } }));
    await store.close();
    const size = statSync(file).size;
    assert.ok(size > 8 * 4096, `the file has pages to damage (${size} bytes)`);
    const fd = openSync(file, "r+");
    writeSync(fd, Buffer.alloc(4096 * 3, 0xa5), 0, 4096 * 3, 4096 * 2); // pages 3-5: tables and indexes
    closeSync(fd);
    const err = await rejectsWith(reopen(file), "EMCP_STORE_UNAVAILABLE");
    assert.ok(err.message.includes(file), err.message);
    assert.match(err.message, /corrupt|malformed|integrity/i);
  });

  test("a folder path where the file should be, and a parent that is a file", async () => {
    const dir = path.dirname(tempFile());
    mkdirSync(path.join(dir, "emceepee.db"), { recursive: true });
    const isDir = await rejectsWith(reopen(path.join(dir, "emceepee.db")), "EMCP_STORE_UNAVAILABLE");
    assert.match(isDir.message, /cannot be opened for writing/);
    assert.ok(isDir.message.includes(path.join(dir, "emceepee.db")));
    writeFileSync(path.join(dir, "plain-file"), "x");
    const under = path.join(dir, "plain-file", "state", "emceepee.db");
    const notDir = await rejectsWith(reopen(under), "EMCP_STORE_UNAVAILABLE");
    assert.ok(notDir.message.includes(under), notDir.message);
    assert.match(notDir.message, /make the file and its folder writable.*gateway\.store\.path/i);
    assert.equal(notDir.details?.reason, "ENOTDIR");
  });

  test("a read-only file system (mount permitting)", async (t) => {
    const dir = path.dirname(tempFile());
    mkdirSync(dir, { recursive: true });
    await (await reopen(path.join(dir, "emceepee.db"))).close();
    try {
      execFileSync("mount", ["--bind", "-o", "ro", dir, dir], { stdio: "ignore" });
      execFileSync("mount", ["-o", "remount,bind,ro", dir], { stdio: "ignore" });
    } catch {
      t.skip("this machine does not let the test mount (needs root in a mount namespace)");
      return;
    }
    try {
      const err = await rejectsWith(reopen(path.join(dir, "emceepee.db")), "EMCP_STORE_UNAVAILABLE");
      assert.ok(err.message.includes(path.join(dir, "emceepee.db")), err.message);
      assert.match(err.message, /cannot be opened for writing|readonly|read-only/i);
    } finally {
      execFileSync("umount", [dir], { stdio: "ignore" });
    }
  });

  test("openStore without a path uses the per-user state file", async () => {
    const state = path.join(ROOT, `xdg-${++fileCounter}`);
    assert.equal(defaultStorePath({ XDG_STATE_HOME: state }, "/home/u"), path.join(state, "emceepee", "emceepee.db"));
    assert.equal(defaultStorePath({ XDG_STATE_HOME: "relative/ignored" }, "/home/u"), "/home/u/.local/state/emceepee/emceepee.db");
    assert.equal(defaultStorePath({}, "/home/u"), "/home/u/.local/state/emceepee/emceepee.db");
    const store = await openStore({ kind: "sqlite" }, { env: { XDG_STATE_HOME: state } });
    assert.equal(store.location, path.join(state, "emceepee", "emceepee.db"));
    await store.close();
    assert.ok(statSync(path.join(state, "emceepee", "emceepee.db")).isFile());
  });
});

describe("sqlite: behaviour under load", () => {
  test("every hot query is answered from an index, never by scanning a table", async () => {
    const file = tempFile();
    const statements = new Set<string>();
    let recording = false; // from after opening: the migration's one-off back-fills update whole tables
    const store = openSqliteStore(file, new ManualClock(), {
      verbose: (sql) => {
        if (recording) statements.add(sql);
      },
    });
    recording = true;
    const limits = { maxPerSession: 5, maxTotal: 8 };
    // Exercise the per-call paths of every kind (sweeps over a whole kind are listed below).
    for (let i = 0; i < 6; i++) {
      const id = `01H${i}`;
      await store.tasks.create(task(id, `s${i % 2}`, { upstreamTaskId: `up-${i}` }));
      await store.tasks.patch(id, { progress: { progress: i } }, { ifStatus: ["working"] });
      await store.tasks.transition(id, { from: ["working"], to: "completed", patch: { resultBytes: 5, retainUntil: 100 + i } });
      await store.tasks.findByUpstreamTask("s0", "srv", `up-${i}`);
      await store.tasks.enforceRetention(`s${i % 2}`, { maxCount: 2, maxBytes: 100 });
      await store.events.append(`s${i % 2}`, event(), limits);
      await store.replay.append(`s${i % 2}`, "st", { i }, { maxEvents: 2, maxBytes: 1000 });
      await store.pending.put(pending(`r${i}`, `s${i % 2}`));
    }
    const ev = event();
    await store.events.append("s0", ev, limits);
    await store.events.takeUndelivered("s0");
    await store.events.takeAfter("s0", ev.id);
    await store.events.stats("s0");
    await store.tasks.listBySession("s0", { status: ["working"], kind: "tool" });
    await store.tasks.listWorking();
    await store.tasks.deleteExpired(102);
    await store.replay.replayAfter("s0", "5");
    await store.replay.replayStream("s0", "st", 2);
    await store.pending.listBySession("s0", { kind: "elicitation" });
    await store.pending.delete("r0");
    await store.pending.deleteExpired(1500);
    await store.sessions.put(session("S", { lastActivityAt: 5 }));
    await store.sessions.touch("S", 6);
    await store.sessions.listExpired(10);
    await store.events.deleteBySession("s1");
    await store.close();

    // Whole-kind reads by design: restart recovery and the server list (small), and the oldest
    // events gateway-wide (the first rows in rowid order, LIMIT k: not a scan of the table).
    const allowedScans = [/FROM pending ORDER BY created_at/, /FROM servers ORDER BY/, /FROM events ORDER BY gseq LIMIT/];
    const raw = openSqliteDatabase(file, { readonly: true });
    const scans: string[] = [];
    let checked = 0;
    for (const sql of statements) {
      if (!/^\s*(SELECT|UPDATE|DELETE|INSERT)/i.test(sql) || /sqlite_|pragma/i.test(sql)) continue;
      checked++;
      const plan = (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((r) => r.detail);
      const scan = plan.find((d) => /^SCAN (?!CONSTANT)/.test(d) && !/USING (COVERING )?INDEX/.test(d));
      if (scan && !allowedScans.some((re) => re.test(sql))) scans.push(`${sql.replace(/\s+/g, " ")}\n    → ${plan.join(" | ")}`);
    }
    raw.close();
    assert.ok(checked > 30, `the workload ran ${checked} statements`);
    assert.deepEqual(scans, [], "statements that scan a table");
  });

  test("size stays bounded under churn: bounded rows, reused pages, a WAL that is checkpointed", async () => {
    const file = tempFile();
    const store = await reopen(file);
    const payload = "p".repeat(1000);
    let written = 0;
    for (let round = 0; round < 8; round++) {
      for (let i = 0; i < 500; i++) {
        const sessionId = `s${i % 4}`;
        await store.replay.append(sessionId, "st", { payload, i }, { maxEvents: 50, maxBytes: 40_000 });
        await store.events.append(sessionId, { ...event(), data: { payload } }, { maxPerSession: 50, maxTotal: 150 });
        const id = `01C${round}${String(i).padStart(4, "0")}`;
        await store.tasks.create(task(id, sessionId, { toolArgs: { payload } }));
        await store.tasks.transition(id, { from: ["working"], to: "completed", patch: { retainUntil: round } });
        written += 3 * 1000;
      }
      await store.tasks.deleteExpired(round);
    }
    const sizes = { db: statSync(file).size, wal: statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0 };
    await store.close();
    assert.ok(written > 10_000_000, `${written} bytes of payload written`);
    assert.ok(sizes.db < 3_000_000, `database file ${sizes.db} bytes`);
    assert.ok(sizes.wal < 8_000_000, `WAL ${sizes.wal} bytes`);
    assert.equal(statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0, 0, "a clean close checkpoints and empties the WAL");
  });

  test("a full disk fails the write with EMCP_STORE_UNAVAILABLE and keeps what was committed (mount permitting)", async (t) => {
    const dir = path.join(ROOT, `full-${++fileCounter}`);
    mkdirSync(dir, { recursive: true });
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=512k", "tmpfs", dir], { stdio: "ignore" });
    } catch {
      t.skip("this machine does not let the test mount a small tmpfs (needs root in a mount namespace)");
      return;
    }
    try {
      const file = path.join(dir, "emceepee.db");
      const store = await reopen(file);
      const roomy = { maxEvents: 100_000, maxBytes: 100_000_000 };
      const ids: string[] = [];
      let failure: unknown;
      for (let i = 0; i < 1000 && failure === undefined; i++) {
        try {
          ids.push(await store.replay.append("s", "st", { blob: "b".repeat(4000), i }, roomy));
        } catch (err) {
          failure = err;
        }
      }
      const err = failure;
      assert.ok(err instanceof GatewayError, `the disk filled with a GatewayError (got ${String(err)})`);
      assert.equal(err.code, "EMCP_STORE_UNAVAILABLE");
      assert.ok(err.message.includes(file), err.message);
      assert.equal(err.details?.reason, "SQLITE_FULL");
      assert.match(err.message, /disk \(or its quota\) is full/);
      assert.ok(ids.length > 10, `${ids.length} messages were committed first`);
      assert.equal((await store.replay.size("s")).events, ids.length, "the failed append left nothing behind");
      assert.equal(await store.replay.streamOf("s", ids[0]!), "st");
      await store.close().catch(() => undefined);
    } finally {
      execFileSync("umount", [dir], { stdio: "ignore" });
    }
  });

  test("SIGKILL under load: reopening works and every write a writer reported as committed is there, once", async (t) => {
    const file = tempFile();
    const setup = await reopen(file);
    const shared = 150;
    for (let i = 1; i <= shared; i++) await setup.tasks.create(task(`shared-${i}`, "shared"));
    await setup.close();

    const script = fileURLToPath(new URL("../store/crash-writer.ts", import.meta.url));
    const writers = ["w1", "w2"].map((name) => {
      const child = spawn(process.execPath, ["--import", TS_LOADER, script, file, name, String(shared)], { stdio: ["ignore", "pipe", "pipe"] });
      const seen = { T: [] as string[], E: [] as string[], D: [] as string[], W: [] as string[], stderr: "" };
      let buffer = "";
      child.stdout.on("data", (chunk: Buffer) => {
        buffer += chunk.toString();
        const lines = buffer.split("\n");
        buffer = lines.pop()!;
        for (const line of lines) {
          const [kind, ...rest] = line.split(" ");
          if (kind === "T" || kind === "E" || kind === "W") seen[kind].push(rest[0]!);
          if (kind === "D") seen.D.push(...rest);
        }
      });
      child.stderr.on("data", (chunk: Buffer) => (seen.stderr += chunk.toString()));
      return { name, child, seen };
    });
    try {
      const deadline = Date.now() + 60_000;
      while (writers.some((w) => w.seen.T.length < 150 || w.seen.D.length === 0)) {
        assert.ok(Date.now() < deadline, `writers too slow: ${writers.map((w) => `${w.name} ${w.seen.T.length} ${w.seen.stderr}`).join("; ")}`);
        assert.ok(
          writers.every((w) => w.child.exitCode === null),
          `a writer exited: ${writers.map((w) => w.seen.stderr).join("\n")}`,
        );
        await new Promise((r) => setTimeout(r, 20));
      }
      for (const w of writers) w.child.kill("SIGKILL");
      for (const w of writers) assert.equal((await waitExit(w.child)).signal, "SIGKILL");
    } finally {
      for (const w of writers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL");
    }

    const store = await reopen(file); // runs the integrity check
    try {
      for (const { name, seen } of writers) {
        t.diagnostic(`${name}: ${seen.T.length} tasks, ${seen.E.length} events, ${seen.D.length} handed out, ${seen.W.length} shared tasks won`);
        for (const id of seen.T) {
          const r = await store.tasks.get(id);
          assert.equal(r?.status, "completed", `${name}: acknowledged task ${id}`);
          assert.deepEqual(r?.result, { content: [{ type: "text", text: `result of ${id}` }] });
        }
        // Events: handed out at most once, across the crash; none lost except a take whose reply the kill cut off.
        const afterCrash = (await store.events.takeUndelivered(name)).events.map((e) => e.id);
        const delivered = new Set(seen.D);
        assert.equal(delivered.size, seen.D.length, `${name}: an event was handed out twice before the kill`);
        assert.deepEqual(
          afterCrash.filter((id) => delivered.has(id)),
          [],
          `${name}: handed out again after the restart`,
        );
        const lastDelivered = Math.max(...seen.D.map((id) => seen.E.indexOf(id)));
        const unaccounted = seen.E.filter((id) => !delivered.has(id) && !afterCrash.includes(id));
        assert.ok(
          unaccounted.every((id) => seen.E.indexOf(id) > lastDelivered),
          `${name}: events neither delivered nor still stored: ${unaccounted.join(", ")}`,
        );
      }
      // Cross-process compare-and-set: no shared task was won twice, and the winner's write is the stored one.
      const winners = new Map<string, string>();
      for (const { name, seen } of writers) {
        for (const id of seen.W) {
          assert.equal(winners.get(id), undefined, `${id} won by ${winners.get(id)} and ${name}`);
          winners.set(id, name);
        }
      }
      assert.ok(winners.size > 0, "the writers raced on shared tasks");
      for (const [id, name] of winners) assert.equal((await store.tasks.get(id))?.statusMessage, name, id);
    } finally {
      await store.close();
    }
  });
});
