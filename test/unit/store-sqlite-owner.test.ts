/**
 * One gateway per SQLite file, in process (docs/adr/0007, "One gateway per
 * file"; the real-process case is test/integration/store-ownership.test.ts):
 * an exclusive open of a file another exclusive open holds is refused with
 * EMCP_STORE_UNAVAILABLE naming the holder without touching the file, non-exclusive opens (tools,
 * tests reading the file) are not, and a close frees the file.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ErrorCodes } from "../../src/errors.js";
import { openSqliteStore } from "../../src/store/sqlite/index.js";
import { MIGRATIONS } from "../../src/store/sqlite/migrations.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { rejectsWith } from "../store/fixtures.js";

test("a second exclusive open is refused naming the holder; a plain open is not; close frees the file", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-owner-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "state.db");
  const clock = new ManualClock();
  const first = openSqliteStore(file, clock, { exclusive: true });
  const bytes = () => Buffer.concat([readFileSync(file), readFileSync(`${file}-wal`)]);
  const before = bytes();
  // A refused gateway, maybe a newer one: it neither migrates, checks nor writes the file the first one serves from.
  const newer = [
    ...MIGRATIONS,
    { version: 1_000, description: "a newer build's step", up: (db: { exec(sql: string): unknown }) => db.exec("CREATE TABLE newer (x)") },
  ];
  const refusal = await rejectsWith((async () => openSqliteStore(file, clock, { exclusive: true, migrations: newer }))(), ErrorCodes.STORE_UNAVAILABLE);
  assert.ok(bytes().equals(before), "the refused open left the file (and its WAL) byte-identical");
  assert.ok(refusal.message.includes(file), refusal.message);
  assert.match(refusal.message, new RegExp(`pid ${process.pid} on ${os.hostname()}, no port: emceepee stdio, or still starting`));
  assert.match(refusal.message, /--store sqlite:<other file>.*--store memory/);
  assert.equal(refusal.details?.reason, "in_use");

  await first.announce?.({ port: 8808 });
  const again = await rejectsWith((async () => openSqliteStore(file, clock, { exclusive: true }))(), ErrorCodes.STORE_UNAVAILABLE);
  assert.match(again.message, /, port 8808, since /);

  const reader = openSqliteStore(file, clock);
  assert.equal(await reader.tasks.get("none"), undefined, "a plain open (no claim) still reads the file");
  await reader.close();

  await first.close();
  const next = openSqliteStore(file, clock, { exclusive: true });
  assert.equal(await next.healthy(), true);
  await next.close();
});
