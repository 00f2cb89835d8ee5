/**
 * A SQLite store that stops taking writes while the gateway runs
 * (docs/adr/0007, "When the store fails"), with real failures: the disk full
 * (a small tmpfs, filled up: SQLite's own SQLITE_FULL), and the store file
 * deleted under the gateway. A call that completes meanwhile still gives its
 * result to the client that waits for it, /readyz turns 503 and the log says
 * why and what to do; when space is freed /readyz is 200 again and the result
 * reaches the file. A deleted file is written back to its path from the open
 * database (store_recovered), so what is confirmed after the deletion is in the
 * file the next gateway opens.
 *
 * The gateway and the slow-server fixture run in this process (test/helpers/in-process.ts) over a real SQLite file
 * and the real HTTP endpoint: what fails here is the file system under the store, not a process. Opening a
 * store file at start and the lock between processes: store-ownership.test.ts, restart.test.ts.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createLogger } from "../../src/logging.js";
import { openStore } from "../../src/store/open.js";
import { allText, promote } from "../helpers/async-extra.js";
import { logLines, pollFor } from "../helpers/core-extra.js";
import { call, connectClient, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const SLOW = { timeout: 300_000 };

let tmp: string;
const gateways = new Set<TestGateway>();
const clients: Client[] = [];
let mounted: string | undefined;

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-store-failure-"));
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled([...gateways].map((g) => g.close()));
  if (mounted) execFileSync("umount", [mounted]);
  await rm(tmp, { recursive: true, force: true });
});

/** A gateway on the SQLite `file` with the slow fixture; its JSON log lines so far (what `emceepee serve` writes to stderr). */
async function serve(file: string): Promise<{ gw: TestGateway; log: () => string; c: Client; base: string }> {
  let log = "";
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      log += chunk.toString("utf8");
      done();
    },
  });
  const gw = await startInProcessGateway(
    { mcpServers: { slow: inProcess("slow") }, gateway: { store: { kind: "sqlite", path: file } } },
    { logger: createLogger("info", sink) },
  );
  gateways.add(gw);
  const c = await connectClient(gw.url);
  clients.push(c);
  return { gw, log: () => log, c, base: new URL(gw.url).origin };
}

async function readyz(base: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${base}/readyz`);
  return { status: res.status, body: await res.text() };
}

function readyzBecomes(base: string, status: number): Promise<{ status: number; body: string }> {
  return pollFor(async () => {
    const r = await readyz(base);
    return r.status === status ? r : undefined;
  }, `/readyz ${status}`);
}

/** A tmpfs of `size` at a new folder, or the reason it cannot be mounted here (then the test is skipped). */
function mountTmpfs(size: string): string | { skip: string } {
  const dir = path.join(tmp, "small-disk");
  mkdirSync(dir);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir], { stdio: "pipe" });
  } catch (err) {
    return { skip: `skipped: cannot mount a tmpfs here (${String(err).split("\n")[0]}); the disk-full case needs one` };
  }
  mounted = dir;
  return dir;
}

/** Writes zeros to `file` until the file system is full. */
function fillUp(file: string): void {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(4096);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
}

test(
  "disk full: a call that completes still gives its result to the waiting client, /readyz is 503 saying why, and all recovers when space is freed",
  SLOW,
  async (t) => {
    const disk = mountTmpfs("4m");
    if (typeof disk !== "string") return t.skip(disk.skip);
    const file = path.join(disk, "state.db");
    const { log, c, base } = await serve(file);
    assert.equal((await readyz(base)).status, 200);
    const task = await promote(c, "slow", "slow", { ms: 3_000 }, 0);
    const filler = path.join(disk, "filler");
    fillUp(filler);

    const result = await call(c, "get_task_result", { task_id: task.taskId, timeout_ms: 60_000 });
    assert.notEqual(result.isError, true, allText(result));
    assert.match(allText(result), /slept 3000ms/, "the result, although the store could not take it");
    const down = await readyzBecomes(base, 503);
    assert.match(down.body, /store_unavailable/);
    const unhealthy = await pollFor(async () => logLines(log(), "store_unhealthy").at(-1), "store_unhealthy logged");
    assert.match(String(unhealthy.reason), /disk \(or its quota\) is full/, JSON.stringify(unhealthy));
    assert.ok(String(unhealthy.reason).includes(file), "names the file");

    rmSync(filler);
    await readyzBecomes(base, 200);
    // The end the store refused is written once it can be: the file has the result.
    const store = await openStore({ kind: "sqlite", path: file });
    try {
      const stored = await pollFor(async () => {
        const r = await store.tasks.get(task.taskId);
        return r?.status === "completed" ? r : undefined;
      }, "the completed task in the file");
      assert.deepEqual(stored.result?.content, [{ type: "text", text: "slept 3000ms" }]);
    } finally {
      await store.close();
    }
    const after = await call(c, "execute_tool", { server: "slow", tool: "slow", args: { ms: 10 } });
    assert.notEqual(after.isError, true, allText(after));
  },
);

test(
  "store file deleted: it is written back to its path (store_recovered), /readyz stays or turns 200, a running call's result is in the file a restart opens",
  SLOW,
  async () => {
    const file = path.join(tmp, "deleted.db");
    const { gw, log, c, base } = await serve(file);
    const task = await promote(c, "slow", "slow", { ms: 3_000 }, 0);
    rmSync(file);

    const recovered = await pollFor(async () => logLines(log(), "store_recovered").at(-1), "store_recovered logged");
    assert.match(String(recovered.reason), /was deleted while emceepee had it open/, JSON.stringify(recovered));
    assert.ok(String(recovered.reason).includes(file), "names the file");
    assert.ok(existsSync(file), "the file is back at its path");
    assert.equal((await readyzBecomes(base, 200)).status, 200);

    const result = await call(c, "get_task_result", { task_id: task.taskId, timeout_ms: 60_000 });
    assert.notEqual(result.isError, true, allText(result));
    assert.match(allText(result), /slept 3000ms/);

    await gw.close();
    gateways.delete(gw);
    const store = await openStore({ kind: "sqlite", path: file });
    try {
      assert.equal((await store.tasks.get(task.taskId))?.status, "completed", "the result written after the deletion is in the file");
    } finally {
      await store.close();
    }
  },
);
