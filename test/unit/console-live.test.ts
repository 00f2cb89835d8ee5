/**
 * ConsoleLive (src/console/live.ts) on a ManualClock, with a real
 * SessionManager and a real HTTP stream: pages hear one coalesced `change`
 * per burst, the client's exactly-once events are not consumed by the
 * console, reconnection reports are remembered, keep-alives run only while a
 * stream is open, and close() ends the streams and leaves no timer behind.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { parseConfig } from "../../src/config/load.js";
import { CHANGE_DELAY_MS, ConsoleLive } from "../../src/console/live.js";
import { silentLogger } from "../../src/logging.js";
import { SessionManager } from "../../src/session/session-manager.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

const KEEP_ALIVE = 15_000;

async function setup() {
  const clock = new ManualClock();
  const settings = parseConfig({}).gateway;
  let ids = 0;
  const sessions = new SessionManager({
    registry: new ServerRegistry(),
    settings,
    clock,
    newId: () => `id${String(++ids).padStart(4, "0")}`,
    logger: silentLogger,
    upstreams: () => {
      throw new Error("no upstream is configured: nothing may connect");
    },
    store: createMemoryStore(clock),
  });
  const live = new ConsoleLive({ sessions, clock, keepAliveMs: KEEP_ALIVE });
  live.start();
  const server = http.createServer((req, res) => live.serve(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return { clock, sessions, live, server, url };
}

/** Reads an SSE stream frame by frame. */
async function openStream(url: string) {
  const res = await fetch(url);
  assert.equal(res.headers.get("content-type"), "text/event-stream");
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  return {
    async next(): Promise<string | undefined> {
      for (;;) {
        const end = buffer.indexOf("\n\n");
        if (end >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          return frame;
        }
        const { value, done } = await reader.read();
        if (done) return undefined;
        buffer += decoder.decode(value, { stream: true });
      }
    },
  };
}

/** Polls `check` (real I/O: bounded generously for a loaded machine). */
async function waitFor(what: string, check: () => boolean): Promise<void> {
  for (const end = Date.now() + 30_000; !check() && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
  assert.ok(check(), what);
}

test("a burst of changes reaches an open page as one change; the client's events stay undelivered for the client", async () => {
  const { clock, sessions, live, server, url } = await setup();
  try {
    const stream = await openStream(url);
    assert.match((await stream.next())!, /^retry: 2000\nevent: hello\ndata: \{"version":0\}$/);
    await waitFor("the stream is registered", () => live.streamCount === 1);

    const session = sessions.create({ connect: false });
    session.events.add("task_created", "srv", { taskId: "t1" });
    session.events.add("task_completed", "srv", { taskId: "t1" });
    assert.equal(clock.pendingTimers > 0, true, "a change is scheduled");
    clock.advance(CHANGE_DELAY_MS);
    assert.equal(await stream.next(), 'event: change\ndata: {"version":3}', "one message for the three changes (session started, two events)");

    await flush();
    const delivered = await session.events.takeNew();
    assert.deepEqual(
      delivered.map((e) => e.type),
      ["task_created", "task_completed"],
      "the console took nothing: the client still gets every event, once",
    );
    await sessions.close();
  } finally {
    live.close();
    server.close();
  }
});

test("reconnection reports are remembered by server; keep-alives only while a stream is open; close() ends streams and clears every timer", async () => {
  const { clock, sessions, live, server, url } = await setup();
  try {
    const session = sessions.create({ connect: false });
    session.events.add("server_disconnected", "everything", { reason: "gone" });
    session.events.add("server_reconnected", "everything", { attempts: 3 });
    assert.deepEqual(live.reconnects.get("everything"), { attempts: 3, drops: 1, at: clock.now() });
    assert.equal(clock.pendingTimers, 0, "no page open: nothing scheduled");

    const stream = await openStream(url);
    await stream.next();
    await waitFor("the stream is registered", () => live.streamCount === 1);
    clock.advance(KEEP_ALIVE);
    assert.equal(await stream.next(), ": keepalive");

    live.close();
    assert.equal(await stream.next(), undefined, "the stream ended");
    assert.equal(clock.pendingTimers, 0, "no timer left behind");
    session.events.add("task_created", "srv", { taskId: "t2" });
    assert.equal(clock.pendingTimers, 0, "a closed console hears nothing more");
    await sessions.close();
  } finally {
    live.close();
    server.close();
  }
});
