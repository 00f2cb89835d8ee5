/**
 * The CLI turns on Node's on-disk compile cache where Node has one (>= 22.1;
 * docs/adr/0039): the compiled CLI run by Node 22+ with no NODE_COMPILE_CACHE
 * leaves the cache in $TMPDIR/node-compile-cache. Skipped when no Node >= 22
 * can be had (test/conformance/node22.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { builtCliEntry } from "../helpers/cli-build.js";
import { node22 } from "../conformance/node22.js";

test("emceepee on Node >= 22 keeps its compiled modules in Node's compile cache", async (t) => {
  const node = await node22();
  if ("skip" in node) return t.skip(node.skip);
  const tmp = mkdtempSync(path.join(os.tmpdir(), "emceepee-compile-cache-"));
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
    delete env.NODE_COMPILE_CACHE;
    delete env.NODE_DISABLE_COMPILE_CACHE;
    const { stdout } = await promisify(execFile)(node.bin, [builtCliEntry(), "--version"], { env, timeout: 120_000 });
    assert.match(stdout, /^emceepee /);
    const cache = path.join(tmp, "node-compile-cache");
    assert.ok(existsSync(cache), `no compile cache in ${tmp}: the CLI did not turn it on`);
    const entries = readdirSync(cache, { recursive: true });
    assert.ok(entries.length > 0, "the compile cache is empty");
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
