/**
 * execute_tool promotions across gateway restarts, with real processes
 * (design MF-20, ADR 0014): `emceepee serve --store sqlite:<tmp>` on a fixed
 * port, server-everything over Streamable HTTP ("remote", its own process,
 * running on while the gateway restarts) and over stdio ("local"). A call
 * promoted on a task-capable HTTP upstream tool runs as that upstream's task,
 * so after SIGKILL or SIGTERM the same meta session's get_task_result returns
 * the real result; a promotion on the stdio upstream says it was lost. An
 * `optional` task tool (test/fixtures/task-server.ts over HTTP) answers a fast
 * call inline as before; after the restart get_task asks the upstream about
 * a re-attached task, and cancel_task cancels the upstream task; with the
 * upstream gone, get_task shows the stored status with a note and cancel_task
 * cancels locally and says the upstream was not told.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { Client as SdkClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ROOT, block, call, everythingStdio, fixtureArgs } from "../helpers/gateway.js";
import {
  firstText,
  freePort,
  pollFor,
  startCliServe,
  startEverythingHttp,
  stopChild,
  waitExit,
  type ChildServer,
  type RunningCli,
} from "../helpers/core-extra.js";
import { connectFace, type Peer } from "../helpers/transparent.js";
import { streamedResult, text } from "../helpers/tasks.js";

const SLOW = { timeout: 300_000 };
const RESEARCH = { topic: "promotions across restarts" };

let tmp: string;
let remote: ChildServer;
const running = new Set<RunningCli>();
const closeLater: Array<() => Promise<unknown>> = [];

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-meta-restart-test-"));
  remote = await startEverythingHttp();
});

after(async () => {
  await Promise.allSettled(closeLater.map((close) => close()));
  await Promise.allSettled([...running].map((r) => stopChild(r.child)));
  await remote?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** `emceepee serve` on a fixed port and SQLite file: a restart is the same address and the same state. */
async function serve(config: string, port: number, db: string): Promise<RunningCli> {
  const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--store", `sqlite:${db}`, "--no-upstream-check"]);
  running.add(served);
  return served;
}

async function restart(old: RunningCli, signal: "SIGTERM" | "SIGKILL", start: () => Promise<RunningCli>): Promise<RunningCli> {
  old.child.kill(signal);
  const { code } = await waitExit(old.child, 60_000);
  if (signal === "SIGTERM") assert.equal(code, 0, `SIGTERM must end the gateway cleanly:\n${old.stderr().slice(-3000)}`);
  running.delete(old);
  return start();
}

/** The clients from before a restart do not reconnect their own streams (restart.test.ts says why). */
const NO_STREAM_RECONNECT = { initialReconnectionDelay: 1_000, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1, maxRetries: 0 };

async function newPeer(url: string): Promise<Peer> {
  const peer = await connectFace(url, { capabilities: {}, http: { reconnectionOptions: NO_STREAM_RECONNECT } });
  closeLater.push(() => peer.client.close());
  return peer;
}

/** The same session through a new client (the SDK skips initialize when its transport has a session id). */
async function continuePeer(url: string, previous: Peer): Promise<Peer> {
  const old = previous.transport as StreamableHTTPClientTransport;
  const peer = await connectFace(url, { capabilities: {}, http: { sessionId: previous.sessionId } });
  closeLater.push(() => peer.client.close());
  (peer.transport as StreamableHTTPClientTransport).setProtocolVersion(old.protocolVersion!);
  return peer;
}

/** The report a direct client gets from the HTTP server-everything for RESEARCH (the reference). */
async function directReport(): Promise<string> {
  const direct = new SdkClient({ name: "direct", version: "1.0.0" });
  await direct.connect(new StreamableHTTPClientTransport(new URL(remote.url)));
  try {
    return text(await streamedResult(direct, "simulate-research-query", RESEARCH));
  } finally {
    await (direct.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
    await direct.close();
  }
}

/** test/fixtures/task-server.ts over Streamable HTTP; `stderr()` has its "cancelled <taskId>" lines. */
async function startTaskServerHttp(): Promise<{ url: string; stderr: () => string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [...fixtureArgs("task-server"), "--http"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  running.add({ child, url: "", stdout: () => "", stderr: () => "" });
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (err += c.toString("utf8")));
  const url = await pollFor(async () => /listening on (\S+)/.exec(out)?.[1], `task-server --http to listen (stderr: ${err})`, 60_000);
  return { url, stderr: () => err, stop: () => stopChild(child) };
}

/** The task id of a promoted execute_tool reply. */
function promotedTaskId(result: CallToolResult): string {
  const id = block<string>(result, "task_id");
  assert.ok(id, `the call was promoted to a task: ${JSON.stringify(result)}`);
  return id;
}

describe("execute_tool promotions survive a gateway restart (real processes, SQLite store)", () => {
  for (const signal of ["SIGKILL", "SIGTERM"] as const) {
    test(`${signal}: a task-capable HTTP upstream's promoted call returns its real result; a stdio upstream's says it was lost`, SLOW, async () => {
      const name = `promote-${signal.toLowerCase()}`;
      const config = path.join(tmp, `${name}.json`);
      // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway (issue 21).
      await writeFile(
        config,
        JSON.stringify({ mcpServers: { local: everythingStdio(), remote: { url: remote.url } }, gateway: { upstream: { warmPool: 0 } } }),
      );
      const port = await freePort();
      const db = path.join(tmp, `${name}.db`);
      const start = () => serve(config, port, db);
      const gw = await start();
      const base = `http://127.0.0.1:${port}`;
      const reference = directReport();

      const meta = await newPeer(`${base}/mcp`);
      const research = promotedTaskId(
        await call(meta.client, "execute_tool", { server: "remote", tool: "simulate-research-query", args: RESEARCH, timeout_ms: 100 }),
      );
      const local = promotedTaskId(
        await call(meta.client, "execute_tool", {
          server: "local",
          tool: "trigger-long-running-operation",
          args: { duration: 120, steps: 120 },
          timeout_ms: 100,
        }),
      );

      await restart(gw, signal, start);

      const meta2 = await continuePeer(`${base}/mcp`, meta);
      const result = await call(meta2.client, "get_task_result", { task_id: research, timeout_ms: 60_000 });
      assert.notEqual(result.isError, true, `the promoted upstream task's result, not an error: ${JSON.stringify(result)}`);
      assert.equal(firstText(result), await reference, "the upstream task's own report, as a direct call returns it");
      const view = block(await call(meta2.client, "get_task", { task_id: research }), "task");
      assert.equal(view?.status, "completed", JSON.stringify(view));

      const lost = await call(meta2.client, "get_task_result", { task_id: local, timeout_ms: 10_000 });
      assert.equal(lost.isError, true, JSON.stringify(lost));
      assert.match(firstText(lost), /^EMCP_TASK_NOT_COMPLETED/);
      assert.match(firstText(lost), /failed: the gateway restarted/, "the stdio upstream's promoted call says the restart lost it");
      assert.equal(block(await call(meta2.client, "get_task", { task_id: local }), "task")?.status, "failed");
    });
  }

  test(
    "an optional task tool of an HTTP upstream: a fast call answers inline, no task; a promoted one survives SIGKILL; cancel_task after the restart cancels it upstream",
    SLOW,
    async () => {
      const upstream = await startTaskServerHttp();
      const config = path.join(tmp, "optional.json");
      await writeFile(config, JSON.stringify({ mcpServers: { tasks: { url: upstream.url } } }));
      const port = await freePort();
      const db = path.join(tmp, "optional.db");
      const start = () => serve(config, port, db);
      const gw = await start();
      const base = `http://127.0.0.1:${port}`;

      const meta = await newPeer(`${base}/mcp`);
      const fast = await call(meta.client, "execute_tool", { server: "tasks", tool: "slow-task", args: { ms: 50 }, timeout_ms: 60_000 });
      assert.notEqual(fast.isError, true, JSON.stringify(fast));
      assert.equal(firstText(fast), "slept 50ms", "the result, unchanged");
      assert.equal(fast._meta, undefined, "no upstream task metadata in the reply");
      assert.deepEqual(block(await call(meta.client, "list_tasks", { include_completed: true }), "tasks"), [], "a call answered in time is no task");

      const finishing = promotedTaskId(await call(meta.client, "execute_tool", { server: "tasks", tool: "slow-task", args: { ms: 4_000 }, timeout_ms: 100 }));
      const endless = promotedTaskId(await call(meta.client, "execute_tool", { server: "tasks", tool: "slow-task", args: { ms: 600_000 }, timeout_ms: 100 }));
      const orphan = promotedTaskId(await call(meta.client, "execute_tool", { server: "tasks", tool: "slow-task", args: { ms: 600_000 }, timeout_ms: 100 }));

      const gw2 = await restart(gw, "SIGKILL", start);

      const meta2 = await continuePeer(`${base}/mcp`, meta);
      // get_task asks the upstream about a re-attached task: it reads completed once the upstream task is.
      const statusOf = async (taskId: string) => block<{ status: string }>(await call(meta2.client, "get_task", { task_id: taskId }), "task")?.status;
      await pollFor(
        async () => ((await statusOf(finishing)) === "completed" ? true : undefined),
        "get_task to read the re-attached task completed",
        60_000,
        500,
      );
      const result = await call(meta2.client, "get_task_result", { task_id: finishing, timeout_ms: 60_000 });
      assert.notEqual(result.isError, true, JSON.stringify(result));
      assert.equal(firstText(result), "slept 4000ms");

      assert.doesNotMatch(upstream.stderr(), /cancelled/, "nothing was cancelled upstream so far");
      const cancelled = await call(meta2.client, "cancel_task", { task_id: endless });
      assert.equal(block(cancelled, "success"), true, JSON.stringify(cancelled));
      await pollFor(async () => /task-server: cancelled /.exec(upstream.stderr()) ?? undefined, "the upstream's tasks/cancel", 30_000);
      assert.equal(block(await call(meta2.client, "get_task", { task_id: endless }), "task")?.status, "cancelled");

      // Restarted again with the upstream gone: get_task shows the stored status and says why; cancel_task cancels here
      // and says the upstream was not told (no error after the local cancel).
      gw2.child.kill("SIGKILL");
      await waitExit(gw2.child, 60_000);
      running.delete(gw2);
      await upstream.stop();
      await start();
      const meta3 = await continuePeer(`${base}/mcp`, meta);
      const view = await call(meta3.client, "get_task", { task_id: orphan });
      assert.notEqual(view.isError, true, JSON.stringify(view));
      assert.equal(block<{ status: string }>(view, "task")?.status, "working");
      assert.match(block<string>(view, "note") ?? "", /could not ask upstream 'tasks'/, JSON.stringify(view));
      const orphaned = await call(meta3.client, "cancel_task", { task_id: orphan });
      assert.notEqual(orphaned.isError, true, `no error after the local cancel: ${JSON.stringify(orphaned)}`);
      assert.equal(block(orphaned, "success"), true, JSON.stringify(orphaned));
      assert.equal(block(orphaned, "upstream_cancelled"), false, JSON.stringify(orphaned));
      assert.match(block<string>(orphaned, "message") ?? "", /could not be told/);
      assert.equal(block(await call(meta3.client, "get_task", { task_id: orphan }), "task")?.status, "cancelled");
    },
  );
});
