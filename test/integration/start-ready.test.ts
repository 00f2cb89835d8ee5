/**
 * What `serve` does between its start and its first session (docs/adr/0039
 * §6, §7): the start-up check's own process runs niced behind the sessions'
 * (src/server/upstream-check.ts), and still reports a broken upstream with the
 * process's own message; a shared server's check connects the shared
 * connection (not niced), and the first session gets the same clear error; SDK v2's server package (the 2026-07-28 era's
 * classifier, src/mcp/modern/envelope.ts) is not loaded until a modern message
 * arrives; the shipped bundle's `serve` has not loaded the console's pages,
 * minisearch, oauth4webapi or zod's other locales when it listens, and loads
 * the first two when first used (docs/adr/0045). Real CLI and real child
 * processes; the module log of test/fixtures/module-log.mjs for what loads.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY } from "@modelcontextprotocol/server";
import * as envelope from "../../src/mcp/modern/envelope.js";
import { CHECK_NICE } from "../../src/server/upstream-check.js";
import { bundledCliEntry } from "../helpers/cli-build.js";
import { call, connectClient } from "../helpers/gateway.js";
import { MCP_POST_HEADERS, initializeBody, jsonRpcMessages, logLines, pollFor, rawRequest, startCliServe, stopChild } from "../helpers/core-extra.js";

const SLOW = { timeout: 300_000 };
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HOOK = path.join(ROOT, "test/fixtures/module-log.mjs");

let tmp: string | undefined;
after(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/**
 * An upstream that is broken on purpose: each process appends its own nice value and its scheduling
 * group's line (/proc/self/autogroup, where there is one) to `record`, says why it fails on stderr and exits 1.
 */
// A niced process (the check's) waits up to 5 s for its scheduling group's nice: the gateway sets it after the spawn and,
// where Linux refuses it for 100 ms after another group's (EAGAIN), again 110 ms later — after this process would have read it.
// The process's own nice is set just after the spawn too, which on a loaded machine can come after this process has
// started: one at priority 0 looks again for up to 2 s (the early process, never niced, records 0 after that).
const BROKEN = `
const fs = require("node:fs"), os = require("node:os");
const read = () => { try { return fs.readFileSync("/proc/self/autogroup", "utf8").trim(); } catch { return ""; } };
const end = Date.now() + 5000, unniced = Date.now() + 2000;
let group = read();
while (Date.now() < end && (os.getPriority() === 0 ? Date.now() < unniced : Boolean(group) && !/nice ${CHECK_NICE}$/.test(group))) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  group = read();
}
fs.appendFileSync(process.argv[1], JSON.stringify({ nice: os.getPriority(), group }) + "\\n");
process.stderr.write("broken on purpose: no database at /nowhere\\n");
process.exit(1);
`;

describe("serve's start (the cases at once)", { concurrency: true }, () => {
  for (const sharing of ["session", "shared"] as const) {
    const what = sharing === "session" ? "the start-up check's process runs niced" : "the start-up check connects the shared connection, not niced,";
    test(`${sharing} mode: ${what} and still reports the broken upstream with its message`, SLOW, async () => {
      tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-start-ready-"));
      const record = path.join(tmp, `${sharing}.jsonl`);
      const config = path.join(tmp, `${sharing}.json`);
      await writeFile(config, JSON.stringify({ mcpServers: { broken: { command: process.execPath, args: ["-e", BROKEN, record], sharing } } }));
      const cli = await startCliServe(os.tmpdir(), ["--config", config, "--port", "0", "--store", "memory", "--log-level", "info"]);
      try {
        const failed = await pollFor(async () => logLines(cli.stderr(), "upstream_check_failed")[0], "upstream_check_failed in the log", 120_000);
        assert.equal(failed.server, "broken");
        assert.match(String(failed.reason), /broken on purpose: no database at \/nowhere/, `the process's own words: ${JSON.stringify(failed)}`);
        const recorded = async () =>
          (await readFile(record, "utf8"))
            .trim()
            .split("\n")
            .map((line) => JSON.parse(line) as { nice: number; group: string });
        let runs = await recorded();
        if (sharing === "session") {
          // The early process (docs/adr/0039 §5) at normal priority, and the check's own, niced. The early one records
          // after looking 2 s for a nice that never comes, so it may write after the check's failure is logged.
          runs = await pollFor(async () => ((runs = await recorded()).length >= 2 ? runs : undefined), "both processes' records", 120_000);
          assert.equal(runs.length, 2, `one run per process: ${JSON.stringify(runs)}`);
          const check = runs.find((r) => r.nice !== 0) ?? runs.at(-1)!;
          assert.deepEqual(
            runs.map((r) => r.nice).filter((n) => n === 0),
            [0],
            `the early process is not niced: ${JSON.stringify(runs)}`,
          );
          if (process.platform !== "win32") assert.equal(check.nice, CHECK_NICE, `the check's process is niced: ${JSON.stringify(runs)}`);
          if (check.group) assert.match(check.group, new RegExp(`nice ${CHECK_NICE}$`), `and so is its scheduling group: ${JSON.stringify(runs)}`);
        } else {
          // The check connects the shared connection itself (§7): the early process, or (it exited before the check took it)
          // the shared connection's own, at normal priority — the process that would serve the sessions, never a niced one beside it.
          assert.ok(runs.length === 1 || runs.length === 2, `one or two runs: ${JSON.stringify(runs)}`);
          assert.deepEqual(
            runs.map((r) => r.nice),
            runs.map(() => 0),
            `no process of a shared server is niced: ${JSON.stringify(runs)}`,
          );
          // The first session gets the clear error it got before the check used the shared connection: the process's own words.
          const client = await connectClient(cli.url);
          try {
            const result = await call(client, "execute_tool", { server: "broken", tool: "anything", args: {} });
            assert.equal(result.isError, true, JSON.stringify(result));
            assert.match(JSON.stringify(result.content), /broken on purpose: no database at \/nowhere/, JSON.stringify(result));
          } finally {
            await client.close();
          }
        }
      } finally {
        await stopChild(cli.child);
      }
    });
  }

  test("the envelope's key names are the SDK's (they are literals, so that the SDK loads only with a modern message)", () => {
    assert.equal(envelope.PROTOCOL_VERSION_META_KEY, PROTOCOL_VERSION_META_KEY);
    assert.equal(envelope.CLIENT_CAPABILITIES_META_KEY, CLIENT_CAPABILITIES_META_KEY);
    assert.equal(envelope.CLIENT_INFO_META_KEY, CLIENT_INFO_META_KEY);
  });

  /** A child that starts a gateway (memory store), sends a 2025 initialize, and with `modern` a 2026-07-28 server/discover, then closes. */
  const GATEWAY = (modern: boolean) => `
import { createGateway } from "./src/index.ts";
const gateway = createGateway({ mcpServers: {}, gateway: { port: 0, store: { kind: "memory" } } });
const { url } = await gateway.listen();
const post = async (body, headers = {}) => {
  const res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers }, body: JSON.stringify(body) });
  return res.status + " " + (await res.text()).slice(0, 400);
};
console.log(await post({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } } }));
if (${modern}) {
  const _meta = { "${PROTOCOL_VERSION_META_KEY}": "2026-07-28", "${CLIENT_CAPABILITIES_META_KEY}": {}, "${CLIENT_INFO_META_KEY}": { name: "t", version: "1" } };
  console.log(await post({ jsonrpc: "2.0", id: 2, method: "server/discover", params: { _meta } }, { "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover" }));
}
await gateway.close();
`;

  async function packagesLoaded(modern: boolean): Promise<{ stdout: string; packages: Set<string> }> {
    const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-modules-"));
    const log = path.join(dir, "modules.txt");
    try {
      const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "--import", HOOK, "--input-type=module", "-e", GATEWAY(modern)], {
        cwd: ROOT,
        env: { ...process.env, OTEL_TRACES_EXPORTER: "none", EMCEEPEE_TEST_MODULE_LOG: log },
        timeout: 120_000,
      });
      const packages = new Set<string>();
      for (const line of existsSync(log) ? readFileSync(log, "utf8").split("\n") : []) {
        const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(line.slice(line.lastIndexOf("node_modules/")));
        if (m) packages.add(m[1]!);
      }
      return { stdout, packages };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  test("SDK v2's server package loads with the first modern message, not with the gateway", SLOW, async () => {
    const [legacy, modern] = await Promise.all([packagesLoaded(false), packagesLoaded(true)]);
    assert.match(legacy.stdout, /^200 /, `the 2025 initialize was answered: ${legacy.stdout}`);
    assert.ok(legacy.packages.has("@modelcontextprotocol/sdk"), "the module log sees the gateway's packages");
    assert.ok(!legacy.packages.has("@modelcontextprotocol/server"), "a gateway serving only 2025-era clients loaded @modelcontextprotocol/server");
    assert.match(modern.stdout, /^200 \{"jsonrpc":"2\.0","id":2,"result":\{"supportedVersions"/m, `server/discover was answered: ${modern.stdout}`);
    assert.ok(modern.packages.has("@modelcontextprotocol/server"), "a modern message did not load @modelcontextprotocol/server");
  });

  /**
   * Checkouts whose src/ the bundle's maps may name: this one, and the one whose node_modules/ the bundle's cache is in
   * (a copy of the repository with node_modules/ linked to another checkout's maps to the other's src/).
   */
  const checkouts = [...new Set([ROOT, path.dirname(realpathSync(path.join(ROOT, "node_modules")))])];
  /** What the bundle's loaded chunks hold: each chunk's linked source map names its inputs ("src/…", "node_modules/…"). */
  function bundleInputs(log: string): Set<string> {
    const inputs = new Set<string>();
    for (const line of existsSync(log) ? readFileSync(log, "utf8").split("\n") : []) {
      if (!line.startsWith("esm file:") || !line.endsWith(".mjs")) continue;
      const file = fileURLToPath(line.slice(4));
      if (!existsSync(`${file}.map`)) continue;
      const map = JSON.parse(readFileSync(`${file}.map`, "utf8")) as { sources: string[] };
      for (const source of map.sources) {
        const abs = path.resolve(path.dirname(file), source);
        const at = abs.lastIndexOf(`${path.sep}node_modules${path.sep}`);
        const checkout = checkouts.find((root) => abs.startsWith(path.join(root, "src") + path.sep));
        inputs.add(checkout ? path.relative(checkout, abs) : at >= 0 ? abs.slice(at + 1) : abs);
      }
    }
    return inputs;
  }

  test(
    "the bundle's serve listens without the console's pages, minisearch, oauth4webapi or zod's other locales, and loads the first two at first use",
    SLOW,
    async () => {
      tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-start-ready-"));
      const log = path.join(tmp, "bundle-modules.txt");
      const config = path.join(tmp, "bundle.json");
      await writeFile(config, JSON.stringify({ mcpServers: {} }));
      const entry = bundledCliEntry();
      const child = spawn(
        process.execPath,
        ["--import", HOOK, entry, "serve", "--config", config, "--port", "0", "--store", "memory", "--token", "start-ready-test-token"],
        {
          cwd: tmp,
          env: { ...process.env, OTEL_TRACES_EXPORTER: "none", EMCEEPEE_TEST_MODULE_LOG: log },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
      try {
        const banner = async () => {
          if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}: ${stderr}`);
          return /listening on (http:\/\/\S+)/.exec(stdout)?.[1];
        };
        const url = await pollFor(banner, "serve's banner", 120_000);
        const origin = new URL(url).origin;
        const atStart = bundleInputs(log);
        assert.ok(
          atStart.has("src/server/gateway.ts") && atStart.has("src/console/lazy.ts"),
          `the module log sees the bundle's chunks: ${[...atStart].length} inputs`,
        );
        assert.ok(atStart.has("node_modules/zod/v4/locales/en.js"), "zod's English messages are in the bundle");
        const lazy = ["src/console/index.ts", "node_modules/minisearch/", "node_modules/oauth4webapi/", "node_modules/zod/v4/locales/de.js"];
        for (const name of lazy) assert.ok(![...atStart].some((i) => i.startsWith(name)), `serve loaded ${name} before it listened`);

        // First use: a console page, and search_tools on the meta face.
        const page = await rawRequest(`${origin}/console`, { method: "GET", headers: { Authorization: "Bearer start-ready-test-token" } });
        assert.equal(page.status, 200, page.body);
        assert.match(page.body, /emceepee console/);
        const auth = { ...MCP_POST_HEADERS, Authorization: "Bearer start-ready-test-token" };
        const init = await rawRequest(`${origin}/mcp`, { method: "POST", headers: auth, body: initializeBody() });
        const session = init.headers["mcp-session-id"];
        assert.ok(typeof session === "string", `initialize: ${init.status} ${init.body}`);
        const headers = { ...auth, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" };
        await rawRequest(`${origin}/mcp`, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
        const search = await rawRequest(`${origin}/mcp`, {
          method: "POST",
          headers,
          body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "search_tools", arguments: { query: "read a file" } } }),
        });
        const [answer] = jsonRpcMessages(search);
        assert.match(JSON.stringify(answer?.result), /total_matches/, `search_tools answered: ${search.body}`);
        const after = bundleInputs(log);
        for (const name of lazy.slice(0, 2))
          assert.ok(
            [...after].some((i) => i.startsWith(name)),
            `first use did not load ${name}`,
          );
      } finally {
        await stopChild(child);
      }
    },
  );
});
