import { test } from "node:test";
import assert from "node:assert/strict";
import { Reconnections, type ReconnectReport } from "../../src/session/reconnection.js";
import { parseConfig } from "../../src/config/load.js";
import { silentLogger } from "../../src/logging.js";
import type { UpstreamConnection } from "../../src/upstream/connection.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

const settings = parseConfig({ gateway: { upstream: { reconnect: { initialDelayMs: 100, maxDelayMs: 1000, jitter: 0, maxAttempts: 3 } } } }).gateway;

/** A connection as reconcile() reads it: lists with digests that change when `tools` changes. */
function connection(tools: string[], pid: number | null = 1): UpstreamConnection {
  const conn = {
    pid,
    upstreamSessionId: undefined,
    serverInfo: { name: "up", version: "1" },
    capabilities: { tools: {} },
    listDigests: {} as Record<string, string>,
    listTools: async () => {
      conn.listDigests.tools = tools.join(",");
      return [];
    },
    listResources: async () => [],
    listPrompts: async () => [],
  };
  return conn as unknown as UpstreamConnection;
}

function setup(connect: () => Promise<UpstreamConnection>) {
  const clock = new ManualClock();
  const attempts: number[] = [];
  const reports: ReconnectReport[] = [];
  const changed: string[] = [];
  const r = new Reconnections({
    settings,
    clock,
    logger: silentLogger,
    wanted: () => true,
    connect: async () => {
      attempts.push(clock.now());
      const conn = await connect();
      r.onConnected("up", conn);
      return conn;
    },
    listChanged: (_s, kind) => changed.push(kind),
    reconnected: (_s, report) => reports.push(report),
  });
  return { clock, r, attempts, reports, changed };
}

test("backs off 100, 200, 400 ms between attempts, then gives up until the next use", async () => {
  const { clock, r, attempts, reports } = setup(() => Promise.reject(new Error("down")));
  const start = clock.now();
  r.onDrop("up", connection(["a"]), { failedTasks: 2, rejectedRequests: 1 });
  for (const step of [100, 200, 400, 800]) {
    clock.advance(step);
    await flush();
  }
  assert.deepEqual(
    attempts.map((t) => t - start),
    [100, 300, 700],
  );
  assert.equal(clock.pendingTimers, 0, "no timer after giving up");
  assert.deepEqual(reports, []);
});

test("a successful attempt reconciles: restart detected, changed lists reported with counts", async () => {
  let fail = 1;
  const { clock, r, reports, changed } = setup(async () => {
    if (fail-- > 0) throw new Error("not yet");
    return connection(["a", "b"]);
  });
  const before = connection(["a"]);
  await before.listTools();
  r.onDrop("up", before, { failedTasks: 2, rejectedRequests: 1 });
  clock.advance(100);
  await flush();
  clock.advance(200);
  await flush();
  assert.deepEqual(changed, ["tools"]);
  assert.deepEqual(reports, [{ attempts: 2, restarted: true, changedLists: ["tools"], failedTasks: 2, rejectedRequests: 1 }]);
  assert.equal(clock.pendingTimers, 0);
});

test("unchanged lists are not reported; stop() and close() clear the pending attempt", async () => {
  const { clock, r, reports, changed } = setup(async () => connection(["a"], null));
  const before = connection(["a"], null);
  await before.listTools();
  r.onDrop("up", before, { failedTasks: 0, rejectedRequests: 0 });
  clock.advance(100);
  await flush();
  assert.deepEqual(changed, []);
  assert.deepEqual(reports, [{ attempts: 1, restarted: false, changedLists: [], failedTasks: 0, rejectedRequests: 0 }]);

  r.onDrop("up", before, { failedTasks: 0, rejectedRequests: 0 });
  assert.equal(clock.pendingTimers, 1);
  r.close();
  assert.equal(clock.pendingTimers, 0);
});
