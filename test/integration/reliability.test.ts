/**
 * Upstream faults with real processes (design UP-5..UP-10): an upstream killed mid-call
 * is reconnected with backoff and reconciled; wrapper upstreams leave no
 * orphans when a session ends or the gateway shuts down; the child-process
 * cap refuses clearly; hanging and garbage-speaking upstreams fail with
 * precise reasons while other sessions keep being served. Where the
 * process is not the point (a session's close cancelling its upstream tasks,
 * oversized arguments, the server that keeps serving beside broken ones),
 * server-everything runs in this process (test/helpers/in-process.ts).
 */
import { test, describe, afterEach } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { everythingServerEntry } from "../../src/config/demo.js";
import { createLogger } from "../../src/logging.js";
import { call, connectClient, everythingStdio, FIXTURES, startGateway, TEST_SHARING, waitConnected, type TestGateway } from "../helpers/gateway.js";
import { allText, awaitUntil, errorCodeOf, eventually, EventLedger, promote, sessionOf, waitTerminal } from "../helpers/async-extra.js";
import { initializeBody, MCP_POST_HEADERS, pollFor } from "../helpers/core-extra.js";
import { connectFace, startTask, upstreamIdOf } from "../helpers/tasks.js";
import { inProcess, inProcessTransportFactory, startInProcessGateway } from "../helpers/in-process.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";

/** The tests that count a session's processes run without the warm pool (its own tests: warm-pool.test.ts, processes.test.ts). */
const NO_WARM = { upstream: { warmPool: 0 } };
const wrapped = (marker: string) => ({ command: process.execPath, args: [path.join(FIXTURES, "forking-server.mjs"), everythingServerEntry(), marker] });
const crashy = (mode: string) => ({ command: process.execPath, args: [path.join(FIXTURES, "crashy-server.mjs"), mode] });

const gateways: TestGateway[] = [];
const clients: Client[] = [];
const open: Client[] = [];
// Each test's gateway ends with its test: one left open until the file's end kept its warm pool starting the broken
// upstreams of the reconnection and hanging/garbage tests again, about once a second each (~250 spawns per run).
afterEach(async () => {
  await Promise.allSettled([...clients.splice(0), ...open.splice(0)].map((c) => c.close()));
  await Promise.allSettled(gateways.splice(0).map((g) => g.close()));
});

async function gatewayWith(raw: Parameters<typeof startGateway>[0], deps?: Parameters<typeof startGateway>[1]): Promise<TestGateway> {
  const gw = await startGateway(raw, deps);
  gateways.push(gw);
  return gw;
}

async function client(gw: TestGateway): Promise<Client> {
  const c = await connectClient(gw.url);
  clients.push(c);
  return c;
}

describe("reconnection after an upstream crash", () => {
  test("a killed upstream fails its working task as 'state unknown', is reconnected in the background and reported as server_reconnected", async () => {
    const gw = await gatewayWith({
      mcpServers: { everything: everythingStdio() },
      gateway: { upstream: { reconnect: { initialDelayMs: 100, maxDelayMs: 400 } } },
    });
    const c = await client(gw);
    await waitConnected(c, "everything");
    const ledger = new EventLedger();
    const { taskId } = await promote(c, "everything", "trigger-long-running-operation", { duration: 30, steps: 30 }, 200, {}, ledger);
    const conn = await sessionOf(gw, c).connection("everything");
    const oldPid = conn.pid!;
    process.kill(oldPid, "SIGKILL");

    // The ledger sees these calls' events too: the reconnect (100 ms later) can report server_connected while they run.
    const failed = await waitTerminal(c, taskId, 30_000, ledger);
    assert.equal(failed.status, "failed");
    assert.match(failed.error ?? "", /disconnected.*state is unknown/);

    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "server_reconnected"));
    const reconnected = ledger.all.find((e) => e.type === "server_reconnected")!;
    assert.equal(reconnected.server, "everything");
    assert.equal(reconnected.data.restarted, true, "a new stdio process is a restart");
    assert.equal(reconnected.data.failedTasks, 1);
    assert.ok(Number(reconnected.data.attempts) >= 1);
    assert.ok(Array.isArray(reconnected.data.changedLists));
    const order = ledger.all.map((e) => e.type).filter((t) => t.startsWith("server_"));
    assert.deepEqual(order.slice(-2), ["server_connected", "server_reconnected"], "reconciliation follows the new connection");

    const again = await call(c, "execute_tool", { server: "everything", tool: "echo", args: { message: "back" } });
    assert.equal(allText(again).includes("Echo: back"), true, allText(again));
    const now = await sessionOf(gw, c).connection("everything");
    assert.notEqual(now.pid, oldPid);
  });

  test("an upstream that cannot come back is retried a bounded number of times, then on next use", async () => {
    const logged: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) logged.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const gw = await gatewayWith(
      {
        mcpServers: { everything: everythingStdio() },
        // No warm pool: what is bounded is the session's reconnection; a spare would be started again and again (ADR 0056).
        gateway: { upstream: { reconnect: { initialDelayMs: 50, maxDelayMs: 50, maxAttempts: 2 }, warmPool: 0 } },
      },
      { logger: createLogger("info", sink) },
    );
    const c = await client(gw);
    await waitConnected(c, "everything");
    const session = sessionOf(gw, c);
    const conn = await session.connection("everything");
    // The server's command now points at a process that exits at once: every reconnect fails.
    gw.gateway.context.registry.get("everything")!.config = crashy("exit-at-start");
    process.kill(conn.pid!, "SIGKILL");
    const ledger = new EventLedger();
    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "server_disconnected"));
    // Two failed attempts (50 ms apart), then the session stops retrying by itself.
    const gaveUp = await eventually("upstream_reconnect_gave_up is logged", () => logged.find((l) => l.msg === "upstream_reconnect_gave_up"), 60_000);
    assert.equal(gaveUp.attempts, 2);
    const r = await call(c, "execute_tool", { server: "everything", tool: "echo", args: { message: "x" } });
    assert.equal(errorCodeOf(r), "EMCP_UPSTREAM_UNAVAILABLE", allText(r));
    assert.match(allText(r), /missing API key/, "the reason names what the upstream said on stderr");
    assert.ok(!ledger.has((e) => e.type === "server_reconnected"));
  });
});

describe("no orphan processes", () => {
  const perSession = { skip: TEST_SHARING === "shared" && "a shared upstream's process outlives each session" };

  test("ending a session reaps its wrapper upstream's whole process tree (a grandchild that ignores SIGTERM included)", perSession, async () => {
    const marker = newMarker();
    const gw = await gatewayWith({ mcpServers: { wrapped: wrapped(marker) }, gateway: NO_WARM });
    const c = await connectClient(gw.url);
    clients.push(c);
    await waitConnected(c, "wrapped");
    assert.equal(processesWith(marker).length, 3, "wrapper, server and stubborn helper are running");
    await (c.transport as StreamableHTTPClientTransport).terminateSession();
    assert.deepEqual(await waitForNoProcesses(marker), [], "every process of the tree is gone after DELETE");
  });

  test("gateway shutdown reaps every session's upstream processes", async () => {
    const marker = newMarker();
    // Also closed after the test (afterEach) should an assertion fail first (close() is idempotent): nothing may outlive the test.
    const gw = await gatewayWith({ mcpServers: { wrapped: wrapped(marker) }, gateway: NO_WARM });
    const a = await connectClient(gw.url);
    const b = await connectClient(gw.url);
    await Promise.all([waitConnected(a, "wrapped"), waitConnected(b, "wrapped")]);
    assert.equal(processesWith(marker).length, TEST_SHARING === "shared" ? 3 : 6);
    await gw.close();
    assert.deepEqual(await waitForNoProcesses(marker), []);
    await Promise.allSettled([a.close(), b.close()]);
  });
});

describe("limits and broken upstreams", () => {
  test(
    "the child-process cap refuses a new stdio upstream with a clear error until a slot frees up",
    { skip: TEST_SHARING === "shared" && "sessions share one process: a second session needs no slot" },
    async () => {
      const gw = await gatewayWith({ mcpServers: { everything: everythingStdio() }, gateway: { upstream: { maxChildProcesses: 1 } } });
      const a = await client(gw);
      await waitConnected(a, "everything");
      const b = await client(gw);
      const refused = await call(b, "execute_tool", { server: "everything", tool: "echo", args: { message: "b" } });
      assert.equal(errorCodeOf(refused), "EMCP_LIMIT_REACHED", allText(refused));
      assert.match(allText(refused), /maxChildProcesses = 1/);
      await (a.transport as StreamableHTTPClientTransport).terminateSession();
      // The slot frees once the first session's child has exited.
      const served = await pollFor(async () => {
        const r = await call(b, "execute_tool", { server: "everything", tool: "echo", args: { message: "b" } });
        return errorCodeOf(r) === "EMCP_LIMIT_REACHED" ? undefined : r;
      }, "a free child slot");
      assert.match(allText(served), /Echo: b/);
    },
  );

  test("a hanging upstream times out with a reason; a garbage-speaking one fails; other servers keep serving", async () => {
    // server-everything (the one that keeps serving) in this process; the broken ones are processes. One connect timeout
    // for all: the hanging one waits it out; nothing else has a process start to wait for but garbage, which fails either way.
    const gw = await startInProcessGateway({
      mcpServers: { everything: inProcess("everything"), hang: crashy("hang"), garbage: crashy("garbage") },
      // No warm pool: the broken servers' spares would be started again and again while the test runs (ADR 0056).
      gateway: { upstream: { connectTimeoutMs: 5_000, reconnect: { maxAttempts: 0 }, warmPool: 0 } },
    });
    gateways.push(gw);
    const c = await client(gw);
    const [hang, garbage] = await Promise.all([
      call(c, "execute_tool", { server: "hang", tool: "anything", args: {} }),
      call(c, "execute_tool", { server: "garbage", tool: "anything", args: {} }),
    ]);
    assert.equal(errorCodeOf(hang), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.match(allText(hang), /timed out|timeout/i);
    assert.equal(errorCodeOf(garbage), "EMCP_UPSTREAM_UNAVAILABLE");
    const echo = await call(c, "execute_tool", { server: "everything", tool: "echo", args: { message: "fine" } });
    assert.match(allText(echo), /Echo: fine/);
    const other = await client(gw);
    assert.match(allText(await call(other, "execute_tool", { server: "everything", tool: "echo", args: { message: "other" } })), /Echo: other/);
  });
});

describe("shutdown, idle expiry and churn", () => {
  test("closing a session cancels its upstream tasks (tasks/cancel is sent before the connection closes)", async () => {
    const sent: Array<{ method: string; params?: Record<string, unknown> }> = [];
    // server-everything in this process (test/helpers/in-process.ts): what is asserted is the order of the gateway's messages.
    const inProcessFactory = inProcessTransportFactory();
    const recording: TransportFactory = (name, config, options) => {
      const created = inProcessFactory(name, config, options);
      const send = created.transport.send.bind(created.transport);
      created.transport.send = (message, options) => {
        if ("method" in message) sent.push({ method: message.method, ...(message.params ? { params: message.params } : {}) });
        return send(message, options);
      };
      return created;
    };
    const gw = await startGateway({ mcpServers: { everything: inProcess("everything") } }, { transportFactory: recording });
    gateways.push(gw);
    const peer = await connectFace(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"));
    const task = await startTask(peer.client, "simulate-research-query", { topic: "shutdown" });
    const upstreamId = await upstreamIdOf(gw, peer, task.taskId);
    assert.ok(upstreamId);
    await gw.gateway.context.sessions.destroy(peer.sessionId, "test");
    assert.ok(
      sent.some((m) => m.method === "tasks/cancel" && m.params?.taskId === upstreamId),
      `tasks/cancel for ${upstreamId} was sent: ${JSON.stringify(sent.map((m) => m.method))}`,
    );
    await peer.client.close().catch(() => undefined);
  });

  test("oversized tool arguments are refused with a clear error on both faces", async () => {
    const gw = await startInProcessGateway({ gateway: { tools: { maxArgumentsBytes: 1000 } } });
    gateways.push(gw);
    const c = await client(gw);
    const big = { message: "x".repeat(2000) };
    const meta = await call(c, "execute_tool", { server: "everything", tool: "echo", args: big });
    assert.equal(errorCodeOf(meta), "EMCP_BAD_ARGUMENTS");
    assert.match(allText(meta), /maxArgumentsBytes \(1000\)/);
    const face = await connectFace(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"));
    open.push(face.client);
    await assert.rejects(face.client.callTool({ name: "echo", arguments: big }), /maxArgumentsBytes/);
    assert.match(allText((await face.client.callTool({ name: "echo", arguments: { message: "small" } })) as CallToolResult), /Echo: small/);
  });

  test("an idle session expires even while its SSE stream is open; the stream is closed", async () => {
    const gw = await gatewayWith({ mcpServers: {}, gateway: { sessions: { idleTimeoutMs: 300, sweepIntervalMs: 100 } } });
    const init = await fetch(gw.url, { method: "POST", headers: MCP_POST_HEADERS, body: initializeBody() });
    const sessionId = init.headers.get("mcp-session-id")!;
    await init.text();
    await fetch(gw.url, {
      method: "POST",
      headers: { ...MCP_POST_HEADERS, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" },
      body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
    }).then((r) => r.text());
    const stream = await fetch(gw.url, { headers: { Accept: "text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" } });
    assert.equal(stream.status, 200);
    // Reading to the end only finishes when the gateway closes the stream.
    await stream.text();
    assert.equal(gw.gateway.context.sessions.get(sessionId), undefined, "the session is gone");
    const after = await fetch(gw.url, {
      method: "POST",
      headers: { ...MCP_POST_HEADERS, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(after.status, 404);
    await after.text();
  });

  test("200 sessions opened and closed leave no sessions, bindings, stored tasks, events or requests, or timers behind", async () => {
    const gw = await startGateway({ mcpServers: {} });
    gateways.push(gw);
    const { store } = gw.gateway.context;
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) {
      const c = await connectClient(gw.url);
      await call(c, "list_servers");
      ids.push((c.transport as StreamableHTTPClientTransport).sessionId!);
      await (c.transport as StreamableHTTPClientTransport).terminateSession();
      await c.close();
    }
    assert.equal(gw.gateway.context.sessions.size, 0);
    // A session's rows go as its close() finishes, which the DELETE does not wait for.
    await pollFor(async () => ((await store.events.total()) === 0 ? true : undefined), "every session's events to be deleted", 60_000);
    for (const id of ids) {
      assert.deepEqual(await store.tasks.listBySession(id), []);
      assert.deepEqual(await store.pending.listBySession(id), []);
    }
  });
});
