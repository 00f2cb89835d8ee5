/**
 * AggregateConnector (src/faces/transparent/aggregate.ts, design TF-10) on a
 * manual clock: a list waits for an upstream at most the bound, a missing or
 * failed upstream is not waited for again, a failed one is tried again only
 * after its backoff, and one that connects late is announced once.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import pino from "pino";
import { AggregateConnector } from "../../src/faces/transparent/aggregate.js";
import { GatewayError, ErrorCodes } from "../../src/errors.js";
import type { UpstreamHandle } from "../../src/upstream/handle.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const BOUND = 5_000;
const BACKOFF = { initialDelayMs: 1_000, maxDelayMs: 8_000, jitter: 0 };
/** The connector passes handles through without reading them. */
const HANDLE = {} as UpstreamHandle;

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Lets promise callbacks run (no time passes on the manual clock). */
const settle = () => new Promise((r) => setImmediate(r));

function setup(connect: (server: string) => Promise<UpstreamHandle>) {
  const clock = new ManualClock();
  const joined: string[] = [];
  const calls: string[] = [];
  const connector = new AggregateConnector({
    connect: (server) => (calls.push(server), connect(server)),
    clock,
    boundMs: BOUND,
    backoff: BACKOFF,
    logger: pino({ level: "silent" }),
    joined: (server) => joined.push(server),
  });
  return { clock, joined, calls, connector };
}

test("an upstream that does not connect within the bound is missing, is not waited for again, and is announced when it joins", async () => {
  const hung = deferred<UpstreamHandle>();
  const { clock, joined, calls, connector } = setup((s) => (s === "hung" ? hung.promise : Promise.resolve(HANDLE)));
  const reaching = connector.reach(["ok", "hung"]);
  await settle();
  clock.advance(BOUND);
  const first = await reaching;
  assert.deepEqual(
    first.connected.map((c) => c.server),
    ["ok"],
  );
  assert.deepEqual(
    first.missing.map((m) => m.server),
    ["hung"],
  );
  assert.match(first.missing[0]!.reason, /did not connect within 5000 ms/);
  // Resolves without the clock moving: nothing waits for the missing upstream.
  const second = await connector.reach(["ok", "hung"]);
  assert.deepEqual(
    second.missing.map((m) => m.server),
    ["hung"],
  );
  assert.equal(calls.filter((s) => s === "hung").length, 1, "one attempt, still under way");
  assert.equal(clock.pendingTimers, 0, "no bound timer left behind");
  hung.resolve(HANDLE);
  await settle();
  assert.deepEqual(joined, ["hung"]);
  const third = await connector.reach(["ok", "hung"]);
  assert.deepEqual(
    third.connected.map((c) => c.server),
    ["ok", "hung"],
  );
  assert.deepEqual(third.missing, []);
});

test("a failed upstream is tried again only after its backoff, in the background, and backs off further", async () => {
  const attempts: Array<ReturnType<typeof deferred<UpstreamHandle>>> = [];
  const { clock, joined, calls, connector } = setup(() => {
    const d = deferred<UpstreamHandle>();
    attempts.push(d);
    return d.promise;
  });
  const reaching = connector.reach(["down"]);
  await settle();
  attempts[0]!.reject(new GatewayError(ErrorCodes.UPSTREAM_UNAVAILABLE, "upstream 'down' is unavailable: connection refused"));
  const first = await reaching;
  assert.match(first.missing[0]!.reason, /^EMCP_UPSTREAM_UNAVAILABLE: upstream 'down' is unavailable: connection refused/);
  // Within the backoff (1 s after the first failure): no new attempt.
  clock.advance(999);
  await connector.reach(["down"]);
  assert.equal(calls.length, 1);
  // After it: a new attempt starts, and this list does not wait for it.
  clock.advance(1);
  const again = await connector.reach(["down"]);
  assert.equal(calls.length, 2);
  assert.deepEqual(
    again.missing.map((m) => m.server),
    ["down"],
  );
  attempts[1]!.reject(new Error("connection refused"));
  await settle();
  // Second failure: 2 s.
  clock.advance(1_999);
  await connector.reach(["down"]);
  assert.equal(calls.length, 2);
  clock.advance(1);
  await connector.reach(["down"]);
  assert.equal(calls.length, 3);
  attempts[2]!.resolve(HANDLE);
  await settle();
  assert.deepEqual(joined, ["down"]);
  assert.equal(clock.pendingTimers, 0);
});

test("after close() a late upstream is not announced", async () => {
  const late = deferred<UpstreamHandle>();
  const { clock, joined, connector } = setup(() => late.promise);
  const reaching = connector.reach(["late"]);
  await settle();
  clock.advance(BOUND);
  await reaching;
  connector.close();
  late.resolve(HANDLE);
  await settle();
  assert.deepEqual(joined, []);
});

test("a missing upstream that another path connected (a call, a reconnection) is listed at once", async () => {
  const upstream: { live?: UpstreamHandle } = {};
  const calls: string[] = [];
  const connector = new AggregateConnector({
    connect: (server) => (calls.push(server), Promise.reject(new Error("connection refused"))),
    live: () => upstream.live,
    clock: new ManualClock(),
    boundMs: BOUND,
    backoff: BACKOFF,
    logger: pino({ level: "silent" }),
    joined: () => assert.fail("listed at once: no list_changed owed"),
  });
  assert.deepEqual(
    (await connector.reach(["flaky"])).missing.map((m) => m.server),
    ["flaky"],
  );
  upstream.live = HANDLE;
  const now = await connector.reach(["flaky"]);
  assert.deepEqual(
    now.connected.map((c) => c.server),
    ["flaky"],
  );
  assert.deepEqual(now.missing, []);
  assert.equal(calls.length, 1, "no new attempt: the live connection is used");
});
