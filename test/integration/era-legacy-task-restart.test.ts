/**
 * Bridge 4 across a restart (issue 25, "Durability"; ADR 0032, "Tasks across
 * eras" §6): a 2025-11-25 client's task on a 2026-07-28 upstream's extension
 * task (test/fixtures/modern-tasks-server.ts, in this process: it outlives
 * the gateway). The real CLI on a SQLite file; the gateway stops while the
 * upstream's task waits for a name, starts again on the same port and file,
 * and the client, on the same session, gets the upstream's result from
 * tasks/result — the input request asked again and answered through the
 * 2025 side channel. On the meta face, an `execute_tool` promoted while it
 * runs as the upstream's extension task gives its result after a restart.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startModernTasksServer, type ModernTasksServer } from "../fixtures/modern-tasks-server.js";
import { ROOT, block, call } from "../helpers/gateway.js";
import { freePort, startCliServe, stopChild, waitExit, type RunningCli } from "../helpers/core-extra.js";
import { openSqliteDatabase } from "../../src/store/sqlite/driver.js";
import { connectFace, getTask, startTask, taskResult, text, waitFor, type Peer, type PeerOptions } from "../helpers/tasks.js";

const T = { timeout: 300_000 };

describe("a legacy client's task on a modern upstream's extension task, across a restart", () => {
  let tmp: string;
  let upstream: ModernTasksServer;
  let served: RunningCli | undefined;
  let args: string[];
  let face: string;
  let db: string;
  const peers: Peer[] = [];

  const asker = (name: string): PeerOptions => ({
    capabilities: { elicitation: { form: {} } },
    elicit: () => ({ action: "accept", content: { name } }),
  });

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-era-legacy-task-restart-"));
    upstream = await startModernTasksServer();
    const config = path.join(tmp, "gateway.json");
    await writeFile(config, JSON.stringify({ mcpServers: { tasks: { url: upstream.url } } }));
    const port = await freePort();
    db = path.join(tmp, "state.db");
    args = ["--config", config, "--port", String(port), "--store", `sqlite:${db}`, "--no-upstream-check"];
    served = await startCliServe(ROOT, args);
    face = `http://127.0.0.1:${port}/servers/tasks/mcp`;
  });

  after(async () => {
    for (const p of peers) await p.client.close().catch(() => undefined);
    if (served) await stopChild(served.child);
    await upstream?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  /** Stops the gateway with `signal` and starts it again on the same port and file. */
  async function restart(signal: "SIGTERM" | "SIGKILL"): Promise<void> {
    const old = served!;
    old.child.kill(signal);
    const { code } = await waitExit(old.child, 60_000);
    if (signal === "SIGTERM") assert.equal(code, 0, old.stderr().slice(-3000));
    served = await startCliServe(ROOT, args);
  }

  /** A new client object on the same gateway session (the SDK skips initialize when its transport has a session id). */
  async function samePeer(previous: Peer, name: string, url = face): Promise<Peer> {
    const peer = await connectFace(url, { ...asker(name), http: { sessionId: previous.sessionId } });
    peers.push(peer);
    (peer.transport as StreamableHTTPClientTransport).setProtocolVersion((previous.transport as StreamableHTTPClientTransport).protocolVersion!);
    return peer;
  }

  /** The upstream task id stored with a gateway task (read from the SQLite file). */
  function storedUpstreamId(taskId: string): string | undefined {
    const handle = openSqliteDatabase(db, { readonly: true });
    try {
      const row = handle.prepare("SELECT record FROM tasks WHERE task_id = ?").get(taskId) as { record: string } | undefined;
      return row ? (JSON.parse(row.record) as { upstreamTaskId?: string }).upstreamTaskId : undefined;
    } finally {
      handle.close();
    }
  }

  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    it(`after ${signal} and a new start, tasks/result gets the upstream task's result`, T, async () => {
      const before = await connectFace(face, asker("nobody"));
      peers.push(before);
      const task = await startTask(before.client, "ask_then_answer", {});
      // The gateway drives the upstream's task, which now waits for a name (asked of the client, who has not called tasks/result).
      await waitFor(async () => ((await getTask(before.client, task.taskId)).status === "input_required" ? true : undefined), "the task waits for input");
      await waitFor(() => storedUpstreamId(task.taskId), "the upstream task id is stored with the gateway task");
      await restart(signal);

      const after = await samePeer(before, "Alice");
      const result = await taskResult(after.client, task.taskId);
      assert.equal(text(result), "Hello, Alice!", JSON.stringify(result));
      assert.equal(after.elicitations.length, 1, "the input request is asked again after the restart");
      assert.equal((await getTask(after.client, task.taskId)).status, "completed");
    });
  }

  it("the meta face: execute_tool promoted onto the upstream's extension task gives its result after SIGKILL and a new start", T, async () => {
    const metaUrl = `${new URL(face).origin}/mcp`;
    const before = await connectFace(metaUrl, {});
    peers.push(before);
    const promoted = await call(before.client, "execute_tool", { server: "tasks", tool: "wait_for_release", args: {}, timeout_ms: 100 });
    const taskId = block<string>(promoted, "task_id");
    assert.ok(taskId, `promoted to a task: ${JSON.stringify(promoted)}`);
    await waitFor(() => storedUpstreamId(taskId), "the upstream task id is stored with the promoted task");
    await restart("SIGKILL");

    const after = await samePeer(before, "unused", metaUrl);
    upstream.release();
    const result = await call(after.client, "get_task_result", { task_id: taskId, timeout_ms: 60_000 });
    assert.match(JSON.stringify(result.content), /released/, JSON.stringify(result));
  });
});
