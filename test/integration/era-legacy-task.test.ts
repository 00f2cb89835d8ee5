/**
 * Issue 25, bridge 4's last part (ADR 0032, "Tasks across eras"): a 2025-11-25
 * client's task-augmented tools/call on a 2026-07-28 upstream that serves the
 * tasks extension (test/fixtures/modern-tasks-server.ts: no real server does).
 * The gateway answers with its own 2025 task at once and drives the
 * upstream's extension task: tasks/get polling, its `inputRequests` asked of
 * the client as a side-channel elicitation/create (received while it waits in
 * tasks/result), the answer sent with tasks/update, and the inlined result
 * returned by tasks/result; a cancelled gateway task cancels the upstream's.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startModernTasksServer, type ModernTasksServer } from "../fixtures/modern-tasks-server.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { connectFace, type Peer } from "../helpers/transparent.js";
import { LONG, startTask, taskResult, text, waitFor } from "../helpers/tasks.js";

const T = { timeout: 120_000 };

describe("a legacy client's task on a modern upstream's extension task", () => {
  let upstream: ModernTasksServer;
  let gw: TestGateway;
  let peer: Peer;
  before(async () => {
    upstream = await startModernTasksServer();
    gw = await startGateway({ mcpServers: { tasks: { url: upstream.url } } });
    peer = await connectFace(`${new URL(gw.url).origin}/servers/tasks/mcp`, {
      capabilities: { elicitation: { form: {} } },
      elicit: () => ({ action: "accept", content: { name: "Alice" } }),
    });
  });
  after(async () => {
    await peer?.client.close().catch(() => undefined);
    await gw?.close();
    await upstream?.close();
  });

  test("tasks/result returns the upstream task's result, its input request answered through the 2025 side channel", T, async () => {
    const task = await startTask(peer.client, "ask_then_answer", {});
    assert.ok(task.taskId && !task.taskId.startsWith("task-"), `a gateway task id, not the upstream's: ${task.taskId}`);
    const result = await taskResult(peer.client, task.taskId);
    assert.equal(text(result), "Hello, Alice!");
    assert.equal(peer.elicitations.length, 1);
    assert.equal(peer.elicitations[0]?.message, "Your name?");
    for (const m of ["tools/call", "tasks/get", "tasks/update"])
      assert.ok(upstream.methods.includes(m), `${m} reached the upstream: ${upstream.methods.join(", ")}`);
  });

  test("tasks/cancel of the gateway task cancels the upstream's task", T, async () => {
    const polls = () => upstream.methods.filter((m) => m === "tasks/get").length;
    const before = polls();
    const task = await startTask(peer.client, "ask_then_answer", {});
    // The upstream task is polled and waits for its input.
    await waitFor(() => (polls() > before ? true : undefined), "the upstream task is polled");
    assert.equal((await peer.client.experimental.tasks.cancelTask(task.taskId, LONG)).status, "cancelled");
    await waitFor(() => (upstream.cancelled.length === 1 ? true : undefined), "tasks/cancel reached the upstream");
  });
});
