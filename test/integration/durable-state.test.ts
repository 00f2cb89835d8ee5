/**
 * Durable state across gateway restarts (docs/adr/0007, "Wiring"): tasks and
 * their results, events, pending elicitations, receiver tasks and runtime
 * servers on one SQLite file, read by the next gateway on it.
 *
 * - In process: two gateways in sequence on one file (the first closed as on
 *   SIGTERM). What the first acknowledged is there; what was running is
 *   settled by the second's start, with events delivered once. Their slow
 *   upstream is in process too (test/helpers/in-process.ts); the stdio
 *   server-everything stays where the case is its process ending with the gateway.
 * - Real processes: `emceepee serve --store sqlite:<tmp>` under load (many
 *   promoted calls completing) is SIGKILLed; every task the client was told
 *   completed before the kill still has its result, read back through the
 *   restarted gateway's store file; the CLI's store flag, default and errors.
 *
 * (Sessions resumed by their Mcp-Session-Id after a restart: restart.test.ts.)
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { RESTARTED_CALL, RESTARTED_REQUEST } from "../../src/server/recovery.js";
import type { EventRecord, Store } from "../../src/store/contracts.js";
import { openStore } from "../../src/store/open.js";
import { allText, awaitActivity, activityEvents, elicitations, envelopeEvents, eventually, promote } from "../helpers/async-extra.js";
import { runCli, startCliServe, startEverythingHttp, stopChild, waitExit, type ChildServer } from "../helpers/core-extra.js";
import { ROOT, call, connectClient, everythingStdio, slowServerStdio, startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { connectFace, startTask, type Peer } from "../helpers/tasks.js";

const SLOW = { timeout: 240_000 };
const RESEARCH = "simulate-research-query";

let tmp: string;
let remote: ChildServer;
const cleanups: Array<() => Promise<unknown>> = [];

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-durable-"));
  remote = await startEverythingHttp();
});

after(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  await remote?.close();
  await rm(tmp, { recursive: true, force: true });
});

let files = 0;
function dbFile(): string {
  return path.join(tmp, `state-${++files}.db`);
}

/** A gateway on `file` (closed after the test if the test does not). */
async function gatewayOn(file: string, raw: { mcpServers?: Record<string, unknown>; gateway?: Record<string, unknown> } = {}): Promise<TestGateway> {
  // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway and session server (issue 21).
  // In-process upstreams (inProcess(...)) where a case is about the store, not the upstream's process (docs/adr/0060 §2).
  const gw = await startInProcessGateway({
    mcpServers: {},
    ...raw,
    gateway: { upstream: { warmPool: 0 }, ...raw.gateway, store: { kind: "sqlite", path: file } },
  });
  cleanups.push(() => gw.close());
  return gw;
}

async function client(gw: TestGateway): Promise<Client> {
  const c = await connectClient(gw.url);
  cleanups.push(() => c.close());
  return c;
}

function sessionIdOf(c: Client): string {
  const id = (c.transport as StreamableHTTPClientTransport).sessionId;
  assert.ok(id, "the client has an Mcp-Session-Id");
  return id;
}

/** Takes what the store would deliver to the session now (a restarted gateway's next response or await_activity). */
async function undelivered(store: Store, sessionId: string): Promise<EventRecord[]> {
  return (await store.events.takeUndelivered(sessionId)).events;
}

describe("two gateways in sequence on one SQLite file (in process)", () => {
  test(
    "an acknowledged result survives; a running gateway-owned call is failed at the next start, saying why, and its event is delivered once",
    SLOW,
    async () => {
      const file = dbFile();
      const first = await gatewayOn(file, { mcpServers: { slow: inProcess("slow") } });
      const c = await client(first);
      const sessionId = sessionIdOf(c);
      const done = await promote(c, "slow", "slow", { ms: 200 }, 0);
      const result = await call(c, "get_task_result", { task_id: done.taskId, timeout_ms: 30_000 });
      assert.notEqual(result.isError, true, allText(result));
      const running = await promote(c, "slow", "slow", { ms: 120_000 }, 0);
      await call(c, "list_servers"); // everything so far delivered
      await first.close();

      const second = await gatewayOn(file, { mcpServers: { slow: inProcess("slow") } });
      const { store } = second.gateway.context;
      const kept = await store.tasks.get(done.taskId);
      assert.equal(kept?.status, "completed");
      assert.deepEqual(kept?.result?.content, [{ type: "text", text: "slept 200ms" }], "the result the client was given");
      const failed = await store.tasks.get(running.taskId);
      assert.equal(failed?.status, "failed", "never silently working");
      assert.equal(failed?.statusMessage, RESTARTED_CALL);
      assert.ok(failed?.retainUntil !== undefined && failed.retainUntil > Date.now(), "kept for the retention period");
      const events = await undelivered(store, sessionId);
      assert.deepEqual(
        events.map((e) => [e.type, e.data.taskId]),
        [["task_failed", running.taskId]],
        "the session hears of it once",
      );
      assert.equal(events[0]!.data.error, RESTARTED_CALL);
      assert.deepEqual(await undelivered(store, sessionId), [], "…and only once");
      assert.deepEqual(await store.tasks.listWorking(), []);
    },
  );

  test("events not yet delivered before the restart are delivered after it, once; delivered ones never again", SLOW, async () => {
    const file = dbFile();
    const first = await gatewayOn(file, { mcpServers: { slow: inProcess("slow") } });
    const c = await client(first);
    const sessionId = sessionIdOf(c);
    const task = await promote(c, "slow", "slow", { ms: 300 }, 0);
    const session = first.gateway.context.sessions.get(sessionId)!;
    await eventually("the task to complete unread", async () => ((await session.tasks.get(task.taskId)).status === "completed" ? true : undefined));
    await session.events.flushed();
    await first.close();

    const second = await gatewayOn(file, { mcpServers: { slow: inProcess("slow") } });
    const events = await undelivered(second.gateway.context.store, sessionId);
    assert.deepEqual(
      events.map((e) => e.type),
      ["task_completed"],
      "only what the client had not been given (task_created came with the promotion)",
    );
    assert.equal(events[0]!.data.taskId, task.taskId);
    assert.deepEqual(await undelivered(second.gateway.context.store, sessionId), []);
  });

  test("a pending elicitation is withdrawn at the next start with an event; its call fails", SLOW, async () => {
    const file = dbFile();
    const first = await gatewayOn(file, { mcpServers: { slow: inProcess("slow") } });
    const c = await client(first);
    const sessionId = sessionIdOf(c);
    const task = await promote(c, "slow", "elicit-twice", {}, 0);
    const [pending] = await eventually("the elicitation to be pending", async () => {
      const list = await elicitations(c);
      return list.length ? list : undefined;
    });
    await call(c, "list_servers");
    await first.close();

    const second = await gatewayOn(file, { mcpServers: { slow: inProcess("slow") } });
    const { store } = second.gateway.context;
    assert.deepEqual(await store.pending.listAll(), [], "nothing waits for an answer no upstream call can take");
    const events = await undelivered(store, sessionId);
    const rejected = events.find((e) => e.type === "elicitation_rejected");
    assert.ok(rejected, JSON.stringify(events));
    assert.equal(rejected.data.requestId, pending!.requestId);
    assert.equal(rejected.data.reason, RESTARTED_REQUEST);
    assert.ok(events.some((e) => e.type === "task_failed" && e.data.taskId === task.taskId));
    assert.equal((await store.tasks.get(task.taskId))?.statusMessage, RESTARTED_CALL);
  });

  test("upstream tasks: one on an HTTP upstream stays working (it runs on upstream); one on a stdio upstream fails, saying why", SLOW, async () => {
    const file = dbFile();
    const servers = { local: everythingStdio(), remote: { url: remote.url } };
    const first = await gatewayOn(file, { mcpServers: servers });
    const base = first.url.replace(/\/mcp$/, "");
    const peers: Peer[] = [];
    const start = async (server: string) => {
      const peer = await connectFace(`${base}/servers/${server}/mcp`);
      peers.push(peer);
      return startTask(peer.client, RESEARCH, { topic: `durable ${server}` }, 120_000);
    };
    // The remote task first: the local one (four 1 s stages) is started last, right before the close, so that
    // it is still working then even on a loaded machine (started first, it once completed while the remote one started).
    const remoteTask = await start("remote");
    const { store: firstStore } = first.gateway.context;
    assert.ok((await firstStore.tasks.get(remoteTask.taskId))?.upstreamTaskId, "the remote call runs as an upstream task");
    const local = await start("local");
    assert.equal((await firstStore.tasks.get(local.taskId))?.status, "working", "the local task is still working when the gateway stops");
    await first.close(); // as on SIGTERM: the sessions were not ended by their clients
    for (const p of peers) await p.client.close();

    const second = await gatewayOn(file, { mcpServers: servers });
    const { store } = second.gateway.context;
    const kept = await store.tasks.get(remoteTask.taskId);
    assert.equal(kept?.status, "working", "asked about again through its upstream session");
    const gone = await store.tasks.get(local.taskId);
    assert.equal(gone?.status, "failed");
    assert.match(gone?.statusMessage ?? "", /stdio: its process ended with the gateway/);
  });

  test(
    "servers added at runtime come back; removed ones stay removed; the config file wins a name both have; settings that no longer allow one keep it out",
    SLOW,
    async () => {
      const file = dbFile();
      const first = await gatewayOn(file, { mcpServers: {} });
      const c = await client(first);
      for (const name of ["kept", "removed", "shadowed"]) {
        const r = await call(c, "add_server", { name, url: remote.url });
        assert.notEqual(r.isError, true, allText(r));
      }
      const removed = await call(c, "remove_server", { name: "removed" });
      assert.notEqual(removed.isError, true, allText(removed));
      const unreachable = await call(c, "add_server", { name: "unreachable", url: "http://127.0.0.1:9/mcp" });
      assert.equal(unreachable.isError, true, "a server that cannot be reached is not added");
      await first.close();

      const second = await gatewayOn(file, { mcpServers: { shadowed: slowServerStdio() } });
      const { registry } = second.gateway.context;
      assert.deepEqual(registry.names().sort(), ["kept", "shadowed"]);
      assert.equal(registry.get("kept")?.addedBy !== "config", true, "still a runtime server");
      assert.equal(registry.get("shadowed")?.addedBy, "config", "the file's own server");
      const c2 = await client(second);
      const listed = await call(c2, "execute_tool", { server: "kept", tool: "echo", args: { message: "back" }, timeout_ms: 30_000 });
      assert.match(allText(listed), /back/, "the restored server works");
      await second.close();

      const third = await gatewayOn(file, { mcpServers: {}, gateway: { servers: { allowRuntimeRemote: false } } });
      assert.deepEqual(third.gateway.context.registry.names(), [], "not restored while the settings refuse remote servers");
      await third.close();
      const fourth = await gatewayOn(file, { mcpServers: {} });
      assert.deepEqual(fourth.gateway.context.registry.names().sort(), ["kept", "shadowed"], "…but still stored: back when allowed again");
    },
  );

  test("a store that cannot be opened fails the start with EMCP_STORE_UNAVAILABLE naming the file; nothing falls back to memory", SLOW, async () => {
    const folder = path.join(tmp, "a-folder.db");
    await mkdir(folder, { recursive: true });
    await assert.rejects(startGateway({ mcpServers: {}, gateway: { store: { kind: "sqlite", path: folder } } }), (err: unknown) => {
      assert.equal((err as { code?: string }).code, "EMCP_STORE_UNAVAILABLE");
      assert.match(String((err as Error).message), /a-folder\.db/);
      return true;
    });
  });
});

describe("emceepee serve --store sqlite: real processes", () => {
  const LOAD = 60;

  test(
    "SIGKILL under load: every task reported completed before the kill still has its result; those running then are failed at the restart",
    { timeout: 600_000 },
    async () => {
      const file = dbFile();
      const config = path.join(tmp, "kill.json");
      // One stdio process for the three clients ("sharing": "shared"), not one each: the case is the store under a kill (docs/adr/0060 §2).
      await writeFile(
        config,
        JSON.stringify({ mcpServers: { everything: { ...everythingStdio(), sharing: "shared" } }, gateway: { upstream: { warmPool: 0 } } }),
      );
      const args = ["--config", config, "--port", "0", "--store", `sqlite:${file}`, "--no-upstream-check", "--log-level", "silent"];
      const served = await startCliServe(ROOT, args);
      const stop = () => stopChild(served.child);
      cleanups.push(stop);
      const clients = await Promise.all([0, 1, 2].map(() => connectClient(served.url)));
      for (const c of clients) cleanups.push(() => c.close());
      // Durations spread over 0.1-2 s: some finish early, many are still running at the kill.
      const started = new Map<string, string>();
      // What the clients are told is completed: task_completed events, delivered once — in the envelope of a
      // later execute_tool as well as by await_activity (on a loaded machine, many arrive while calls are still being made).
      const completed = new Set<string>();
      const told = (events: ReturnType<typeof envelopeEvents>) => {
        for (const e of events) if (e.type === "task_completed") completed.add(String(e.data.taskId));
      };
      await Promise.all(
        clients.map(async (c, k) => {
          for (let i = k; i < LOAD; i += clients.length) {
            const duration = 0.1 + (i % 20) / 10;
            const r = await call(c, "execute_tool", {
              server: "everything",
              tool: "trigger-long-running-operation",
              args: { duration, steps: 2 },
              timeout_ms: 20,
            });
            told(envelopeEvents(r));
            const taskId = (r.structuredContent as { task_id?: string } | undefined)?.task_id;
            const text = `Long running operation completed. Duration: ${duration} seconds, Steps: 2.`;
            // A starved machine can deliver a 0.1 s result before the 20 ms promotion fires: answered directly, no task to keep.
            if (!taskId) {
              assert.equal(allText(r).split("\n")[0], text, `promoted or answered: ${allText(r)}`);
              continue;
            }
            started.set(taskId, text);
          }
        }),
      );
      // Until a good share is told completed. The calls last at most 2.1 s each; the bound is for a loaded 2-core machine, not a speed.
      const deadline = Date.now() + 300_000;
      while (completed.size < started.size / 2 && Date.now() < deadline) {
        for (const c of clients) told(activityEvents(await awaitActivity(c, 500)));
      }
      assert.ok(completed.size >= started.size / 2, `only ${completed.size} of ${started.size} tasks completed`);
      served.child.kill("SIGKILL");
      await waitExit(served.child);

      // The restart settles what was running; then read the file as the next process sees it.
      const again = await startCliServe(ROOT, args);
      await stopChild(again.child);
      const store = await openStore({ kind: "sqlite", path: file });
      try {
        for (const taskId of completed) {
          const r = await store.tasks.get(taskId);
          assert.equal(r?.status, "completed", `task ${taskId} was reported completed before the kill`);
          assert.deepEqual(r?.result?.content, [{ type: "text", text: started.get(taskId) }], `task ${taskId} keeps its own result`);
        }
        let failedAtRestart = 0;
        for (const taskId of started.keys()) {
          const r = await store.tasks.get(taskId);
          assert.ok(r, `task ${taskId} is still stored`);
          assert.notEqual(r.status, "working", `task ${taskId} is settled, not silently working`);
          if (r.status === "failed") {
            assert.equal(r.statusMessage, RESTARTED_CALL);
            failedAtRestart++;
          } else assert.equal(r.status, "completed");
        }
        assert.ok(failedAtRestart > 0, "some calls were running at the kill");
        assert.deepEqual(await store.tasks.listWorking(), []);
      } finally {
        await store.close();
      }
    },
  );

  test(
    "an unusable --store: exit 2 with EMCP_STORE_UNAVAILABLE naming the file or URL; --store must be sqlite:<file>, sqlite, redis://… or memory",
    SLOW,
    async () => {
      const folder = path.join(tmp, "folder-not-file");
      await mkdir(folder, { recursive: true });
      const run = await runCli(ROOT, ["serve", "--port", "0", "--no-upstream-check", "--store", `sqlite:${folder}`], { stopWhenStdout: /listening on/ });
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /emceepee: EMCP_STORE_UNAVAILABLE: .*folder-not-file/);
      assert.doesNotMatch(run.stdout, /listening on/);
      const unreachable = await runCli(ROOT, ["serve", "--port", "0", "--no-upstream-check", "--store", "redis://no-such-host.invalid:6379"], {
        stopWhenStdout: /listening on/,
      });
      assert.equal(unreachable.code, 2, unreachable.stderr);
      assert.match(unreachable.stderr, /emceepee: EMCP_STORE_UNAVAILABLE: .*redis:\/\/no-such-host\.invalid/);
      const bad = await runCli(ROOT, ["serve", "--store", "postgres://x"], { stopWhenStdout: /listening on/ });
      assert.equal(bad.code, 1, bad.stderr);
      assert.match(bad.stderr, /--store <store>.*must be sqlite:<file>, sqlite .*, redis:\/\/host:port .* or memory/);
    },
  );

  test("serve keeps its state in SQLite at the per-user state file by default; --store memory keeps none", SLOW, async () => {
    const home = path.join(tmp, "xdg");
    const env = { XDG_STATE_HOME: home };
    const served = await startCliServe(ROOT, ["--port", "0", "--no-upstream-check", "--config", await emptyConfig()], 60_000, env);
    cleanups.push(() => stopChild(served.child));
    await stopChild(served.child);
    const file = path.join(home, "emceepee", "emceepee.db");
    assert.ok((await stat(file)).size > 0, "serve created the per-user state file");
    const store = await openStore({ kind: "sqlite" }, { env });
    assert.equal(store.location, file);
    await store.close();

    const memory = await startCliServe(ROOT, ["--port", "0", "--no-upstream-check", "--config", await emptyConfig(), "--store", "memory"], 60_000, {
      XDG_STATE_HOME: path.join(tmp, "xdg-unused"),
    });
    await stopChild(memory.child);
    await assert.rejects(stat(path.join(tmp, "xdg-unused")), "nothing was written");
  });
});

async function emptyConfig(): Promise<string> {
  const file = path.join(tmp, "empty.json");
  await writeFile(file, JSON.stringify({ mcpServers: {} }));
  return file;
}
