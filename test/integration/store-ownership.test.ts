/**
 * One gateway per SQLite file (docs/adr/0007, "One gateway per file"), with
 * real `emceepee serve` processes: a second one on the same file — the
 * default file, with default flags — refuses to start (exit 2) naming the
 * file, the holder's pid and port and the fix, and the first one's running
 * call still completes with its result. After `kill -9` of the holder a new
 * gateway starts on the same file at once and recovers it (the call that was
 * running is failed with the restart as reason).
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { RESTARTED_CALL } from "../../src/server/recovery.js";
import { openStore } from "../../src/store/open.js";
import { allText, promote } from "../helpers/async-extra.js";
import { runCli, startCliServe, stopChild, waitExit, type RunningCli } from "../helpers/core-extra.js";
import { ROOT, call, connectClient, slowServerStdio } from "../helpers/gateway.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";

const SLOW = { timeout: 300_000 };

let tmp: string;
let config: string;
const marker = newMarker();
const running = new Set<RunningCli>();
const clients: Client[] = [];

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-ownership-"));
  config = path.join(tmp, "config.json");
  // The marker on the upstream's command line: a SIGKILLed gateway cannot end its upstream's process group, so after() does.
  // No warm pool: a spare slow-server process that no call takes (the pool's own tests: warm-pool.test.ts).
  const slow = slowServerStdio();
  await writeFile(config, JSON.stringify({ mcpServers: { slow: { ...slow, args: [...slow.args, marker] } }, gateway: { upstream: { warmPool: 0 } } }));
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled([...running].map((r) => stopChild(r.child)));
  for (const pid of processesWith(marker)) process.kill(pid, "SIGKILL");
  assert.deepEqual(await waitForNoProcesses(marker), [], "no upstream outlives the test");
  await rm(tmp, { recursive: true, force: true });
});

/** `emceepee serve` on `config`; no upstream check at start (a slow-server spawn each that no claim here needs: the calls start their own). */
async function serve(env: NodeJS.ProcessEnv, extra: string[] = []): Promise<RunningCli> {
  const served = await startCliServe(ROOT, ["--config", config, "--port", "0", "--log-format", "json", "--no-upstream-check", ...extra], 60_000, env);
  running.add(served);
  return served;
}

async function client(url: string): Promise<Client> {
  const c = await connectClient(url);
  clients.push(c);
  return c;
}

test(
  "a second serve on the same (default) file refuses, naming the holder and the fix; the first one's call completes; after kill -9 a new one recovers the file",
  SLOW,
  async () => {
    // Default flags: both children find the same default file through the same XDG_STATE_HOME.
    const env = { XDG_STATE_HOME: path.join(tmp, "state") };
    const file = path.join(tmp, "state", "emceepee", "emceepee.db");
    const first = await serve(env);
    const port = Number(new URL(first.url).port);
    const c = await client(first.url);
    const completing = await promote(c, "slow", "slow", { ms: 6_000 }, 0);
    const killed = await promote(c, "slow", "slow", { ms: 600_000 }, 0);

    const second = await runCli(ROOT, ["serve", "--config", config, "--port", "0", "--log-format", "json"], { env, stopWhenStdout: /listening on/ });
    assert.equal(second.code, 2, `refused with exit code 2; stdout: ${second.stdout} stderr: ${second.stderr}`);
    assert.doesNotMatch(second.stdout, /listening on/);
    assert.match(second.stderr, /EMCP_STORE_UNAVAILABLE/);
    assert.ok(second.stderr.includes(file), `names the file: ${second.stderr}`);
    assert.ok(second.stderr.includes(`pid ${first.child.pid}`), `names the holder's pid: ${second.stderr}`);
    assert.ok(second.stderr.includes(`port ${port}`), `names the holder's port: ${second.stderr}`);
    assert.ok(second.stderr.includes("--store sqlite:<other file>") && second.stderr.includes("--store memory"), `says what to do: ${second.stderr}`);

    // The refused gateway did not "recover" the file under the first one: its call runs on and completes.
    const result = await call(c, "get_task_result", { task_id: completing.taskId, timeout_ms: 60_000 });
    assert.notEqual(result.isError, true, allText(result));
    assert.match(allText(result), /slept 6000ms/);
    const still = await call(c, "get_task", { task_id: killed.taskId });
    assert.match(allText(still), /working/, allText(still));

    first.child.kill("SIGKILL");
    await waitExit(first.child);
    running.delete(first);

    // Nothing stale blocks the restart: the kernel dropped the dead holder's lock.
    const third = await serve(env);
    const recovered = await runCliStoreRead(file, killed.taskId, third);
    assert.equal(recovered.status, "failed");
    assert.equal(recovered.statusMessage, RESTARTED_CALL);
    await stopChild(third.child);
    running.delete(third);
  },
);

test("--store sqlite:<file>: a second gateway on that file is refused, one on another file starts", SLOW, async () => {
  const file = path.join(tmp, "explicit.db");
  const first = await serve({}, ["--store", `sqlite:${file}`]);
  const refused = await runCli(ROOT, ["serve", "--config", config, "--port", "0", "--store", `sqlite:${file}`], { stopWhenStdout: /listening on/ });
  assert.equal(refused.code, 2, refused.stderr);
  assert.ok(refused.stderr.includes(file) && refused.stderr.includes(`pid ${first.child.pid}`), refused.stderr);
  const other = await serve({}, ["--store", `sqlite:${path.join(tmp, "other.db")}`]);
  await Promise.all([stopChild(first.child), stopChild(other.child)]);
  running.delete(first);
  running.delete(other);
  // A clean stop leaves nothing behind either: the next gateway takes the file.
  const next = await serve({}, ["--store", `sqlite:${file}`]);
  await stopChild(next.child);
  running.delete(next);
});

/** The task as the file holds it once `served` is up (it recovered the file before listening); read through a store opened beside it. */
async function runCliStoreRead(file: string, taskId: string, served: RunningCli) {
  assert.match(served.stderr(), /state_recovered/);
  const store = await openStore({ kind: "sqlite", path: file });
  try {
    const record = await store.tasks.get(taskId);
    assert.ok(record, "the task is still in the file");
    return record;
  } finally {
    await store.close();
  }
}
