/**
 * A session resumed from its stored record (SessionManager.resume, after a
 * gateway restart) re-attaches its working tasks once: one read of them from
 * the store, one TTL timer each. On a ManualClock over a memory store; no
 * upstream is configured, so no transport is ever made.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseConfig } from "../../src/config/load.js";
import { silentLogger } from "../../src/logging.js";
import { SessionManager } from "../../src/session/session-manager.js";
import type { TaskQuery, TaskStore } from "../../src/store/contracts.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

const TTL = 60_000;

/** The store's own task store, with every listBySession query recorded. */
function recordingReads(inner: TaskStore): { tasks: TaskStore; reads: TaskQuery[] } {
  const reads: TaskQuery[] = [];
  const tasks = new Proxy(inner, {
    get(target, prop) {
      if (prop === "listBySession") {
        return (sessionId: string, query?: TaskQuery) => {
          reads.push(query ?? {});
          return target.listBySession(sessionId, query);
        };
      }
      const value: unknown = Reflect.get(target, prop);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { tasks, reads };
}

test("a resumed session's working tasks are restored once (one store read, one TTL timer each)", async () => {
  const clock = new ManualClock();
  const memory = createMemoryStore(clock);
  const { tasks, reads } = recordingReads(memory.tasks);
  const store = { ...memory, tasks };
  const now = clock.now();
  await store.sessions.put({
    sessionId: "s-old",
    face: { kind: "meta" },
    protocolVersion: "2025-11-25",
    clientCapabilities: {},
    subscriptions: {},
    upstreamSessionIds: {},
    createdAt: now,
    lastActivityAt: now,
  });
  // An upstream task the restart left working.
  await store.tasks.create({
    taskId: "task-1",
    sessionId: "s-old",
    server: "remote",
    toolName: "slow",
    toolArgs: {},
    upstreamTaskId: "up-1",
    status: "working",
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs: TTL,
    expiresAt: now + TTL,
  });
  const manager = new SessionManager({
    registry: new ServerRegistry(),
    settings: parseConfig({}).gateway,
    clock,
    newId: () => "unused",
    logger: silentLogger,
    upstreams: () => {
      throw new Error("no upstream is configured: nothing may connect");
    },
    store,
  });
  manager.start();
  try {
    const resumed = await manager.resume("s-old", { kind: "meta" });
    assert.ok(resumed, "the stored session resumes");
    await flush();
    const restoreReads = reads.filter((q) => q.status?.length === 1 && q.status[0] === "working");
    assert.equal(restoreReads.length, 1, `the working tasks are read once, not ${restoreReads.length} times`);
    assert.equal(resumed.session.tasks.timerCount, 1, "the restored task has its TTL timer back");
    // The restored TTL runs from the stored expiry.
    clock.advance(TTL);
    await flush();
    assert.equal((await store.tasks.get("task-1"))?.status, "expired");
  } finally {
    await manager.close();
  }
  assert.equal(clock.pendingTimers, 0, "no timer left behind");
});
