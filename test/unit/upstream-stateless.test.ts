/**
 * 2026-07-28 requests to a session-mode server (docs/adr/0058): each request's
 * session ends with its answer, so its handle is a view of its principal's
 * lingering connection — one process per principal, not one per request —
 * which closes idleReleaseMs after the principal's last request. One request
 * holds it at a time; another meanwhile connects its own, as before.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseConfig } from "../../src/config/load.js";
import { parseServerEntry } from "../../src/config/server-entry.js";
import { silentLogger } from "../../src/logging.js";
import { openStore } from "../../src/store/open.js";
import { ChildProcessLimiter } from "../../src/upstream/children.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { createUpstreams } from "../../src/upstream/sharing/factory.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { inProcess, inProcessTransportFactory } from "../helpers/in-process.js";
import { unusedHandlers } from "../helpers/upstream-handlers.js";
import { waitFor } from "../helpers/tasks.js";

const handlers = unusedHandlers();

async function setup(idleReleaseMs: number) {
  const store = await openStore({ kind: "memory" });
  const registry = new ServerRegistry();
  const parsed = parseServerEntry(inProcess("everything"));
  assert.ok(parsed.ok);
  registry.add({ name: "up", config: parsed.entry.config, addedAt: 0, addedBy: "config" });
  const clock = new ManualClock();
  const inner = inProcessTransportFactory();
  let made = 0;
  const counting: TransportFactory = (name, config, options) => {
    made++;
    return inner(name, config, options);
  };
  let ids = 0;
  const upstreams = createUpstreams({
    registry,
    settings: parseConfig({ gateway: { upstream: { warmPool: 0, idleReleaseMs } } }).gateway,
    transportFactory: counting,
    children: new ChildProcessLimiter(100),
    clientInfo: { name: "test", version: "0" },
    clock,
    newId: () => `id${++ids}`,
    logger: silentLogger,
    store: () => store,
  });
  const request = async (sessionId: string, principal?: { issuer: string; subject: string }) => {
    const h = upstreams.factory("up", { sessionId, handlers, logger: silentLogger, principal, stateless: true });
    await h.connect();
    assert.ok((await h.listToolsPage()).tools.length > 0);
    await h.close();
  };
  return { upstreams, clock, request, made: () => made, close: () => upstreams.close() };
}

test("a principal's stateless requests share one connection; another principal's get their own; it closes idleReleaseMs after the last", async () => {
  const t = await setup(60_000);
  try {
    const alice = { issuer: "https://idp", subject: "alice" };
    const bob = { issuer: "https://idp", subject: "bob" };
    for (let i = 0; i < 3; i++) await t.request(`a${i}`, alice);
    assert.equal(t.made(), 1, "alice's three requests: one connection");
    await t.request("b0", bob);
    assert.equal(t.made(), 2, "bob never uses alice's connection");
    await t.request("n0", undefined);
    assert.equal(t.made(), 3, "without authentication: a connection of its own key");
    assert.equal(t.upstreams.perPrincipal().stateless, 3, "each lingers for its principal's next request");

    t.clock.advance(59_000);
    await t.request("a3", alice);
    assert.equal(t.made(), 3, "a request within idleReleaseMs takes the lingering connection, and starts its wait over");
    t.clock.advance(1_000);
    // Bob's and the anonymous sets waited 60 s since their requests: closed and forgotten; alice's wait started over.
    await waitFor(() => t.upstreams.perPrincipal().stateless === 1 || undefined, "bob's and the anonymous set closed");
    t.clock.advance(59_000);
    await waitFor(() => t.upstreams.perPrincipal().stateless === 0 || undefined, "alice's set closed too");
    await t.request("a4", alice);
    assert.equal(t.made(), 4, "after the wait a request connects again");
  } finally {
    await t.close();
  }
});

test("one request at a time: a second request while the first holds the connection connects its own; the next one after takes the lingering one", async () => {
  const t = await setup(60_000);
  try {
    const first = t.upstreams.factory("up", { sessionId: "c0", handlers, logger: silentLogger, stateless: true });
    const second = t.upstreams.factory("up", { sessionId: "c1", handlers, logger: silentLogger, stateless: true });
    await Promise.all([first.connect(), second.connect()]);
    assert.equal(first.shared, true, "the first takes the principal's connection");
    assert.equal(second.shared, false, "the second, while the first holds it, gets its own (what the upstream asks mid-call is never in doubt)");
    assert.equal(t.made(), 2);
    await Promise.all([first.close(), second.close()]);
    await t.request("c2");
    assert.equal(t.made(), 2, "the next request takes the lingering connection");
  } finally {
    await t.close();
  }
});

test("with idleReleaseMs 0 (connections kept for a session's life) a stateless request connects its own, as a session does", async () => {
  const t = await setup(0);
  try {
    await t.request("a0");
    await t.request("a1");
    assert.equal(t.made(), 2);
    assert.equal(t.upstreams.perPrincipal().stateless, 0);
  } finally {
    await t.close();
  }
});

test("a stateless request that declares roots connects its own (the connection may ask it for them, and keep them)", async () => {
  const t = await setup(60_000);
  try {
    for (const sessionId of ["r0", "r1"]) {
      const h = t.upstreams.factory("up", { sessionId, handlers, logger: silentLogger, roots: { listChanged: false }, stateless: true });
      await h.connect();
      assert.equal(h.shared, false);
      await h.close();
    }
    assert.equal(t.made(), 2);
    assert.equal(t.upstreams.perPrincipal().stateless, 0);
  } finally {
    await t.close();
  }
});

test("a session's own connection is unchanged: not stateless, not shared", async () => {
  const t = await setup(60_000);
  try {
    const a = t.upstreams.factory("up", { sessionId: "s1", handlers, logger: silentLogger });
    const b = t.upstreams.factory("up", { sessionId: "s2", handlers, logger: silentLogger });
    await a.connect();
    await b.connect();
    assert.equal(t.made(), 2);
    assert.equal(a.shared, false);
    await a.close();
    await b.close();
  } finally {
    await t.close();
  }
});
