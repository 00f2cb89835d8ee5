/**
 * The official conformance suite's tasks-extension scenarios (SEP-2663;
 * issue 25, bridge 4) against the gateway's /servers/tasks/mcp, in front of
 * test/fixtures/tasks-legacy-server.ts (a 2025-11-25 stdio server with the
 * tools the scenarios name): a 2026-07-28 client's tasks are gateway tasks on
 * a legacy upstream. The scenarios are extension ones (not on the spec's
 * timeline), so they run with --force. Reports every scenario
 * (t.diagnostic); requires those the gateway passes (README "Protocol eras"
 * says why the others fail). Node >= 22 as era-server-scenarios.test.ts gets
 * it. Not part of `npm test`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { fixtureArgs, startGateway, ROOT, type TestGateway } from "../helpers/gateway.js";
import { node22 } from "./node22.js";

const run = promisify(execFile);
const CLI = path.join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
/** The suite colours its output. */
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g");

/** Every tasks-extension scenario of the suite, and whether the gateway must pass it whole. */
const SCENARIOS: Record<string, boolean> = {
  "tasks-dispatch-and-envelope": true,
  "tasks-wire-fields": true,
  "tasks-request-state-removal": true,
  "tasks-request-headers": true,
  "tasks-capability-negotiation": true,
  "tasks-lifecycle": false, // a protocol error needs an upstream that answers one (the SDK 1.32 fixture turns throws into tool errors)
  "tasks-mrtr-input": false, // passes when its tasks run one at a time: a stdio upstream's mid-call request is attributed only to the connection's only call (ADR 0032, Tasks across eras, Limits)
  "tasks-required-task-error": false, // the gateway emulates a required-task tool for a client without the extension instead of -32021
  "tasks-mrtr-composition": false, // needs a modern upstream's MRTR-then-task tool
  "tasks-status-notifications": false, // skipped by the suite (subscriptions/listen)
};

describe("conformance tasks-extension scenarios through the gateway, legacy upstream", { timeout: 900_000 }, () => {
  let gw: TestGateway;
  let url: string;
  let node: { bin: string } | { skip: string };
  before(async () => {
    node = await node22();
    gw = await startGateway({ mcpServers: { tasks: { command: process.execPath, args: fixtureArgs("tasks-legacy-server"), cwd: ROOT } } });
    url = gw.url.replace(/\/mcp$/, "/servers/tasks/mcp");
  });
  after(() => gw?.close());

  for (const [scenario, required] of Object.entries(SCENARIOS)) {
    it(scenario, async (t) => {
      if ("skip" in node) return t.skip(node.skip);
      const args = [CLI, "server", "--url", url, "--spec-version", "2026-07-28", "--force", "--scenario", scenario, "--timeout", "90000"];
      const result = await run(node.bin, args, { cwd: ROOT, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 }).catch(
        (err: { stdout?: string; stderr?: string }) => ({ stdout: err.stdout ?? "", stderr: err.stderr ?? "" }),
      );
      const plain = result.stdout.replace(ANSI, "");
      const tally = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(plain);
      const skipped = /SKIPPED/.test(plain);
      t.diagnostic(`${scenario}: ${tally ? `${tally[1]}/${tally[2]} passed` : skipped ? "skipped by the suite" : "no tally"}`);
      for (const m of plain.matchAll(/^\s+- (\w+): .*\n\s+Error: (.*)$/gm)) t.diagnostic(`  ${m[1]}: ${m[2]}`);
      if (!required) return;
      assert.ok(tally, `no tally from the suite:\n${plain.slice(-2000)}\n${result.stderr.slice(-1000)}`);
      assert.equal(tally[3], "0", `${scenario} failed ${tally[3]} check(s):\n${plain.slice(-3000)}`);
    });
  }
});
