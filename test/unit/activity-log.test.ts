/**
 * ActivityLog (src/session/activity-log.ts): records are queued and written
 * in one batch per flushMs; a full queue drops and counts; a store that
 * refuses the write is logged and counted, and record() never throws nor
 * waits. Real memory stores on a manual clock; the log lines are read from a
 * real pino logger writing to a buffer.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { ulidGenerator } from "../../src/clock.js";
import { parseConfig } from "../../src/config/load.js";
import { createLogger } from "../../src/logging.js";
import { ActivityLog } from "../../src/session/activity-log.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";

function logged(): { logger: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return {
    logger: createLogger("info", sink),
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const settings = (patch: Record<string, unknown>) => parseConfig({ mcpServers: {}, gateway: { activity: patch } }).gateway.activity;

test("records wait for flushMs and are written in one batch; beyond maxQueued they are dropped and counted", async () => {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const { logger, lines } = logged();
  const log = new ActivityLog(settings({ flushMs: 100, maxQueued: 3 }), { clock, newId: ulidGenerator(clock), logger, store: () => store });
  for (let i = 0; i < 5; i++) log.record({ kind: "tool_call", server: "s", tool: `t${i}`, outcome: "ok" });
  assert.equal(await store.activity.count(), 0, "nothing written before flushMs");
  assert.equal(log.dropped, 2);
  assert.ok(lines().some((l) => l.msg === "activity_dropped"));
  let written = 0;
  log.onWritten(() => written++);
  clock.advance(100);
  await log.flush(); // waits for the write the timer started
  assert.equal(await store.activity.count(), 3);
  assert.deepEqual((await store.activity.list({ limit: 10 })).map((r) => r.tool).sort(), ["t0", "t1", "t2"]);
  assert.equal(written, 1, "listeners hear each written batch");
  await log.close();
  log.record({ kind: "tool_call", server: "s", tool: "late" });
  assert.equal(await store.activity.count(), 3, "nothing is recorded after close");
  await store.close();
});

test("a store that refuses the write: logged and counted, record() neither throws nor waits, later batches go on", async () => {
  const clock = new ManualClock();
  const broken = createMemoryStore(clock);
  await broken.close(); // every call now fails with EMCP_CLOSED, as a store that went away does
  const good = createMemoryStore(clock);
  let current = broken;
  const { logger, lines } = logged();
  const log = new ActivityLog(settings({ flushMs: 10 }), { clock, newId: ulidGenerator(clock), logger, store: () => current });
  assert.doesNotThrow(() => log.record({ kind: "tool_call", server: "s", tool: "a", outcome: "ok" }));
  clock.advance(10);
  await log.flush();
  assert.equal(log.failed, 1);
  const failed = lines().find((l) => l.msg === "activity_write_failed");
  assert.ok(failed, "the failed write is logged");
  assert.equal(failed.records, 1);
  current = good;
  log.record({ kind: "config_reload", outcome: "ok" });
  await log.close();
  assert.equal(await good.activity.count(), 1, "the next batch is written");
  await good.close();
});

test("reloads(): each reload's outcome is recorded, and a failing reload still throws to its caller", async () => {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const log = new ActivityLog(settings({}), { clock, newId: ulidGenerator(clock), logger: logged().logger, store: () => store });
  const ok = log.reloads(async () => ({ added: ["a"], removed: [], updated: ["b"] }));
  const bad = log.reloads(async (): Promise<{ added: string[]; removed: string[]; updated: string[] }> => {
    throw new Error("config file unreadable");
  });
  await ok(undefined);
  await assert.rejects(bad(undefined), /unreadable/);
  await log.close();
  const records = await store.activity.list({ kind: "config_reload", limit: 10 });
  assert.deepEqual(records.map((r) => [r.outcome, r.summary]).reverse(), [
    ["ok", "added a; updated b"],
    ["failed", "config file unreadable"],
  ]);
  await store.close();
});
