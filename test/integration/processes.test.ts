/**
 * Zero orphan processes on every exit path, proven at the process edge:
 * `emceepee serve` runs as a real child process, its stdio upstream is the
 * wrapper fixture (test/fixtures/forking-server.mjs: server-everything plus a
 * helper that ignores SIGTERM, every process marked on its command line), and
 * a real SDK client opens a session that starts the upstream. Then: SIGTERM
 * to the gateway, SIGKILL to the upstream itself, and SIGINT twice. The three
 * cases run at once: each has its own gateway, config and marker, and counts
 * only its own marked processes.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { everythingServerEntry } from "../../src/config/demo.js";
import { FIXTURES, ROOT, call, connectClient, waitConnected } from "../helpers/gateway.js";
import { firstText, listServers, pollFor, startCliServe, stopChild, waitExit, type RunningCli } from "../helpers/core-extra.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";

const SLOW = { timeout: 120_000 };
/** gateway.upstream.killGraceMs in these tests. */
const GRACE_MS = 500;

let tmp: Promise<string> | undefined;
const running: RunningCli[] = [];
const markers: string[] = [];

after(async () => {
  await Promise.allSettled(running.map((r) => stopChild(r.child)));
  // A failing test must not leave its marked processes on the machine.
  for (const pid of markers.flatMap((m) => processesWith(m))) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
  if (tmp) await rm(await tmp, { recursive: true, force: true });
});

/**
 * `emceepee serve` with the wrapper upstream, and a client whose session has
 * started it and called through it: the three marked processes are running.
 */
/**
 * `upstream.warmPool` (default 0 here): with 1, the gateway also keeps a
 * second wrapper tree waiting (docs/adr/0010), and what is counted is both
 * trees — the shutdown must end the waiting one too.
 */
async function serveWrapped(upstream: Record<string, unknown> = {}): Promise<{ marker: string; served: RunningCli; client: Client }> {
  const marker = newMarker();
  const n = markers.push(marker); // taken before any await: the cases run at once
  tmp ??= mkdtemp(path.join(os.tmpdir(), "emceepee-processes-test-"));
  const file = path.join(await tmp, `config-${n}.json`); // not the marker: the gateway is not one of the counted processes
  const config = {
    mcpServers: { wrapped: { command: process.execPath, args: [path.join(FIXTURES, "forking-server.mjs"), everythingServerEntry(), marker] } },
    gateway: { upstream: { killGraceMs: GRACE_MS, warmPool: 0, ...upstream } },
  };
  await writeFile(file, JSON.stringify(config));
  // Without the start-up check: its throwaway upstream would be counted too (ops.test.ts covers the check's processes).
  const served = await startCliServe(ROOT, ["--config", file, "--port", "0", "--log-level", "info", "--no-upstream-check"]);
  running.push(served);
  const client = await connectClient(served.url);
  await waitConnected(client, "wrapped");
  const echo = await call(client, "execute_tool", { server: "wrapped", tool: "echo", args: { message: "up" } });
  assert.equal(firstText(echo), "Echo: up");
  if (upstream.warmPool) await pollFor(async () => (processesWith(marker).length === 6 ? true : undefined), "the session's tree and a waiting one");
  else assert.equal(processesWith(marker).length, 3, "wrapper, server-everything and the stubborn helper are running");
  return { marker, served, client };
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}

describe("exit paths (the cases at once)", { concurrency: true }, () => {
  test(
    "SIGTERM: the gateway exits 0 only after its upstreams' whole process groups are gone (a grandchild that ignores SIGTERM and the warm pool's waiting tree included)",
    SLOW,
    async () => {
      const { marker, served, client } = await serveWrapped({ warmPool: 1 });
      await client.close();
      served.child.kill("SIGTERM");
      const { code, signal } = await waitExit(served.child, 60_000);
      assert.equal(signal, null, `killed by ${signal}; stderr: ${served.stderr()}`);
      assert.equal(code, 0, `stderr: ${served.stderr()}`);
      assert.deepEqual(processesWith(marker), [], "close() was awaited: nothing is left when the gateway has exited");
      assert.deepEqual(await waitForNoProcesses(marker, GRACE_MS), []);
    },
  );

  test("an upstream killed with SIGKILL takes its children with it, and the gateway keeps serving", SLOW, async () => {
    const { marker, served, client } = await serveWrapped({ reconnect: { maxAttempts: 0 } });
    const wrapper = processesWith(marker).find((pid) => commandLine(pid).includes("forking-server.mjs"));
    assert.ok(wrapper, "the wrapper (the gateway's direct child) is found");
    process.kill(wrapper, "SIGKILL");
    // Its children (server-everything and the helper that ignores SIGTERM) were re-parented to init: only their group reaches them.
    assert.deepEqual(await waitForNoProcesses(marker), [], "the dead upstream's children are gone");

    const row = await pollFor(
      async () => (await listServers(client)).find((s) => s.name === "wrapped" && s.status !== "connected"),
      "the gateway to notice the upstream's end",
    );
    assert.match(row.last_error ?? "", /connection closed/);
    const again = await call(client, "execute_tool", { server: "wrapped", tool: "echo", args: { message: "again" } });
    assert.equal(firstText(again), "Echo: again", "the next use starts the upstream anew");
    assert.equal(processesWith(marker).length, 3);

    await client.close();
    served.child.kill("SIGTERM");
    assert.equal((await waitExit(served.child, 60_000)).code, 0, served.stderr());
    assert.deepEqual(processesWith(marker), []);
  });

  test("SIGINT twice: the second signal forces exit 1 and still SIGKILLs every upstream process", SLOW, async () => {
    // A grace far longer than the test: the graceful close is still waiting on the stubborn helper when the second signal lands.
    const { marker, served, client } = await serveWrapped({ killGraceMs: 60_000, warmPool: 1 });
    await client.close();
    served.child.kill("SIGINT");
    await pollFor(async () => (/"msg":"shutdown_started"/.test(served.stderr()) ? true : undefined), "the first SIGINT to start the shutdown");
    served.child.kill("SIGINT");
    const { code, signal } = await waitExit(served.child, 30_000);
    assert.equal(signal, null, served.stderr());
    assert.equal(code, 1, `a forced exit; stderr: ${served.stderr()}`);
    assert.match(served.stderr(), /"msg":"shutdown_forced"/);
    assert.deepEqual(await waitForNoProcesses(marker), [], "every upstream process was SIGKILLed before the gateway exited");
  });
});
