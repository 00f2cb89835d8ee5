/**
 * A SQLite store file deleted or replaced while the store is open, in process
 * with real files (docs/adr/0007, "When the store fails"): the next use
 * writes the open database back to its path and goes on there (onRecovered,
 * logged as store_recovered), so what was confirmed is in the file a restart
 * opens; when it cannot be written back, every use fails with
 * EMCP_STORE_UNAVAILABLE and healthy() is false until it can.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ErrorCodes } from "../../src/errors.js";
import { openSqliteStore } from "../../src/store/sqlite/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { rejectsWith, task } from "../store/fixtures.js";

function setup(t: { after(fn: () => void): void }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-recover-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "state", "state.db");
  const recovered: string[] = [];
  const store = openSqliteStore(file, new ManualClock(), { exclusive: true, onRecovered: (what) => recovered.push(what) });
  t.after(() => void store.close());
  return { dir, file, store, recovered };
}

/** What a restart would find in the file at the path. */
async function onDisk(file: string, taskId: string): Promise<string | undefined> {
  const reader = openSqliteStore(file, new ManualClock());
  try {
    return (await reader.tasks.get(taskId))?.status;
  } finally {
    await reader.close();
  }
}

test("a deleted store file is written back at the next write: the data before and after is in it, and the store is healthy", async (t) => {
  const { file, store, recovered } = setup(t);
  await store.tasks.create(task("before"));
  rmSync(file);
  await store.tasks.create(task("after"));
  assert.ok(existsSync(file), "the file is back at its path");
  assert.equal(recovered.length, 1);
  assert.match(recovered[0] ?? "", /was deleted while emceepee had it open/);
  assert.ok(recovered[0]?.includes(file), "names the file");
  assert.equal(await store.healthy(), true);
  assert.equal(store.problem?.(), undefined);
  await store.tasks.create(task("later"));
  for (const id of ["before", "after", "later"]) assert.equal(await onDisk(file, id), "working", `${id} is in the file a restart opens`);
});

test("a replaced store file (deleted, another database made at the path) is overwritten with the open one on the health check", async (t) => {
  const { file, store, recovered } = setup(t);
  await store.tasks.create(task("mine"));
  rmSync(file);
  rmSync(`${file}-wal`, { force: true });
  rmSync(`${file}-shm`, { force: true });
  const other = openSqliteStore(file, new ManualClock());
  await other.tasks.create(task("theirs"));
  await other.close();
  assert.equal(await store.healthy(), true, "readiness recovers without a restart");
  assert.match(recovered[0] ?? "", /was replaced by another file/);
  assert.equal(await onDisk(file, "mine"), "working");
  assert.equal(await onDisk(file, "theirs"), undefined);
});

test("a store file that cannot be written back: writes fail with EMCP_STORE_UNAVAILABLE (never confirmed), unhealthy, until it can", async (t) => {
  const { file, store, recovered } = setup(t);
  await store.tasks.create(task("before"));
  const folder = path.dirname(file);
  rmSync(folder, { recursive: true });
  writeFileSync(folder, "not a folder"); // the folder cannot be made again
  const refused = await rejectsWith(store.tasks.create(task("refused")), ErrorCodes.STORE_UNAVAILABLE);
  assert.match(refused.message, /was deleted while emceepee had it open, and writing it back failed/);
  await rejectsWith(store.tasks.get("before"), ErrorCodes.STORE_UNAVAILABLE);
  assert.equal(await store.healthy(), false);
  assert.match(store.problem?.() ?? "", /writing it back failed/);
  assert.deepEqual(recovered, []);

  rmSync(folder);
  assert.equal(await store.healthy(), true, "written back once the folder can be made");
  assert.equal(recovered.length, 1);
  await store.tasks.create(task("after"));
  assert.equal(await onDisk(file, "before"), "working");
  assert.equal(await onDisk(file, "after"), "working");
  assert.equal(await onDisk(file, "refused"), undefined, "the refused write was never confirmed");
});
