/**
 * UpstreamPool.lastError: while a reconnect's new connection is still
 * connecting, list_servers keeps saying why the last one failed (CI once read
 * `status: connecting` with no lastError between two attempts). The same for
 * a view of a shared connection, whose SharedUpstream replaces the failed one.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseConfig } from "../../src/config/load.js";
import { silentLogger } from "../../src/logging.js";
import { UpstreamPool } from "../../src/session/upstream-pool.js";
import type { UpstreamHandle } from "../../src/upstream/handle.js";
import type { ServerRegistry } from "../../src/upstream/registry.js";
import { SharedUpstream } from "../../src/upstream/sharing/shared.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { waitFor } from "../helpers/tasks.js";

const settings = parseConfig({ gateway: { upstream: { warmPool: 0, idleReleaseMs: 0, reconnect: { maxAttempts: 0 } } } }).gateway;

/** A handle whose connect() waits for `outcome` (resolve: connected; reject: fails with that reason). */
function handle() {
  let settle!: (reason?: string) => void;
  const h = {
    shared: false,
    status: "connecting" as string,
    lastError: undefined as string | undefined,
    stderrLines: [] as string[],
    receiverTasks: undefined,
    requestCount: 0,
    connect: () =>
      new Promise<void>((resolve, reject) => {
        settle = (reason) => {
          if (reason === undefined) {
            h.status = "connected";
            h.lastError = undefined;
            resolve();
          } else {
            h.status = "error";
            h.lastError = reason;
            reject(new Error(reason));
          }
        };
      }),
    close: async () => undefined,
    settle: (reason?: string) => settle(reason),
  };
  return h;
}

/** A session's pool whose handles `upstreams` makes. */
function poolOf(upstreams: () => UpstreamHandle): UpstreamPool {
  const registry = { require: () => undefined, get: () => ({}) } as unknown as ServerRegistry;
  return new UpstreamPool(
    { registry, settings, clock: new ManualClock(), upstreams },
    {
      sessionId: "s1",
      logger: silentLogger,
      roots: () => undefined,
      handlersFor: () => ({}) as never,
      connected: () => undefined,
      listChanged: () => undefined,
      reconnected: () => undefined,
      busy: () => false,
    },
  );
}

test("a new attempt's 'connecting' keeps the last failure's reason; a connect clears it; remove forgets it", async () => {
  const made: Array<ReturnType<typeof handle>> = [];
  const pool = poolOf(() => {
    const h = handle();
    made.push(h);
    return h as unknown as UpstreamHandle;
  });
  const first = pool.connection("up");
  assert.equal(pool.lastError("up"), undefined, "nothing failed yet");
  made[0]!.settle("exited with code 3 (stderr: flaky: refusing to start twice)");
  await assert.rejects(first);
  assert.equal(pool.lastError("up"), "exited with code 3 (stderr: flaky: refusing to start twice)");

  const second = pool.connection("up");
  assert.equal(pool.get("up")?.status, "connecting", "a new handle replaced the failed one");
  assert.equal(pool.lastError("up"), "exited with code 3 (stderr: flaky: refusing to start twice)", "still says why");
  made[1]!.settle("connect timed out");
  await assert.rejects(second);
  assert.equal(pool.lastError("up"), "connect timed out", "the newest failure wins");

  const third = pool.connection("up");
  made[2]!.settle();
  await third;
  assert.equal(pool.lastError("up"), undefined, "connected: no error");

  await pool.remove("up", async () => undefined);
  assert.equal(pool.lastError("up"), undefined);
  await pool.close();
});

test("a view of a shared connection: its reconnect's 'connecting' keeps the last failure's reason, until one connects", async () => {
  const made: Array<ReturnType<typeof handle>> = [];
  const shared = new SharedUpstream(
    "up",
    {} as never,
    () => {
      const h = handle();
      made.push(h);
      return h as never;
    },
    30_000,
    silentLogger,
  );
  const pool = poolOf(() => shared.attach({ handlers: {} as never }));
  const first = pool.connection("up");
  await waitFor(() => made[0], "the first connection");
  made[0]!.settle("exited with code 3");
  await assert.rejects(first);
  assert.equal(pool.lastError("up"), "exited with code 3");
  const second = pool.connection("up");
  await waitFor(() => made[1], "the second connection");
  assert.equal(pool.get("up")?.status, "connecting", "the shared connection made a new one");
  assert.equal(pool.lastError("up"), "exited with code 3", "still says why");
  made[1]!.settle();
  await second;
  assert.equal(pool.lastError("up"), undefined, "connected: no error");
  await pool.close();
  await shared.close();
});
