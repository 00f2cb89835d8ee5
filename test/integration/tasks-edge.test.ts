/**
 * Task behaviours found in review (regressions): an upstream task that fails
 * returns the upstream's own result; task-related upstream notifications
 * carry the gateway's id; an isError result is a failed task; progress keeps
 * flowing under the client's token after CreateTaskResult; ended tasks live
 * at least their TTL, and per-session retention is bounded; a connection
 * closing under an emulated call never crashes the gateway. The tests on the
 * task-server fixture share one gateway (a session, so an upstream, each).
 * server-everything and the task-server run in process (test/helpers/in-process.ts)
 * but in the removal test, where a stdio connection closes under the call.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { CreateTaskResultSchema, RELATED_TASK_META_KEY, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { systemClock, type Clock } from "../../src/clock.js";
import { defaultTransportFactory } from "../../src/upstream/transports.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { call, connectClient, everythingStdio, startGateway, waitConnected, type TestGateway } from "../helpers/gateway.js";
import { inProcess, inProcessTransportFactory } from "../helpers/in-process.js";
import { connectFace, getTask, pollTask, RecordingTaskStore, rpcError, startTask, taskResult, waitFor, withoutMeta, type Peer } from "../helpers/tasks.js";

/** The task-server fixture in this process (issue 21, docs/adr/0062): what its tests show is the gateway's task handling, not a process. */
const taskServer = inProcess("task-server");
const gateways: TestGateway[] = [];
const peers: Peer[] = [];
after(async () => {
  await Promise.allSettled(peers.map((p) => p.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
});

async function gateway(
  raw: Parameters<typeof startGateway>[0],
  store = new RecordingTaskStore(),
  clock: Clock = systemClock,
): Promise<{ gw: TestGateway; store: RecordingTaskStore }> {
  const gw = await startGateway(raw, { store: store.bundle, clock, transportFactory: inProcessTransportFactory() });
  gateways.push(gw);
  return { gw, store };
}

let taskServerGateway: ReturnType<typeof gateway> | undefined;
/** One gateway on the task-server fixture for the tests that need nothing else of it (each opens its own session, so its own upstream). */
function onTaskServer(): ReturnType<typeof gateway> {
  return (taskServerGateway ??= gateway({ mcpServers: { tasks: taskServer } }));
}

async function face(gw: TestGateway, server: string): Promise<Peer> {
  const peer = await connectFace(gw.url.replace(/\/mcp$/, `/servers/${server}/mcp`));
  peers.push(peer);
  return peer;
}

test("an upstream task that fails: tasks/get says failed, tasks/result returns the upstream's own result under the gateway's id", async () => {
  const { gw } = await onTaskServer();
  const peer = await face(gw, "tasks");
  const task = await startTask(peer.client, "fail-task", { ms: 200 });
  await pollTask(peer.client, task.taskId, (t) => t.status === "failed", "failed");
  const result = await taskResult(peer.client, task.taskId);
  assert.deepEqual(withoutMeta(result), { isError: true, content: [{ type: "text", text: "disk full (the upstream's own error)" }] });
  assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId });
});

test("a task-related upstream notification names the gateway's task id, never the upstream's", async () => {
  const { gw, store } = await onTaskServer();
  const peer = await face(gw, "tasks");
  const task = await startTask(peer.client, "log-task", {});
  await taskResult(peer.client, task.taskId);
  const log = await waitFor(() => peer.received.find((m) => m.method === "notifications/message"), "the task's log message");
  assert.deepEqual(log.params._meta[RELATED_TASK_META_KEY], { taskId: task.taskId });
  for (const upstreamId of store.upstreamIds) {
    assert.ok(!peer.received.some((m) => JSON.stringify(m).includes(upstreamId)), "the upstream task id reached the client");
  }
});

test("gateway-owned tasks: an isError result is a failed task (result kept); progress goes on under the client's token", async () => {
  const { gw } = await gateway({ mcpServers: { everything: inProcess("everything") } });
  const peer = await face(gw, "everything");
  const bad = await startTask(peer.client, "get-sum", { a: "not a number" });
  await pollTask(peer.client, bad.taskId, (t) => t.status === "failed", "failed");
  const result = await taskResult(peer.client, bad.taskId);
  assert.equal(result.isError, true, "tasks/result still returns the tool's result");

  const created = await peer.client.request(
    { method: "tools/call", params: { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 4 }, _meta: { progressToken: "tok-7" } } },
    CreateTaskResultSchema,
    { task: { ttl: 60_000 }, timeout: 60_000 },
  );
  await taskResult(peer.client, created.task.taskId);
  await waitFor(() => (progressFor(peer, "tok-7").length >= 4 ? true : undefined), "4 progress notifications under tok-7");
});

function progressFor(peer: Peer, token: string): Array<Record<string, unknown>> {
  return peer.received.filter((m) => m.method === "notifications/progress" && m.params?.progressToken === token).map((m) => m.params);
}

/** Real time, moved forward by the test instead of sleeping (the gateway's timers run on real time). */
class ShiftedClock implements Clock {
  offset = 0;
  now = () => Date.now() + this.offset;
  setTimeout: Clock["setTimeout"] = (fn, ms) => systemClock.setTimeout(fn, ms);
  clearTimeout: Clock["clearTimeout"] = (handle) => systemClock.clearTimeout(handle);
}

test("an ended task lives at least its TTL; each session keeps a bounded number of ended tasks", async () => {
  const clock = new ShiftedClock();
  const { gw } = await gateway(
    { mcpServers: { everything: inProcess("everything") }, gateway: { tasks: { completedRetentionMs: 200, maxRetainedPerSession: 2 } } },
    undefined,
    clock,
  );
  const peer = await face(gw, "everything");
  const ids: string[] = [];
  for (const n of [1, 2, 3]) {
    const t = await startTask(peer.client, "echo", { message: `m${n}` }, 60_000);
    await taskResult(peer.client, t.taskId);
    ids.push(t.taskId);
  }
  clock.offset += 10_000; // far longer than completedRetentionMs, far shorter than the TTL
  assert.equal((await getTask(peer.client, ids[2]!)).status, "completed", "kept until its TTL, not just the retention period");
  assert.equal((await getTask(peer.client, ids[1]!)).status, "completed");
  const evicted = await rpcError(getTask(peer.client, ids[0]!));
  assert.match(evicted.message, /not found/i, "the oldest ended task went first (maxRetainedPerSession: 2)");
});

test("a server removed while an emulated task-only call polls it: the call fails cleanly, the gateway keeps serving", async () => {
  const sent: string[] = [];
  const recording: TransportFactory = (name, config, options) => {
    const created = defaultTransportFactory(name, config, options);
    const send = created.transport.send.bind(created.transport);
    created.transport.send = (message, sendOptions) => {
      if ("method" in message) sent.push(message.method);
      return send(message, sendOptions);
    };
    return created;
  };
  const gw = await startGateway(
    { mcpServers: { everything: everythingStdio() }, gateway: { servers: { allowConfigServerChanges: true } } },
    { transportFactory: recording },
  );
  gateways.push(gw);
  const a = await connectClient(gw.url);
  const b = await connectClient(gw.url);
  await waitConnected(a, "everything");
  const running = call(a, "execute_tool", { server: "everything", tool: "simulate-research-query", args: { topic: "x" }, timeout_ms: 60_000 });
  await waitFor(() => (sent.includes("tasks/get") ? true : undefined), "the call polling its upstream task (tasks/get sent)", 60_000);
  assert.notEqual((await call(b, "remove_server", { name: "everything" })).isError, true, "remove_server of the config-file server (opted in)");
  const failed = await running;
  assert.equal(failed.isError, true);
  await new Promise((r) => setTimeout(r, 2500)); // past the keep-alive poll interval while the connection closes
  const servers = await call(a, "list_servers");
  assert.notEqual(servers.isError, true, "the gateway still answers");
  await Promise.allSettled([a.close(), b.close()]);
});

test("progress of an upstream task reaches the client under its token while the task runs, and stops when it ends", async () => {
  const { gw } = await onTaskServer();
  const peer = await face(gw, "tasks");
  const created = await peer.client.request(
    { method: "tools/call", params: { name: "progress-task", arguments: { ms: 30_000 }, _meta: { progressToken: "tok-up" } } },
    CreateTaskResultSchema,
    { task: { ttl: 60_000 }, timeout: 60_000 },
  );
  await waitFor(() => (progressFor(peer, "tok-up").length >= 2 ? true : undefined), "progress while the task runs");
  await peer.client.experimental.tasks.cancelTask(created.task.taskId);
  // What was already on the wire may still arrive; after that nothing, though the upstream (it ignores cancel) goes on
  // sending every 100 ms for 30 s: a gateway that forwarded it would never be quiet for 2 s.
  let seen = progressFor(peer, "tok-up").length;
  let since = Date.now();
  await waitFor(
    () => {
      const now = progressFor(peer, "tok-up").length;
      if (now !== seen) [seen, since] = [now, Date.now()];
      return Date.now() - since >= 2_000 ? true : undefined;
    },
    "no progress under a token whose task has ended (2 s without any)",
    25_000,
  );
});

test("receiver tasks count against the cap only while they wait", async () => {
  const { gw } = await gateway({ mcpServers: { everything: inProcess("everything") }, gateway: { tasks: { maxTasksPerSession: 2 } } });
  const peer = await connectFace(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"), {
    capabilities: { elicitation: { form: {} } },
    elicit: () => ({ action: "accept", content: { name: "Ann" } }),
  });
  peers.push(peer);
  for (const n of [1, 2, 3]) {
    const r = (await peer.client.callTool({ name: "trigger-elicitation-request-async", arguments: {} }, undefined, { timeout: 60_000 })) as CallToolResult;
    assert.match(JSON.stringify(r.content), /COMPLETED/, `call ${n}: ${JSON.stringify(r.content).slice(0, 200)}`);
  }
});
