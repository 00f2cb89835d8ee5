/**
 * The operator's first hour, at the process edge (the real CLI as a child):
 * /healthz and /readyz for container probes (no token, any Host; 503 through
 * a shutdown held up by a slow upstream), the start-up check of each
 * upstream (logged, processes gone), what /all and /servers/<broken>/mcp
 * say about a broken upstream, SIGHUP reloading the config (and keeping it
 * on a bad one), and `npm start`: the gateway is the process npm signals
 * (in a copy of the repository with the dist/ test/helpers/dist-build.ts built
 * once for the run, recorded as current: no build of the repository's dist/).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { everythingServerEntry } from "../../src/config/demo.js";
import { UNAVAILABLE_META_KEY } from "../../src/faces/transparent/handlers.js";
import { FIXTURES, ROOT, call, connectClient, everythingStdio } from "../helpers/gateway.js";
import {
  MCP_POST_HEADERS,
  cliEnv,
  firstText,
  initializeBody,
  jsonRpcMessages,
  listServers,
  pollFor,
  rawRequest,
  startCliServe,
  startEverythingHttp,
  type ChildServer,
  stopChild,
  waitExit,
  type RunningCli,
} from "../helpers/core-extra.js";
import { stageRepository } from "../helpers/dist-build.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";

const SLOW = { timeout: 180_000 };

let tmp: string | undefined;
const running: RunningCli[] = [];
const clients: Client[] = [];
const markers: string[] = [];
const stopLater: ChildServer[] = [];

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(running.map((r) => stopChild(r.child)));
  await Promise.allSettled(stopLater.map((s) => s.close()));
  for (const pid of markers.flatMap((m) => processesWith(m))) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function writeConfig(name: string, content: unknown): Promise<string> {
  tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-ops-test-"));
  const file = path.join(tmp, name);
  await writeFile(file, typeof content === "string" ? content : JSON.stringify(content));
  return file;
}

async function serve(args: string[]): Promise<RunningCli> {
  const served = await startCliServe(ROOT, ["--port", "0", ...args]);
  running.push(served);
  return served;
}

async function client(url: string): Promise<Client> {
  const c = await connectClient(url);
  clients.push(c);
  return c;
}

/** server-everything with `marker` on its command line. */
function markedEverything(marker: string) {
  return { command: process.execPath, args: [everythingServerEntry(), "stdio", marker] };
}

/** The wrapper upstream (its helper ignores SIGTERM), every process marked. */
/** A wrapper upstream with a helper that ignores SIGTERM (the tests count its 3 processes: configs give it `warmPool: 0`, no waiting second tree). */
function stubbornUpstream(marker: string) {
  return { command: process.execPath, args: [path.join(FIXTURES, "forking-server.mjs"), everythingServerEntry(), marker] };
}

/** Calls the upstream's echo tool through the meta face (which starts the upstream if it is not yet running). */
async function echo(c: Client, server: string, message = "up"): Promise<void> {
  assert.equal(firstText(await call(c, "execute_tool", { server, tool: "echo", args: { message } })), `Echo: ${message}`);
}

/** Parsed pino lines of a child's stderr with this msg. */
function logLines(stderr: string, msg: string): Array<Record<string, any>> {
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, any>)
    .filter((l) => l.msg === msg);
}

async function waitForLog(served: RunningCli, msg: string, where: (line: Record<string, any>) => boolean = () => true): Promise<Record<string, any>> {
  return pollFor(async () => logLines(served.stderr(), msg).find(where), `log line ${msg}`, 60_000);
}

describe("health probes", () => {
  test("/healthz answers {status: ok} without a token and whatever the Host; /readyz says ready; MCP still needs the token", SLOW, async () => {
    const token = "ops-test-token-0123456789";
    const served = await serve(["--config", await writeConfig("empty.json", { mcpServers: {} }), "--token", token, "--log-level", "silent"]);
    const base = served.url.replace(/\/mcp$/, "");
    for (const headers of [{}, { Host: "prober.internal:1234" }, { Host: "evil.example", Origin: "https://evil.example" }]) {
      const health = await rawRequest(`${base}/healthz`, { method: "GET", headers });
      assert.equal(health.status, 200, JSON.stringify(headers));
      assert.deepEqual(JSON.parse(health.body), { status: "ok" }, "liveness and nothing else");
      const ready = await rawRequest(`${base}/readyz`, { method: "GET", headers });
      assert.equal(ready.status, 200);
      assert.deepEqual(JSON.parse(ready.body), { status: "ready" });
    }
    const head = await rawRequest(`${base}/healthz`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.body, "");
    // Only GET/HEAD are probes; everything else keeps every guard.
    assert.equal((await rawRequest(`${base}/healthz`, { method: "POST", headers: { Host: "evil.example" }, body: "{}" })).status, 403);
    assert.equal((await rawRequest(`${base}/healthz`, { method: "POST", body: "{}" })).status, 401);
    assert.equal((await rawRequest(served.url, { headers: MCP_POST_HEADERS, body: initializeBody() })).status, 401);
    assert.equal(
      (await rawRequest(served.url, { headers: { ...MCP_POST_HEADERS, Host: "evil.example", Authorization: `Bearer ${token}` }, body: initializeBody() }))
        .status,
      403,
    );
  });

  test("/readyz is 503 through a shutdown held up by a slow-to-die upstream, /healthz stays ok, MCP requests get 503; then exit 0", SLOW, async () => {
    const marker = newMarker();
    markers.push(marker);
    const file = await writeConfig("slow-to-die.json", {
      mcpServers: { slow: stubbornUpstream(marker) },
      gateway: { upstream: { killGraceMs: 2_000, warmPool: 0 } },
    });
    const served = await serve(["--config", file, "--log-level", "info", "--no-upstream-check"]);
    const base = served.url.replace(/\/mcp$/, "");
    const c = await client(served.url);
    await echo(c, "slow");
    assert.equal(processesWith(marker).length, 3, "the upstream runs, with its helper that ignores SIGTERM");

    served.child.kill("SIGTERM");
    const notReady = await pollFor(async () => {
      const r = await rawRequest(`${base}/readyz`, { method: "GET" }).catch(() => undefined);
      return r?.status === 503 ? r : undefined;
    }, "/readyz to say 503");
    assert.deepEqual(JSON.parse(notReady.body), { status: "shutting_down" });
    assert.ok(processesWith(marker).length > 0, "still shutting down: the upstream is not gone yet");
    const health = await rawRequest(`${base}/healthz`, { method: "GET" });
    assert.deepEqual([health.status, JSON.parse(health.body)], [200, { status: "ok" }]);
    const mcp = await rawRequest(served.url, { headers: MCP_POST_HEADERS, body: initializeBody() });
    assert.equal(mcp.status, 503);
    assert.match(jsonRpcMessages(mcp)[0]?.error?.message ?? "", /shutting down/);

    const { code, signal } = await waitExit(served.child, 60_000);
    assert.deepEqual([code, signal], [0, null], served.stderr());
    assert.deepEqual(processesWith(marker), [], "the listener closed last, after the upstream was gone");
  });
});

describe("start-up check and broken upstreams", () => {
  test("each config server is tried once in the background: ok / failed with the reason logged, no process left but the early one", SLOW, async () => {
    const marker = newMarker();
    markers.push(marker);
    const file = await writeConfig("startup-check.json", {
      mcpServers: { good: markedEverything(marker), broken: { command: "./no-such-server.sh" }, remote: { url: "http://127.0.0.1:9/mcp" } },
    });
    const served = await serve(["--config", file, "--log-level", "info"]);
    assert.match(served.stdout(), /checking each upstream once in the background/);
    const ok = await waitForLog(served, "upstream_check_ok", (l) => l.server === "good");
    assert.ok(ok.tools > 0, JSON.stringify(ok));
    // The check's own process is gone; the one serve started before listening waits for the first session (docs/adr/0039).
    const early = await waitForLog(served, "upstream_started_early", (l) => l.server === "good");
    assert.deepEqual(processesWith(marker), [early.upstreamPid], "the check's upstream was closed before its result was logged");
    const broken = await waitForLog(served, "upstream_check_failed", (l) => l.server === "broken");
    assert.match(
      broken.reason,
      new RegExp(`${path.join(path.dirname(file), "no-such-server.sh").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}.*ENOENT|ENOENT.*no-such-server`),
    );
    const remote = await waitForLog(served, "upstream_check_failed", (l) => l.server === "remote");
    assert.match(remote.reason, /fetch failed|ECONNREFUSED/);
  });

  test(
    "/all lists what answers and names the upstream it could not list (log and _meta); /servers/<broken>/mcp says why without meta-face advice",
    SLOW,
    async () => {
      // No warm spare (upstream.warmPool 0) here and in the reload case: not what they test, one server-everything fewer each (issue 21).
      const file = await writeConfig("all-broken.json", {
        mcpServers: { everything: everythingStdio(), broken: { command: "./no-such-server.sh" } },
        gateway: { upstream: { warmPool: 0 } },
      });
      const served = await serve(["--config", file, "--log-level", "info", "--no-upstream-check"]);
      const base = served.url.replace(/\/mcp$/, "");
      const all = await client(`${base}/all/mcp`);
      const listed = await all.listTools();
      assert.ok(
        listed.tools.some((t) => t.name === "everything__echo"),
        "the working upstream's tools are there",
      );
      assert.ok(!listed.tools.some((t) => t.name.startsWith("broken__")));
      const missing = listed._meta?.[UNAVAILABLE_META_KEY] as Array<{ server: string; reason: string }> | undefined;
      assert.deepEqual(
        missing?.map((m) => m.server),
        ["broken"],
      );
      assert.match(missing?.[0]?.reason ?? "", /^EMCP_UPSTREAM_UNAVAILABLE: .*ENOENT/);
      await waitForLog(served, "aggregate_list_failed", (l) => l.server === "broken");

      const single = await rawRequest(`${base}/servers/broken/mcp`, { headers: MCP_POST_HEADERS, body: initializeBody() });
      assert.equal(single.status, 502);
      const message = String(jsonRpcMessages(single)[0]?.error?.message);
      assert.match(message, /^EMCP_UPSTREAM_UNAVAILABLE: upstream 'broken' is unavailable: .*ENOENT.*This endpoint serves only 'broken'/);
      assert.match(message, /emceepee check --config <file> --connect/);
      assert.doesNotMatch(message, /list_servers|get_logs|add_server/, "tools this face does not have");
    },
  );
});

describe("SIGHUP reloads the config", () => {
  test(
    "servers added, changed and removed as add_server/remove_server would; runtime-added ones kept; a bad file is logged and the old config kept",
    SLOW,
    async () => {
      const file = await writeConfig("reload.json", { mcpServers: { one: everythingStdio() }, gateway: { upstream: { warmPool: 0 } } });
      const served = await serve(["--config", file, "--log-level", "info", "--no-upstream-check"]);
      const c = await client(served.url);
      await echo(c, "one");
      const remote = await startEverythingHttp();
      stopLater.push(remote);
      const added = await call(c, "add_server", { name: "runtime", url: remote.url });
      assert.ok(!added.isError, firstText(added));
      const names = async () => (await listServers(c)).map((s) => `${s.name}:${(s as { source?: string }).source}`).sort();
      assert.deepEqual(await names(), ["one:config", "runtime:runtime"]);

      // One server more, and the runtime one declared too (it keeps its runtime entry).
      await writeFile(
        file,
        JSON.stringify({
          mcpServers: { one: everythingStdio(), two: everythingStdio(), runtime: { command: "elsewhere" } },
          gateway: { upstream: { warmPool: 0 } },
        }),
      );
      served.child.kill("SIGHUP");
      const reloaded = await waitForLog(served, "config_reloaded");
      assert.deepEqual([reloaded.added, reloaded.unchanged, reloaded.skipped], [["two"], ["one"], ["runtime"]]);
      assert.deepEqual(await names(), ["one:config", "runtime:runtime", "two:config"]);
      await echo(c, "two", "reloaded"); // the added server works
      assert.match(JSON.stringify(logLines(served.stderr(), "config_reload_server_skipped")), /"server":"runtime".*added at runtime/);

      // Garbage: logged with the reason, the running config stays.
      await writeFile(file, "{ not json");
      served.child.kill("SIGHUP");
      const failed = await waitForLog(served, "config_reload_failed");
      assert.match(failed.reason, /not valid JSON/);
      assert.deepEqual(await names(), ["one:config", "runtime:runtime", "two:config"], "still serving with the previous config");
      assert.equal(firstText(await call(c, "execute_tool", { server: "one", tool: "echo", args: { message: "still" } })), "Echo: still");

      // Removed and changed; a settings change is reported as needing a restart.
      await writeFile(
        file,
        JSON.stringify({
          mcpServers: { two: { ...everythingStdio(), env: { CHANGED: "1" } } },
          gateway: { upstream: { warmPool: 0 }, tasks: { defaultTtlMs: 1000 } },
        }),
      );
      served.child.kill("SIGHUP");
      const second = await waitForLog(served, "config_reloaded", (l) => l.removed?.length > 0);
      assert.deepEqual([second.removed, second.updated], [["one"], ["two"]]);
      assert.deepEqual((await waitForLog(served, "config_reload_settings_need_restart")).settings, ["tasks"]);
      assert.deepEqual(await names(), ["runtime:runtime", "two:config"]);
      assert.equal(firstText(await call(c, "execute_tool", { server: "two", tool: "echo", args: { message: "changed" } })), "Echo: changed");
      assert.equal(served.child.exitCode, null, "SIGHUP never ends the gateway");
    },
  );
});

describe("npm start", () => {
  /**
   * A checkout whose dist/ is current and recorded so (scripts/build-inputs.mjs), as after an `npm start` that built:
   * a copy of the repository with the run's shared build (test/helpers/dist-build.ts), not a build of the repository's dist/.
   */
  async function checkout(): Promise<string> {
    tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-ops-test-"));
    const dir = path.join(tmp, "checkout");
    await stageRepository(dir, { nodeModules: true });
    const { recordBuild } = (await import(pathToFileURL(path.join(dir, "scripts/build-inputs.mjs")).href)) as { recordBuild: (root: string) => void };
    recordBuild(dir);
    return dir;
  }

  let cwd = "";
  // Waits for the run's build of dist/ when it is still under way (run-all starts it): a bound for a loaded machine.
  before(async () => (cwd = await checkout()), { timeout: 900_000 });

  /** `npm start -- <args>` in `cwd`, in its own process group (as a terminal would run it). */
  function npmStart(cwd: string, args: string[]) {
    // Its own state file (serve keeps state in SQLite by default), never the user's.
    const child = spawn("npm", ["start", "--", ...args], { cwd, env: cliEnv(), detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    const listening = pollFor(async () => /listening on (http:\/\/\S+)/.exec(stdout)?.[1], "npm start to print the URL", 150_000);
    return { child, listening, stdout: () => stdout, stderr: () => stderr };
  }

  /** The gateway itself: the process running scripts/start.mjs (npm's direct child, thanks to `exec`). */
  function gatewayPid(marker: string, npmPid: number): number {
    const pid = processesWith(marker).find((p) => readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0")[1]?.endsWith("scripts/start.mjs"));
    assert.ok(pid, "the gateway process is found");
    const ppid = Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
    assert.equal(ppid, npmPid, "no shell between npm and the gateway");
    return pid;
  }

  test(
    "SIGTERM to npm reaches the gateway: it closes and exits, its upstreams gone; Ctrl-C (SIGINT to the group) is one signal, not a forced exit; a current dist/ is not rebuilt",
    SLOW,
    async () => {
      const marker = newMarker();
      markers.push(marker);
      // The marker in the file name puts it on npm's and the gateway's command lines too.
      const file = await writeConfig(`${marker}.json`, {
        mcpServers: { wrapped: stubbornUpstream(marker) },
        gateway: { upstream: { killGraceMs: 500, warmPool: 0 } },
      });
      const args = ["--config", file, "--port", "0", "--log-level", "info", "--no-upstream-check"];

      const first = npmStart(cwd, args);
      try {
        const url = await first.listening;
        assert.doesNotMatch(first.stderr(), /compiling TypeScript/, "dist/ was recorded as current");
        const gateway = gatewayPid(marker, first.child.pid!);
        const c = await client(url);
        await echo(c, "wrapped");
        const upstreams = processesWith(marker).filter((p) => p !== gateway && p !== first.child.pid);
        assert.equal(upstreams.length, 3, "the wrapper, server-everything and the helper that ignores SIGTERM");
        process.kill(first.child.pid!, "SIGTERM"); // npm only, as a supervisor or an IDE's stop button does
        const { code } = await waitExit(first.child, 60_000);
        assert.equal(code, 0, first.stderr());
        assert.match(first.stderr(), /"signal":"SIGTERM","msg":"shutdown_started"/);
        assert.deepEqual(processesWith(marker), [], "nothing outlives npm: the gateway and every upstream process are gone");
      } finally {
        if (first.child.exitCode === null) process.kill(-first.child.pid!, "SIGKILL");
      }

      const second = npmStart(cwd, args);
      try {
        const url = await second.listening;
        assert.doesNotMatch(second.stderr(), /compiling TypeScript/, "dist/ is still current");
        const c = await client(url);
        await echo(c, "wrapped");
        process.kill(-second.child.pid!, "SIGINT"); // Ctrl-C: the terminal signals the whole group, and npm forwards it again
        const { code } = await waitExit(second.child, 60_000);
        assert.equal(code, 0, `a clean close, not a forced exit 1: ${second.stderr()}`);
        assert.doesNotMatch(second.stderr(), /shutdown_forced/);
        assert.deepEqual(await waitForNoProcesses(marker, 1_000), []);
      } finally {
        if (second.child.exitCode === null) process.kill(-second.child.pid!, "SIGKILL");
      }
    },
  );
});
