/**
 * Session expiry in the SessionManager, on a ManualClock (nothing sleeps):
 * a session whose client never came back after its first exchange expires
 * after sessions.oneShotIdleMs, an established one after idleTimeoutMs; open
 * HTTP responses hold a one-shot session; stdio sessions (oneShot: false)
 * never expire as one-shot; close() leaves no timer behind. No upstream is
 * configured, so no transport is ever made.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseConfig } from "../../src/config/load.js";
import { silentLogger } from "../../src/logging.js";
import { SessionManager } from "../../src/session/session-manager.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

const FIRST_EXCHANGE = 10_000;
const ONE_SHOT = 60_000;
const IDLE = 1_800_000;
const SWEEP = 1_000;

function setup() {
  const clock = new ManualClock();
  const settings = parseConfig({
    gateway: { sessions: { firstExchangeMs: FIRST_EXCHANGE, oneShotIdleMs: ONE_SHOT, idleTimeoutMs: IDLE, sweepIntervalMs: SWEEP } },
  }).gateway;
  let ids = 0;
  const manager = new SessionManager({
    registry: new ServerRegistry(),
    settings,
    clock,
    newId: () => `s${++ids}`,
    logger: silentLogger,
    upstreams: () => {
      throw new Error("no upstream is configured: nothing may connect");
    },
    store: createMemoryStore(clock),
  });
  const destroyed: string[] = [];
  manager.onDestroyed = (id) => destroyed.push(id);
  manager.start();
  /** Moves time in sweep-sized steps, letting each sweep's destroy() finish. */
  const advance = async (ms: number) => {
    for (let left = ms; left > 0; left -= SWEEP) {
      clock.advance(Math.min(SWEEP, left));
      await flush();
    }
  };
  return { clock, manager, destroyed, advance };
}

test("a session that never comes back after its first exchange expires after oneShotIdleMs", async () => {
  const { manager, destroyed, advance, clock } = setup();
  const s = manager.create();
  // The first exchange: initialize's response, then two requests a moment later.
  manager.responseOpened(s)();
  await advance(1_000);
  manager.requestArrived(s);
  manager.requestArrived(s);
  assert.equal(manager.isEstablished(s.id), false);
  await advance(ONE_SHOT - SWEEP);
  assert.deepEqual(destroyed, [], "not before oneShotIdleMs since its last request");
  await advance(SWEEP);
  assert.deepEqual(destroyed, [s.id]);
  assert.equal(manager.get(s.id), undefined);
  assert.equal(s.isClosed, true);
  await manager.close();
  assert.equal(clock.pendingTimers, 0, "no timer left behind");
});

test("a client that comes back after the first exchange is established: the normal idle timeout applies", async () => {
  const { manager, destroyed, advance, clock } = setup();
  const s = manager.create();
  await advance(FIRST_EXCHANGE + SWEEP);
  manager.requestArrived(s);
  assert.equal(manager.isEstablished(s.id), true);
  await advance(ONE_SHOT * 3);
  assert.deepEqual(destroyed, [], "established sessions outlive oneShotIdleMs");
  await advance(IDLE - ONE_SHOT * 3);
  assert.deepEqual(destroyed, [s.id], "and expire after idleTimeoutMs");
  await manager.close();
  assert.equal(clock.pendingTimers, 0);
});

test("an open HTTP response (a request in flight, a GET stream) holds a one-shot session; its end restarts the wait", async () => {
  const { manager, destroyed, advance } = setup();
  const s = manager.create();
  manager.requestArrived(s);
  const closeStream = manager.responseOpened(s);
  await advance(ONE_SHOT * 2);
  assert.deepEqual(destroyed, [], "kept while the response is open");
  closeStream();
  closeStream(); // a second close is a no-op
  await advance(ONE_SHOT - SWEEP);
  assert.deepEqual(destroyed, [], "the wait counts from the response's end");
  await advance(SWEEP);
  assert.deepEqual(destroyed, [s.id]);
  await manager.close();
});

test("an open response does not hold a session past idleTimeoutMs", async () => {
  const { manager, destroyed, advance } = setup();
  const s = manager.create();
  manager.responseOpened(s);
  await advance(IDLE);
  assert.deepEqual(destroyed, [s.id]);
  await manager.close();
});

test("stdio sessions (oneShot: false) only expire after idleTimeoutMs; each session is judged on its own", async () => {
  const { manager, destroyed, advance } = setup();
  const stdio = manager.create({ oneShot: false });
  const oneShot = manager.create();
  const returning = manager.create();
  await advance(FIRST_EXCHANGE + SWEEP);
  manager.requestArrived(returning);
  await advance(ONE_SHOT);
  assert.deepEqual(destroyed, [oneShot.id]);
  assert.equal(manager.size, 2);
  assert.ok(manager.get(stdio.id) && manager.get(returning.id));
  await manager.close();
  assert.equal(manager.size, 0);
});
