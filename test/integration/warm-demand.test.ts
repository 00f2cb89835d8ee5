/**
 * The warm pool follows demand (docs/adr/0034, issue 27), proven on a real
 * `emceepee serve`: one session's first call leaves one process waiting; a
 * burst of sessions leaves as many as it took (bounded by warmPool); once no
 * session has taken one for warmPoolIdleMs, none waits. Processes are counted
 * by a marker on their command line.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { call, connectClient, slowServerStdio } from "../helpers/gateway.js";
import { firstText, pollFor, startCliServe, stopChild, type RunningCli } from "../helpers/core-extra.js";
import { newMarker, processesWith } from "../helpers/processes.js";

/** Bound for processes to be started or ended on a loaded 2-core machine. */
const WAIT_MS = 90_000;

let tmp: string | undefined;
const running: RunningCli[] = [];
const clients: Client[] = [];
const marker = newMarker();

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(running.map((r) => stopChild(r.child)));
  for (const pid of processesWith(marker)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function firstCall(url: string): Promise<void> {
  const client = await connectClient(url);
  clients.push(client);
  const r = await call(client, "execute_tool", { server: "slow", tool: "pid", args: {}, timeout_ms: 120_000 });
  assert.notEqual(r.isError, true, firstText(r));
}

const count = (n: number) => async () => (processesWith(marker).length === n ? true : undefined);

test("spare processes follow the sessions that asked for them, and are gone once nobody has for warmPoolIdleMs", { timeout: 600_000 }, async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-warm-demand-"));
  const file = path.join(tmp, "config.json"); // not the marker: the gateway is not one of the counted processes
  const base = slowServerStdio();
  const config = {
    mcpServers: { slow: { ...base, args: [...base.args, marker], sharing: "session" } },
    gateway: { upstream: { warmPool: 3, warmPoolWindowMs: 120_000, warmPoolIdleMs: 15_000 } },
  };
  await writeFile(file, JSON.stringify(config));
  const served = await startCliServe(base.cwd, ["--config", file, "--port", "0", "--log-level", "info", "--no-upstream-check"]);
  running.push(served);

  await firstCall(served.url);
  await pollFor(count(2), "the session's process and one waiting", WAIT_MS);
  // A fixed pool of 3 would have started all three now; demand (one session) asks for one.
  assert.equal(processesWith(marker).length, 2, "one session, one waiting process");

  await Promise.all([firstCall(served.url), firstCall(served.url)]);
  await pollFor(count(6), "three sessions' processes and three waiting", WAIT_MS);

  // Nobody takes one any more: after warmPoolIdleMs the waiting ones end, the sessions' own stay.
  await pollFor(count(3), "the waiting processes ended", WAIT_MS);
  assert.match(served.stdout() + served.stderr(), /warm_process_released/);
});
