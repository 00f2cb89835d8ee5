/**
 * Reconnection backoff across a crash loop (design UP-13): a reconnect that
 * drops again before gateway.upstream.reconnect.stableAfterMs goes on
 * counting attempts (growing delays, maxAttempts, then a clear give-up); one
 * that stayed up that long starts the backoff over.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { Reconnections, type ReconnectReport } from "../../src/session/reconnection.js";
import { parseConfig } from "../../src/config/load.js";
import { createLogger } from "../../src/logging.js";
import type { UpstreamHandle } from "../../src/upstream/handle.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

const settings = parseConfig({
  gateway: { upstream: { reconnect: { initialDelayMs: 100, maxDelayMs: 1000, jitter: 0, maxAttempts: 4, stableAfterMs: 5_000 } } },
}).gateway;

/** A connection as reconcile() reads it (a new process each time: pid). */
function connection(): UpstreamHandle {
  return {
    pid: 1,
    upstreamSessionId: undefined,
    serverInfo: { name: "up", version: "1" },
    capabilities: {},
    listDigests: {},
  } as unknown as UpstreamHandle;
}

/** Every connect succeeds; the test drops the connection when it likes. */
function setup() {
  const clock = new ManualClock();
  const connects: number[] = [];
  const reports: ReconnectReport[] = [];
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const r = new Reconnections({
    settings,
    clock,
    logger: createLogger("info", sink),
    wanted: () => true,
    connect: async () => {
      connects.push(clock.now());
      const conn = connection();
      r.onConnected("up", conn);
      return conn;
    },
    listChanged: () => undefined,
    reconnected: (_s, report) => reports.push(report),
  });
  /** Drops the connection, then runs time until the next (re)connect or until nothing is pending. */
  const dropAndWait = async (afterMs = 0) => {
    clock.advance(afterMs);
    r.onDrop("up", connection(), { failedTasks: 0, rejectedRequests: 0 });
    const before = connects.length;
    for (let i = 0; i < 100 && connects.length === before && clock.pendingTimers > 0; i++) {
      clock.advance(10);
      await flush();
    }
    await flush();
  };
  return { clock, r, connects, reports, lines, dropAndWait };
}

test("an upstream that drops right after each reconnect backs off with growing delays and gives up at maxAttempts, saying why", async () => {
  const { clock, connects, reports, lines, dropAndWait } = setup();
  const start = clock.now();
  for (let i = 0; i < 5; i++) await dropAndWait();
  // Delays 100, 200, 400, 800: the attempt count was not reset by the short-lived reconnects.
  assert.deepEqual(
    connects.map((t) => t - start),
    [100, 300, 700, 1500],
  );
  assert.deepEqual(
    reports.map((r) => r.attempts),
    [1, 2, 3, 4],
  );
  assert.equal(clock.pendingTimers, 0, "no further attempt after maxAttempts");
  const gaveUp = lines.find((l) => l.msg === "upstream_reconnect_gave_up");
  assert.ok(gaveUp, "the give-up is logged");
  assert.equal(gaveUp.attempts, 4);
  assert.match(String(gaveUp.reason), /after 4 attempts.*maxAttempts.*stableAfterMs.*next use/);
});

test("a reconnect that stayed up stableAfterMs starts the backoff over", async () => {
  const { connects, reports, dropAndWait } = setup();
  await dropAndWait();
  await dropAndWait();
  assert.deepEqual(
    reports.map((r) => r.attempts),
    [1, 2],
  );
  const before = connects.at(-1)!;
  // Up for 5 s: the next drop is a fresh outage (first delay again).
  await dropAndWait(5_000);
  assert.equal(connects.at(-1)! - before, 5_000 + 100);
  assert.equal(reports.at(-1)!.attempts, 1);
});
