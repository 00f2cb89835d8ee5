/**
 * The official conformance suite's client authorization scenarios (issue
 * 23): every `auth/*` client scenario of the 2025-11-25 and the 2026-07-28
 * requirement sets, with the gateway as the OAuth client
 * (test/conformance/auth-client-driver.ts starts it in process with the
 * suite's server as an upstream with `auth` and plays the person). The
 * `--suite auth` run first, then each scenario the suite left out for that
 * version on its own. Reports every scenario (t.diagnostic; README "Connect
 * remote servers" has the table). The CLI needs Node >= 22: see
 * era-server-scenarios.test.ts (node22()). Not part of `npm test`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { before, describe, it } from "node:test";
import { promisify } from "node:util";
import { ROOT } from "../helpers/gateway.js";
import { node22 } from "./node22.js";

const run = promisify(execFile);
const CLI = path.join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const DRIVER = `${process.execPath} --import tsx ${path.join(ROOT, "test/conformance/auth-client-driver.ts")}`;

/** Scenarios the gateway must pass in each set (all of them, but those README explains). */
const EXPECTED_FAILURES: Record<string, string> = {
  // A SHOULD (warning): the suite expects its own fixed client id URL; the gateway serves its document at <publicUrl>/oauth/client-metadata.json.
  "auth/basic-cimd": "warning",
};

type Row = { passed: number; failed: number; warnings: number };

async function cli(bin: string, args: string[]): Promise<string> {
  const r = await run(bin, [CLI, ...args], { cwd: ROOT, timeout: 900_000, maxBuffer: 64 * 1024 * 1024 }).catch((err: { stdout?: string; stderr?: string }) => ({
    stdout: err.stdout ?? "",
    stderr: err.stderr ?? "",
  }));
  // A single scenario's results go to stderr, the suite's summary to stdout.
  return `${r.stdout}\n${r.stderr}`;
}

/** The client `auth/*` scenarios `list` tags with `version`. */
async function scenariosOf(bin: string, version: string): Promise<string[]> {
  const out = await cli(bin, ["list"]);
  const client = out.slice(out.indexOf("Client scenarios"));
  return [...client.matchAll(/- (auth\/\S+) \[([^\]]*)\]/g)].filter((m) => m[2]!.split(",").includes(version)).map((m) => m[1]!);
}

describe("conformance client auth scenarios, the gateway as the OAuth client", { timeout: 1_800_000 }, () => {
  let node: { bin: string } | { skip: string };
  before(async () => {
    node = await node22();
  });

  for (const version of ["2025-11-25", "2026-07-28"] as const) {
    it(`auth/* of ${version}`, async (t) => {
      if ("skip" in node) return t.skip(node.skip);
      const wanted = await scenariosOf(node.bin, version);
      assert.ok(wanted.length > 0, "the suite lists auth scenarios");
      const rows = new Map<string, Row>();
      const suite = await cli(node.bin, ["client", "--command", DRIVER, "--suite", "auth", "--spec-version", version, "--timeout", "60000"]);
      for (const m of suite.matchAll(/^[✓✗] (auth\/\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?/gmu)) {
        rows.set(m[1]!, { passed: Number(m[2]), failed: Number(m[3]), warnings: Number(m[4] ?? 0) });
      }
      for (const name of wanted.filter((s) => !rows.has(s))) {
        const one = await cli(node.bin, ["client", "--command", DRIVER, "--scenario", name, "--spec-version", version, "--timeout", "60000"]);
        const m = /Passed: (\d+)\/\d+, (\d+) failed, (\d+) warnings/.exec(one);
        const clientFailed = /CLIENT EXITED WITH ERROR/.test(one);
        rows.set(
          name,
          m ? { passed: Number(m[1]), failed: Number(m[2]) + (clientFailed ? 1 : 0), warnings: Number(m[3]) } : { passed: 0, failed: 1, warnings: 0 },
        );
      }
      const bad: string[] = [];
      for (const name of wanted) {
        const row = rows.get(name) ?? { passed: 0, failed: 1, warnings: 0 };
        t.diagnostic(`${version} ${name}: ${row.passed} passed, ${row.failed} failed, ${row.warnings} warnings`);
        const clean = row.failed === 0 && row.warnings === 0;
        const allowed = EXPECTED_FAILURES[name] === "warning" && row.failed === 0;
        if (!clean && !allowed) bad.push(name);
      }
      assert.deepEqual(bad, [], `scenarios that did not pass in ${version}`);
    });
  }
});
