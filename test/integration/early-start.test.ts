/**
 * `serve` starts each stdio upstream's process before its own modules load
 * and hands it to the first connection (docs/adr/0039, src/cli/early.ts,
 * src/upstream/sharing/early-processes.ts), spawning the real CLI: the first
 * session's first call runs in that process (in shared mode the start-up check
 * connects the shared connection with it, and no other process of the server
 * starts; a SIGTERM during that connect is not held by it), an early process
 * that fails is reported and the start-up check still reports the server as
 * failed, `--no-upstream-check` starts nothing early, and a SIGTERM during the
 * start leaves no process behind. The cases run at once
 * (each its own gateway, config, marker and processes): the file takes about
 * as long as its longest case, not the sum of their start-ups and stops.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, watch } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { call, connectClient } from "../helpers/gateway.js";
import { CLI_ARGS, cliEnv, firstText, logLines, pollFor, startCliServe, stopChild, waitExit } from "../helpers/core-extra.js";
import { fixtureNodeArgs } from "../helpers/cli-build.js";
import { processesWith, waitForNoProcesses } from "../helpers/processes.js";

const SLOW = { timeout: 300_000 };

let tmp: string | undefined;
let configs = 0;
after(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** A config with one slow-server upstream whose command line carries `marker` (to find its processes). */
async function config(marker: string, extra: Record<string, unknown> = {}, servers?: Record<string, unknown>, gateway?: unknown): Promise<string> {
  tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-early-"));
  // Not named after the marker: the gateway's own command line carries the file's name.
  const file = path.join(tmp, `config-${++configs}.json`);
  const mcpServers = servers ?? { slow: { command: process.execPath, args: [...fixtureNodeArgs("slow-server"), marker], ...extra } };
  await writeFile(file, JSON.stringify({ mcpServers, ...(gateway ? { gateway } : {}) }));
  return file;
}

/** `emceepee serve --config file` on a free port, memory store, spawned directly (the cases signal it); its stdout so far. */
function serveRaw(file: string) {
  const child = spawn(process.execPath, [...CLI_ARGS, "serve", "--config", file, "--port", "0", "--store", "memory"], {
    env: cliEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr.resume();
  return { child, stdout: () => stdout };
}

/** The pid of the process a new session's first call to `slow` ran in (the fixture's `pid` tool). */
async function firstCallPid(url: string): Promise<number> {
  const client = await connectClient(url);
  try {
    return Number(firstText(await call(client, "execute_tool", { server: "slow", tool: "pid", args: {} })));
  } finally {
    await client.close();
  }
}

let markers = 0;
/** Unique per case even when cases start in the same millisecond (they run at once). */
const marker = (what: string) => `early-${what}-${process.pid}-${Date.now()}-${++markers}`;

/** Resolves when `file` exists: an inotify watch on its folder, not a poll. */
async function fileAppears(file: string, timeoutMs: number): Promise<void> {
  const watcher = watch(path.dirname(file));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${file} did not appear within ${timeoutMs} ms`)), timeoutMs);
      const check = () => {
        if (!existsSync(file)) return;
        clearTimeout(timer);
        resolve();
      };
      watcher.on("change", check);
      watcher.on("error", reject);
      check(); // it may exist already
    });
  } finally {
    watcher.close();
  }
}

describe("early processes (the cases at once)", { concurrency: true }, () => {
  for (const sharing of ["session"] as const) {
    test(`${sharing} mode: the process started before listening serves the first session's first call`, SLOW, async () => {
      const m = marker(sharing);
      const cli = await startCliServe(os.tmpdir(), ["--config", await config(m, { sharing }), "--port", "0", "--store", "memory", "--log-level", "info"]);
      try {
        const started = await pollFor(async () => logLines(cli.stderr(), "upstream_started_early")[0], "upstream_started_early in the log", 120_000);
        assert.equal(started.server, "slow");
        assert.ok(Number.isInteger(started.upstreamPid), `a pid: ${JSON.stringify(started)}`);
        assert.equal(await firstCallPid(cli.url), started.upstreamPid, "the first call ran in the early process");
      } finally {
        await stopChild(cli.child);
      }
      assert.deepEqual(await waitForNoProcesses(m), [], "no upstream process left");
    });
  }

  test("shared mode: the start-up check connects the shared connection with the early process, and the first session starts nothing", SLOW, async (t) => {
    const m = marker("shared");
    // This case's own folder (the cases run at once, and `tmp` is set by whichever comes first).
    const dir = await mkdtemp(path.join(os.tmpdir(), "emceepee-early-shared-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    // Loaded before the fixture by every process of this server: each appends its pid to <marker>.spawns beside it.
    const recorder = path.join(dir, "spawn-recorder.mjs");
    await writeFile(
      recorder,
      'import { appendFileSync } from "node:fs";\nappendFileSync(new URL(`./${process.argv.at(-1)}.spawns`, import.meta.url), `${process.pid}\\n`);\n',
    );
    const spawns = path.join(dir, `${m}.spawns`);
    const servers = { slow: { command: process.execPath, args: ["--import", recorder, ...fixtureNodeArgs("slow-server"), m], sharing: "shared" } };
    const cli = await startCliServe(os.tmpdir(), ["--config", await config(m, {}, servers), "--port", "0", "--store", "memory", "--log-level", "info"]);
    try {
      const started = await pollFor(async () => logLines(cli.stderr(), "upstream_started_early")[0], "upstream_started_early in the log", 120_000);
      assert.equal(started.server, "slow");
      const checked = await pollFor(async () => logLines(cli.stderr(), "upstream_check_ok")[0], "upstream_check_ok in the log", 120_000);
      assert.equal(checked.server, "slow");
      assert.ok(Number(checked.tools) > 0, `the check listed the tools: ${JSON.stringify(checked)}`);
      assert.equal(await firstCallPid(cli.url), started.upstreamPid, "the first call ran in the early process");
      const pids = (await readFile(spawns, "utf8")).trim().split("\n");
      assert.deepEqual(pids, [String(started.upstreamPid)], "one process of the shared server: the early one, which the check connected (none of its own)");
    } finally {
      await stopChild(cli.child);
    }
    assert.deepEqual(await waitForNoProcesses(m), [], "no upstream process left");
  });

  test("an early process that fails is logged, and the start-up check reports the server failed as before", SLOW, async () => {
    const m = marker("fail");
    const file = await config(m, {}, { bad: { command: process.execPath, args: ["-e", "process.stderr.write('early-boom\\n'); process.exit(3)", m] } });
    const cli = await startCliServe(os.tmpdir(), ["--config", file, "--port", "0", "--store", "memory", "--log-level", "info"]);
    try {
      const failed = await pollFor(async () => logLines(cli.stderr(), "early_process_failed")[0], "early_process_failed in the log", 120_000);
      assert.equal(failed.server, "bad");
      const checked = await pollFor(async () => logLines(cli.stderr(), "upstream_check_failed")[0], "upstream_check_failed in the log", 120_000);
      assert.equal(checked.server, "bad");
      assert.match(String(checked.reason), /early-boom/, "the check's reason carries the process's stderr, as before");
    } finally {
      await stopChild(cli.child);
    }
    assert.deepEqual(await waitForNoProcesses(m), [], "no upstream process left");
  });

  for (const [what, file, flags] of [
    ["--no-upstream-check", (m: string) => config(m), ["--no-upstream-check"]],
    ["warmPool: 0", (m: string) => config(m, {}, undefined, { upstream: { warmPool: 0 } }), []],
  ] as const) {
    test(`${what} starts no process before the first session`, SLOW, async () => {
      const m = marker("nocheck");
      const cli = await startCliServe(os.tmpdir(), ["--config", await file(m), "--port", "0", "--store", "memory", "--log-level", "info", ...flags]);
      try {
        // An early process is spawned before the gateway is even made, so it would be running by the time the banner is out;
        // with the check on (warmPool: 0), the check's own process may be too: only an early one is logged.
        if (flags.length) assert.deepEqual(processesWith(m), [], "no upstream process while no session asked");
        assert.deepEqual(logLines(cli.stderr(), "upstream_started_early"), []);
        if (!flags.length) await pollFor(async () => logLines(cli.stderr(), "upstream_check_ok")[0], "upstream_check_ok", 120_000);
        assert.deepEqual(logLines(cli.stderr(), "upstream_started_early"), [], "no early process once the check is done either");
      } finally {
        await stopChild(cli.child);
      }
    });
  }

  test("shared mode: SIGTERM while the start-up check connects a server that never answers ends it without waiting for the connect", SLOW, async () => {
    const m = marker("hung");
    tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-early-"));
    // Reads its stdin and never answers `initialize`; the connect would wait for connectTimeoutMs (10 min here).
    const hung = { hung: { command: process.execPath, args: ["-e", "process.stdin.resume()", m], sharing: "shared" } };
    const file = await config(m, {}, hung, { upstream: { connectTimeoutMs: 600_000 } });
    const { child, stdout } = serveRaw(file);
    try {
      // The banner is printed just before the check starts, which connects the shared connection with the early process.
      await pollFor(async () => (stdout().includes("listening on") ? true : undefined), "the banner", 120_000);
      await pollFor(async () => (processesWith(m).length ? true : undefined), "the upstream's process", 120_000);
      child.kill("SIGTERM");
      const exit = await waitExit(child, 60_000);
      assert.deepEqual([exit.code, exit.signal], [0, null], "closed and exited 0, not held by the connect in progress");
    } finally {
      await stopChild(child);
    }
    assert.deepEqual(await waitForNoProcesses(m), [], "no upstream process left");
  });

  test("SIGTERM while the gateway starts ends the early processes too", SLOW, async (t) => {
    const m = marker("sigterm");
    tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-early-"));
    // Written by the upstream as it starts (its path carries the marker): the test signals the gateway as soon as it appears.
    const startedFile = path.join(tmp, `${m}.started`);
    // A server that does not end when its stdin closes (as many do): only its process group's end stops it.
    const script = "require('fs').writeFileSync(process.argv[1], ''); process.stdin.resume(); process.stdin.on('end', () => setInterval(() => {}, 1000))";
    const stubborn = { stubborn: { command: process.execPath, args: ["-e", script, startedFile] } };
    const { child, stdout } = serveRaw(await config(m, {}, stubborn));
    try {
      // The upstream's process exists (it starts before the gateway's modules load): stop the gateway now.
      await fileAppears(startedFile, 120_000);
      const listening = stdout().includes("listening on");
      t.diagnostic(listening ? "the gateway was listening already" : "signalled before the gateway listened");
      child.kill("SIGTERM");
      const exit = await waitExit(child, 60_000);
      assert.ok(
        (exit.code === null && exit.signal === "SIGTERM") || (exit.code === 0 && exit.signal === null),
        `ended by the signal, or closed with exit 0 (${JSON.stringify(exit)}; listening already: ${listening})`,
      );
    } finally {
      await stopChild(child);
    }
    assert.deepEqual(await waitForNoProcesses(m), [], "no upstream process left");
  });
});
