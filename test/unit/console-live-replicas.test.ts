/**
 * ConsoleLive across replicas (src/console/live.ts, docs/adr/0012 point 10)
 * on a ManualClock with a real SessionManager and a real SSE stream: the
 * other replicas' change counters are read only while a page is open, a
 * difference reaches the page as a change, the counter this replica serves
 * to the others counts only its own changes (no echo between replicas), one
 * reading runs at a time, and close() leaves no timer behind. The other
 * replicas are a function of fingerprints here; the real channel is tested
 * in test/integration/console-replicas.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { parseConfig } from "../../src/config/load.js";
import { CHANGE_DELAY_MS, ConsoleLive, REMOTE_POLL_MS } from "../../src/console/live.js";
import { silentLogger } from "../../src/logging.js";
import { SessionManager } from "../../src/session/session-manager.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

async function setup(remoteVersions: () => Promise<string>) {
  const clock = new ManualClock();
  const sessions = new SessionManager({
    registry: new ServerRegistry(),
    settings: parseConfig({}).gateway,
    clock,
    newId: (() => {
      let n = 0;
      return () => `id${++n}`;
    })(),
    logger: silentLogger,
    upstreams: () => {
      throw new Error("no upstream is configured: nothing may connect");
    },
    store: createMemoryStore(clock),
  });
  const live = new ConsoleLive({ sessions, clock, keepAliveMs: 0, remoteVersions });
  live.start();
  const server = http.createServer((req, res) => live.serve(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const frames: string[] = [];
  let buffer = "";
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        frames.push(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  })();
  for (const end = Date.now() + 30_000; live.streamCount === 0 && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
  assert.equal(live.streamCount, 1, "the page's stream is open");
  const changes = () => frames.filter((f) => f.startsWith("event: change")).length;
  /** Lets the stream's bytes arrive (real I/O; the clock is manual). */
  const settle = async () => {
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 5));
    await flush();
  };
  /** Waits until `n` change frames arrived (real I/O, slow on a loaded machine); the test then asserts the exact count. */
  const untilChanges = async (n: number) => {
    for (const end = Date.now() + 30_000; changes() < n && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
  };
  return { clock, sessions, live, server, changes, settle, untilChanges };
}

test("other replicas' changes reach an open page; the counter served to them counts only this replica's own changes", async () => {
  const readings = ["a1", "a1", "a2"];
  let reads = 0;
  const { clock, sessions, live, server, changes, settle, untilChanges } = await setup(() =>
    Promise.resolve(readings[Math.min(reads++, readings.length - 1)]!),
  );
  try {
    assert.equal(reads, 0, "nothing read before the first period");
    clock.advance(REMOTE_POLL_MS);
    await settle();
    assert.equal(reads, 1);
    clock.advance(CHANGE_DELAY_MS);
    await settle();
    await untilChanges(1);
    assert.equal(changes(), 1, "the first reading is a change (nothing between the render and it is missed)");

    clock.advance(REMOTE_POLL_MS);
    await settle();
    clock.advance(CHANGE_DELAY_MS);
    await settle();
    assert.equal(reads, 2);
    assert.equal(changes(), 1, "the same counters: no change");

    clock.advance(REMOTE_POLL_MS);
    await settle();
    clock.advance(CHANGE_DELAY_MS);
    await settle();
    assert.equal(reads, 3);
    await untilChanges(2);
    assert.equal(changes(), 2, "another replica changed: one change");
    assert.equal(live.localVersion, 0, "remote changes are not served as this replica's own (no echo)");

    sessions.create({ connect: false });
    assert.equal(live.localVersion, 1, "a session here is this replica's own change");
    await sessions.close();
  } finally {
    live.close();
    server.close();
  }
  assert.equal(clock.pendingTimers, 0, "close() leaves no timer");
});

test("one reading at a time; a reading that ends after close() schedules nothing", async () => {
  let release!: (v: string) => void;
  let reads = 0;
  const { clock, live, server, settle } = await setup(() => {
    reads++;
    return new Promise<string>((resolve) => (release = resolve));
  });
  try {
    clock.advance(REMOTE_POLL_MS);
    await settle();
    assert.equal(reads, 1);
    assert.equal(clock.pendingTimers, 0, "no next reading is scheduled while one runs");
    clock.advance(REMOTE_POLL_MS * 3);
    assert.equal(reads, 1);
    live.close();
    release("late");
    await settle();
    assert.equal(clock.pendingTimers, 0, "nothing scheduled after close()");
  } finally {
    live.close();
    server.close();
  }
});
