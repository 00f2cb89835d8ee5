/**
 * A Streamable HTTP upstream that dies (design UP-12), with real processes:
 * server-everything in streamableHttp mode is killed with SIGKILL — mid-call
 * and while idle — and started again on the same port. The gateway notices,
 * fails what ran there with a reason, emits server_disconnected, shows the
 * server as not connected, and reconnects (a new upstream session:
 * restarted: true).
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { block, connectClient, startGateway, waitConnected, type TestGateway } from "../helpers/gateway.js";
import { allText, awaitUntil, EventLedger, field, promote, sessionOf, type TaskView, type WireEvent } from "../helpers/async-extra.js";
import { startEverythingHttp, waitExit, type ChildServer } from "../helpers/core-extra.js";

const gateways: TestGateway[] = [];
const clients: Client[] = [];
const servers: ChildServer[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
  await Promise.allSettled(servers.map((s) => s.close()));
});

async function server(port?: number): Promise<ChildServer> {
  const s = await startEverythingHttp(30_000, port);
  servers.push(s);
  return s;
}

/** A gateway with one remote upstream, reconnecting quickly and long enough to outlast a restart on a loaded machine. */
async function gatewayFor(url: string): Promise<{ gw: TestGateway; c: Client }> {
  const gw = await startGateway({
    mcpServers: { remote: { url } },
    gateway: { upstream: { reconnect: { initialDelayMs: 100, maxDelayMs: 500, maxAttempts: 1000 } } },
  });
  gateways.push(gw);
  const c = await connectClient(gw.url);
  clients.push(c);
  await waitConnected(c, "remote");
  return { gw, c };
}

async function kill(s: ChildServer): Promise<void> {
  s.child.kill("SIGKILL");
  await waitExit(s.child);
}

async function remoteStatus(c: Client, ledger: EventLedger): Promise<{ status: string; connected: boolean; last_error?: string }> {
  const list = block<Array<{ name: string; status: string; connected: boolean; last_error?: string }>>(await ledger.call(c, "list_servers"), "servers") ?? [];
  const entry = list.find((s) => s.name === "remote");
  assert.ok(entry, "list_servers lists 'remote'");
  return entry;
}

const disconnected = (e: WireEvent) => e.type === "server_disconnected" && e.server === "remote";
const reconnected = (e: WireEvent) => e.type === "server_reconnected" && e.server === "remote";

test("a killed Streamable HTTP upstream fails the call running there with the reason, is shown disconnected, and after a restart on the same port the next call succeeds (restarted: true)", async () => {
  const first = await server();
  const { c } = await gatewayFor(first.url);
  const ledger = new EventLedger();
  // A 60 s call, promoted to a task after 200 ms: it runs on the upstream when it dies.
  const { taskId } = await promote(c, "remote", "trigger-long-running-operation", { duration: 60, steps: 60 }, 200, {}, ledger);
  await kill(first);

  // Well before the call's own end (60 s) or its TTL: the loss is noticed, not waited out.
  await awaitUntil(c, ledger, (l) => l.has(disconnected));
  const event = ledger.all.find(disconnected)!;
  assert.match(String(event.data.reason), /connection was lost|no longer knows/, "the reason says what happened");
  assert.ok(Array.isArray(event.data.failedTasks) && event.data.failedTasks.includes(taskId), JSON.stringify(event.data));
  const task = field<TaskView>(await ledger.call(c, "get_task", { task_id: taskId }), "task");
  assert.equal(task?.status, "failed");
  assert.match(task.error ?? "", /upstream 'remote' disconnected \((the connection was lost|the upstream no longer knows)/);
  const down = await remoteStatus(c, ledger);
  assert.equal(down.connected, false, `list_servers no longer says connected: ${JSON.stringify(down)}`);

  const second = await server(first.port);
  await awaitUntil(c, ledger, (l) => l.has(reconnected), 60_000);
  const back = ledger.all.find(reconnected)!;
  assert.equal(back.data.restarted, true, "a new upstream session is a restart");
  assert.equal(back.data.failedTasks, 1);
  const again = await ledger.call(c, "execute_tool", { server: "remote", tool: "echo", args: { message: "back" } });
  assert.notEqual(again.isError, true, allText(again));
  assert.match(allText(again), /Echo: back/);
  assert.equal((await remoteStatus(c, ledger)).connected, true);
  await second.close();
});

test("a Streamable HTTP upstream killed while idle is noticed through its GET stream: server_disconnected, then a blocking call fails with EMCP_UPSTREAM_UNAVAILABLE naming the server until it is back", async () => {
  const first = await server();
  const { c } = await gatewayFor(first.url);
  const ledger = new EventLedger();
  await kill(first);
  await awaitUntil(c, ledger, (l) => l.has(disconnected));
  assert.equal((await remoteStatus(c, ledger)).connected, false);

  const refused = await ledger.call(c, "execute_tool", { server: "remote", tool: "echo", args: { message: "x" } });
  assert.equal(refused.isError, true);
  assert.match(allText(refused), /EMCP_UPSTREAM_UNAVAILABLE/);
  assert.match(allText(refused), /'remote'/);

  const second = await server(first.port);
  await awaitUntil(c, ledger, (l) => l.has(reconnected), 60_000);
  assert.equal(ledger.all.find(reconnected)!.data.restarted, true);
  const again = await ledger.call(c, "execute_tool", { server: "remote", tool: "echo", args: { message: "again" } });
  assert.match(allText(again), /Echo: again/);
  await second.close();
});

test("a blocking call in flight when the Streamable HTTP upstream dies fails at once with EMCP_UPSTREAM_UNAVAILABLE and the reason", async () => {
  const first = await server();
  const { gw, c } = await gatewayFor(first.url);
  const ledger = new EventLedger();
  const conn = await sessionOf(gw, c).connection("remote");
  const before = conn.requestCount;
  const pending = ledger.call(c, "execute_tool", {
    server: "remote",
    tool: "trigger-long-running-operation",
    args: { duration: 60, steps: 60 },
    timeout_ms: 120_000,
  });
  // Wait for the call to be in flight upstream before killing.
  const end = Date.now() + 30_000;
  while (conn.idleSince(before) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  assert.ok(!conn.idleSince(before), "the call reached the upstream");
  await kill(first);
  const r = await pending;
  assert.equal(r.isError, true, allText(r));
  assert.match(allText(r), /EMCP_UPSTREAM_UNAVAILABLE/);
  assert.match(allText(r), /upstream 'remote' was lost while this request ran/);
  assert.match(allText(r), /the connection was lost \(.*a ping to check it failed|no longer knows its MCP session/);
});

test("an upstream that forgets the gateway's MCP session (it was ended upstream) is a drop: server_disconnected says so, and a new session is opened (restarted: true)", async () => {
  const up = await server();
  const { gw, c } = await gatewayFor(up.url);
  const ledger = new EventLedger();
  const conn = await sessionOf(gw, c).connection("remote");
  const old = conn.upstreamSessionId;
  assert.ok(old, "the gateway holds an upstream session");
  // Ended from outside, as an upstream restart (or its own expiry) would: the server no longer knows the id.
  const res = await fetch(up.url, { method: "DELETE", headers: { "mcp-session-id": old, "mcp-protocol-version": "2025-06-18" } });
  assert.ok(res.ok, `DELETE answered ${res.status}`);

  await awaitUntil(c, ledger, (l) => l.has(reconnected), 60_000);
  const event = ledger.all.find(disconnected)!;
  assert.match(String(event.data.reason), /no longer knows its MCP session \(HTTP (404|400)\)/);
  assert.equal(ledger.all.find(reconnected)!.data.restarted, true);
  const again = await ledger.call(c, "execute_tool", { server: "remote", tool: "echo", args: { message: "new session" } });
  assert.match(allText(again), /Echo: new session/);
  assert.notEqual((await sessionOf(gw, c).connection("remote")).upstreamSessionId, old);
});

test("an upstream that stops answering without any error (SIGSTOP) is found by the liveness ping while a call is in flight", async () => {
  const up = await server();
  const gw = await startGateway({ mcpServers: { remote: { url: up.url } }, gateway: { upstream: { livenessPingMs: 500 } } });
  gateways.push(gw);
  const c = await connectClient(gw.url);
  clients.push(c);
  await waitConnected(c, "remote");
  const ledger = new EventLedger();
  const { taskId } = await promote(c, "remote", "trigger-long-running-operation", { duration: 60, steps: 60 }, 200, {}, ledger);
  // Stopped, not dead: its sockets stay open and silent, no transport error ever comes.
  up.child.kill("SIGSTOP");
  try {
    await awaitUntil(c, ledger, (l) => l.has(disconnected), 60_000);
    const event = ledger.all.find(disconnected)!;
    assert.match(String(event.data.reason), /requests were in flight; a ping to check it failed/);
    assert.ok(Array.isArray(event.data.failedTasks) && event.data.failedTasks.includes(taskId), JSON.stringify(event.data));
    assert.equal((await remoteStatus(c, ledger)).connected, false);
  } finally {
    up.child.kill("SIGKILL");
  }
});
