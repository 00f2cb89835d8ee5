/** The SQLite driver per Node major (src/store/sqlite/driver.ts, ADR 0020). */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { openSqliteDatabase, sqliteDriverPackage } from "../../src/store/sqlite/driver.js";

/** The child loads src/*.ts as this process does (the compiled cache npm test fills; tsx with EMCEEPEE_TEST_TS=tsx). */
const TS_LOADER = process.env.EMCEEPEE_TEST_TS === "tsx" ? "tsx" : new URL("../helpers/ts-register.mjs", import.meta.url).href;

const run = promisify(execFile);

test("Node 20 uses better-sqlite3 12; Node 22 and later use the Node-API build (13), never 12", () => {
  assert.equal(sqliteDriverPackage("20.20.2"), "better-sqlite3");
  assert.equal(sqliteDriverPackage("22.12.0"), "better-sqlite3-napi");
  assert.equal(sqliteDriverPackage("24.21.0"), "better-sqlite3-napi");
});

test("the driver this Node loads opens a database", () => {
  const db = openSqliteDatabase(":memory:");
  try {
    assert.deepEqual(db.prepare("SELECT 1 + 1 AS two").get(), { two: 2 });
  } finally {
    db.close();
  }
});

test("without the driver package the store says which package is missing and what to do instead", async () => {
  // A child whose require() cannot find either driver package (the resolver refuses them).
  const preload =
    "const M=require('node:module');const r=M._resolveFilename;" +
    "M._resolveFilename=function(req,...a){if(/^better-sqlite3/.test(req)){const e=new Error(\"Cannot find module '\"+req+\"'\");e.code='MODULE_NOT_FOUND';throw e}return r.call(this,req,...a)}";
  const script =
    "import('./src/store/sqlite/driver.ts').then((d)=>{try{d.openSqliteDatabase(':memory:');console.log('opened')}catch(e){console.log(JSON.stringify({code:e.code,message:e.message}))}})";
  const dir = mkdtempSync(path.join(os.tmpdir(), "emcp-sqlite-driver-"));
  const preloadFile = path.join(dir, "hide-sqlite.cjs");
  writeFileSync(preloadFile, preload);
  let stdout: string;
  try {
    ({ stdout } = await run(process.execPath, ["--require", preloadFile, "--import", TS_LOADER, "-e", script], {
      cwd: new URL("../..", import.meta.url).pathname,
      timeout: 120_000,
    }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const out = JSON.parse(stdout.trim()) as { code: string; message: string };
  assert.equal(out.code, "EMCP_STORE_UNAVAILABLE");
  assert.match(out.message, new RegExp(`needs the optional package ${sqliteDriverPackage()} on Node`));
  assert.match(out.message, /--store memory/);
});
