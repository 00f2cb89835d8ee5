/**
 * The conformance suite's server scenarios outside its active set (issue 25):
 * run one by one with `--force --scenario`, against the reference fixture
 * directly and through the gateway's /servers/ref/mcp (the fixture as an HTTP
 * upstream), so every scenario's result, direct vs gateway, is on record
 * (README "Protocol eras"). Each is reported (t.diagnostic); the gateway must
 * pass whole the ones the fixture passes whole, and never fail a check the
 * fixture passes. Node >= 22 from node22.ts. Not part of `npm test` (about 3 min).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { ROOT, startGateway, type TestGateway } from "../helpers/gateway.js";
import { node22 } from "./node22.js";
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";

const run = promisify(execFile);
const CLI = path.join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;

const SCENARIOS: Record<string, readonly string[]> = {
  "2026-07-28": [
    "server-stateless",
    "json-schema-2020-12",
    "sep-2164-resource-not-found",
    "caching",
    "http-header-validation",
    "http-custom-header-server-validation",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
  ],
  "2025-11-25": ["json-schema-2020-12", "server-sse-polling"],
};

interface Outcome {
  passed: number;
  total: number;
  failed: string[];
}

describe("conformance server scenarios outside the active set, direct vs through the gateway", { timeout: 900_000 }, () => {
  let reference: ModernReferenceServer;
  let gw: TestGateway;
  let node: { bin: string } | { skip: string };
  before(async () => {
    node = await node22();
    reference = await startModernReferenceServer();
    gw = await startGateway({ mcpServers: { ref: { url: reference.url } } });
  });
  after(async () => {
    await gw?.close();
    await reference?.close();
  });

  async function scenario(bin: string, url: string, version: string, name: string): Promise<Outcome | undefined> {
    const args = [CLI, "server", "--url", url, "--spec-version", version, "--force", "--scenario", name, "--timeout", "30000"];
    const result = await run(bin, args, { cwd: ROOT, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 }).catch((err: { stdout?: string; stderr?: string }) => ({
      stdout: err.stdout ?? "",
      stderr: err.stderr ?? "",
    }));
    const plain = `${result.stdout}\n${result.stderr}`.replace(ANSI, "");
    const tally = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(plain);
    if (!tally) return undefined;
    const failed = [...plain.matchAll(/^\s+- ([\w-]+): .*\n\s+Error: (.*)$/gm)].map((m) => m[1]!);
    return { passed: Number(tally[1]), total: Number(tally[2]), failed };
  }

  for (const [version, names] of Object.entries(SCENARIOS)) {
    for (const name of names) {
      it(`${version} ${name}`, async (t) => {
        if ("skip" in node) return t.skip(node.skip);
        const direct = await scenario(node.bin, reference.url, version, name);
        const gateway = await scenario(node.bin, gw.url.replace(/\/mcp$/, "/servers/ref/mcp"), version, name);
        const show = (o: Outcome | undefined) => (o ? `${o.passed}/${o.total}${o.failed.length ? ` (${o.failed.join(", ")})` : ""}` : "no tally");
        t.diagnostic(`${version} ${name}: direct ${show(direct)}, gateway ${show(gateway)}`);
        assert.ok(gateway, `no tally through the gateway for ${name}`);
        // What fails through the gateway fails directly too (the fixture's limits, README "Protocol eras").
        const own = gateway.failed.filter((check) => !direct?.failed.includes(check));
        assert.deepEqual(own, [], `${name}: checks that fail only through the gateway`);
        if (direct && direct.failed.length === 0) assert.equal(gateway.passed, gateway.total, `${name}: the fixture passes it whole`);
      });
    }
  }
});
