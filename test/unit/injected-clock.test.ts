/**
 * The injected clock (src/clock.ts) is the only time these parts read or
 * wait on: an upstream connection's connectedAt, the transparent face's
 * waits (a task's tasks/result, the client's `initialized`), the bounded
 * DELETE of an upstream session, and the bound on each message replayed to
 * resume a downstream session. Driven by a ManualClock: each bound ends
 * exactly when the clock passes it, never on its own.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createBridge, DownstreamRoutes } from "../../src/faces/transparent/bridge.js";
import { Catalog } from "../../src/faces/transparent/catalog.js";
import { within } from "../../src/clock.js";
import { silentLogger } from "../../src/logging.js";
import { primeServerTransport } from "../../src/mcp/resume-session.js";
import { UpstreamConnection } from "../../src/upstream/connection.js";
import { terminateSession } from "../../src/upstream/session-continuation.js";
import { startHungServer } from "../fixtures/hung-http-server.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, track } from "../helpers/promises.js";
import { unusedHandlers } from "../helpers/upstream-handlers.js";

const START = Date.UTC(2030, 5, 1);

test("an upstream connection's connectedAt is the injected clock's time", async () => {
  const clock = new ManualClock(START);
  const upstream = new McpServer({ name: "in-memory", version: "1.0.0" });
  const connection = new UpstreamConnection({
    name: "mem",
    config: { command: "unused: the transport is in memory", args: [] },
    handlers: unusedHandlers(),
    transportFactory: () => {
      const [client, server] = InMemoryTransport.createLinkedPair();
      void upstream.connect(server);
      return { transport: client };
    },
    clientInfo: { name: "test", version: "1" },
    connectTimeoutMs: 30_000,
    requestTimeoutMs: 30_000,
    logger: silentLogger,
    clock,
  });
  try {
    await connection.connect();
    assert.equal(connection.connectedAt, START);
  } finally {
    await connection.close();
    await upstream.close();
  }
});

test("a request queued for a task's tasks/result gives up when the clock passes its bound", async () => {
  const clock = new ManualClock();
  const routes = new DownstreamRoutes(clock);
  const queued = track(routes.viaTaskResult("task-1", new AbortController().signal, 5_000, () => Promise.resolve("sent")));
  clock.advance(4_999);
  await flush();
  assert.equal(queued.settled, false, "still waiting before the bound");
  clock.advance(1);
  await flush();
  assert.match(String(queued.error), /did not call tasks\/result for task task-1 within 5000ms/);
  assert.equal(clock.pendingTimers, 0);
});

test("the transparent bridge waits for the client's initialized until the clock passes the bound", async () => {
  const clock = new ManualClock();
  const server = new Server({ name: "face", version: "1" }, { capabilities: {} });
  const catalog = new Catalog({ kind: "server", server: "mem" }, () => ["mem"]);
  const never = new Promise<void>(() => undefined);
  const bridge = createBridge(server, {}, catalog, new DownstreamRoutes(clock), 60_000, never, clock);
  const ready = track(bridge.whenInitialized(new AbortController().signal, 3_000));
  clock.advance(2_999);
  await flush();
  assert.equal(ready.settled, false);
  clock.advance(1);
  await flush();
  assert.equal(ready.value, false, "not initialized within the bound");
  assert.equal(clock.pendingTimers, 0);
});

test("ending an upstream session: a DELETE the upstream never answers is given up when the clock passes the bound", async (t) => {
  const hung = await startHungServer();
  t.after(() => hung.close());
  const clock = new ManualClock();
  const transport = new StreamableHTTPClientTransport(new URL(hung.url), { sessionId: "upstream-session" });
  const ended = track(
    terminateSession(
      { name: "hung", logger: silentLogger, requestTimeoutMs: 2_000, clock },
      { transport, terminateSession: () => transport.terminateSession() },
    ),
  );
  // Wait for what we wait for: the DELETE reached the upstream (which holds it).
  for (const deadline = Date.now() + 30_000; hung.requests === 0;) {
    assert.ok(Date.now() < deadline, "the DELETE reached the hung upstream");
    await new Promise((resolve) => setImmediate(resolve));
  }
  await flush();
  assert.equal(ended.settled, false, "still waiting for the DELETE");
  clock.advance(2_000);
  await flush();
  assert.equal(ended.settled, true, "given up at the bound (the request timeout, shorter than 5 s)");
  assert.equal(clock.pendingTimers, 0);
  await transport.close();
});

test("resuming a session: a replayed initialize the SDK transport never answers fails when the clock passes the bound", async () => {
  const clock = new ManualClock();
  // Connected to no server: nothing answers the replayed initialize.
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => "resumed" });
  await transport.start();
  const primed = track(primeServerTransport(transport, { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "c", version: "1" } }, clock));
  for (let i = 0; i < 20 && clock.pendingTimers === 0; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(primed.settled, false);
  clock.advance(10_000);
  await flush();
  assert.match(String(primed.error), /did not answer a replayed message within 10000ms/);
  assert.equal(clock.pendingTimers, 0);
  await transport.close();
});

test("within(): a wait on a promise that never settles lets go of its signal once the clock ends it", async () => {
  // An expected bridge that never comes (BridgeSlot) or a client that never sends `initialized`: each request's wait
  // times out, and what it held (its signal, timer, resolvers) must not stay reachable through the promise's reaction.
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const clock = new ManualClock();
  const never = new Promise<void>(() => undefined);
  const signals: Array<WeakRef<AbortSignal>> = [];
  for (let i = 0; i < 200; i++) {
    const waited = (() => {
      const controller = new AbortController();
      signals.push(new WeakRef(controller.signal));
      return within(never, controller.signal, 1_000, clock);
    })();
    clock.advance(1_000);
    assert.equal(await waited, false, "the time ran out first");
  }
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const kept = signals.filter((s) => s.deref() !== undefined).length;
  assert.ok(kept < 10, `${kept} of 200 timed-out waits' signals are still reachable`);
  assert.equal(await within(Promise.resolve(), new AbortController().signal, 1_000, clock), true, "a settled promise still ends the wait at once");
});
