import { test, describe } from "node:test";
import assert from "node:assert/strict";
import type { IdGenerator } from "../../src/clock.js";
import { BufferManager } from "../../src/session/buffers.js";
import { EventSystem } from "../../src/session/event-system.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { settle } from "../helpers/promises.js";

function counterIds(prefix: string): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

function setup(maxNotificationsPerServer = 3, maxLogsPerServer = 4) {
  const clock = new ManualClock();
  const events = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, createMemoryStore(clock).events, clock, counterIds("ev"));
  const buffers = new BufferManager({ maxNotificationsPerServer, maxLogsPerServer }, events, clock);
  return { clock, events, buffers };
}

describe("BufferManager: notifications", () => {
  test("stores notifications with timestamp, method and params", () => {
    const { clock, buffers } = setup();
    clock.advance(7);
    buffers.addNotification("a", "notifications/resources/updated", { uri: "file:///x" });
    buffers.addNotification("a", "notifications/tools/list_changed", undefined);
    const got = buffers.takeNotifications("a");
    assert.deepEqual(got, [
      { server: "a", timestamp: clock.now(), method: "notifications/resources/updated", params: { uri: "file:///x" } },
      { server: "a", timestamp: clock.now(), method: "notifications/tools/list_changed" },
    ]);
    assert.equal("params" in got[1]!, false, "no params key when there were none");
  });

  test("ring buffer keeps only the newest maxNotificationsPerServer per server", () => {
    const { buffers } = setup(3);
    for (let i = 0; i < 5; i++) buffers.addNotification("a", `m${i}`, undefined);
    buffers.addNotification("b", "only-b", undefined);
    assert.deepEqual(
      buffers.takeNotifications("a").map((n) => n.method),
      ["m2", "m3", "m4"],
    );
    assert.deepEqual(
      buffers.takeNotifications("b").map((n) => n.method),
      ["only-b"],
      "another server's buffer is bounded independently",
    );
  });

  test("take clears; a per-server take leaves other servers alone", () => {
    const { buffers } = setup();
    buffers.addNotification("a", "a1", undefined);
    buffers.addNotification("b", "b1", undefined);
    assert.deepEqual(
      buffers.takeNotifications("a").map((n) => n.method),
      ["a1"],
    );
    assert.deepEqual(buffers.takeNotifications("a"), []);
    assert.deepEqual(
      buffers.takeNotifications().map((n) => n.method),
      ["b1"],
    );
    assert.deepEqual(buffers.takeNotifications(), []);
    assert.deepEqual(buffers.takeNotifications("never-seen"), []);
  });

  test("take of all servers merges them in time order", () => {
    const { clock, buffers } = setup();
    buffers.addNotification("b", "first", undefined);
    clock.advance(1);
    buffers.addNotification("a", "second", undefined);
    clock.advance(1);
    buffers.addNotification("b", "third", undefined);
    assert.deepEqual(
      buffers.takeNotifications().map((n) => `${n.server}:${n.method}`),
      ["b:first", "a:second", "b:third"],
    );
  });

  test("each notification emits a `notification` event that wakes waiters", async () => {
    const { clock, events, buffers } = setup();
    const wait = events.waitForNext(1000);
    buffers.addNotification("a", "notifications/message", { x: 1 });
    const woke = await settle(wait);
    assert.equal(woke?.type, "notification");
    assert.equal(woke?.server, "a");
    assert.deepEqual(woke?.data, { method: "notifications/message", params: { x: 1 } });
    assert.equal(clock.pendingTimers, 0);
    buffers.addNotification("a", "bare", undefined);
    const evs = await events.takeNew();
    assert.equal(evs.length, 2);
    assert.deepEqual(evs[1]?.data, { method: "bare" });
  });

  test("ring overflow still emits one event per notification", async () => {
    const { events, buffers } = setup(2);
    for (let i = 0; i < 5; i++) buffers.addNotification("a", `m${i}`, undefined);
    assert.equal((await events.takeNew()).length, 5);
  });
});

describe("BufferManager: logs", () => {
  test("stores logs with level, logger and data; ring-bounded per server", () => {
    const { clock, buffers } = setup(3, 4);
    clock.advance(5);
    for (let i = 0; i < 6; i++) buffers.addLog("a", "info", { i });
    buffers.addLog("b", "error", "bad", "db");
    const a = buffers.takeLogs("a");
    assert.deepEqual(
      a.map((l) => (l.data as { i: number }).i),
      [2, 3, 4, 5],
    );
    assert.equal(a[0]?.timestamp, clock.now());
    assert.equal(a[0]?.level, "info");
    assert.equal("logger" in a[0], false);
    assert.deepEqual(buffers.takeLogs("b"), [{ server: "b", timestamp: clock.now(), level: "error", data: "bad", logger: "db" }]);
  });

  test("takeLogs clears; per-server filter; all servers in time order", () => {
    const { clock, buffers } = setup();
    buffers.addLog("a", "info", "a1");
    clock.advance(1);
    buffers.addLog("b", "info", "b1");
    clock.advance(1);
    buffers.addLog("a", "warn", "a2");
    assert.deepEqual(
      buffers.takeLogs("b").map((l) => l.data),
      ["b1"],
    );
    assert.deepEqual(buffers.takeLogs("b"), []);
    assert.deepEqual(
      buffers.takeLogs().map((l) => l.data),
      ["a1", "a2"],
    );
    assert.deepEqual(buffers.takeLogs(), []);
  });

  test("logs emit no events and never wake waiters", async () => {
    const { clock, events, buffers } = setup();
    let woke = false;
    const wait = events.waitForNext(1000).then((e) => {
      woke = e !== null;
      return e;
    });
    buffers.addLog("a", "error", "something");
    for (let i = 0; i < 10; i++) await Promise.resolve();
    assert.equal(woke, false);
    assert.equal(events.waiterCount, 1);
    assert.equal(await events.hasNew(), false);
    assert.equal((await events.stats()).count, 0);
    clock.advance(1000);
    assert.equal(await settle(wait), null);
    assert.equal(clock.pendingTimers, 0);
  });

  test("notifications and logs are separate buffers", () => {
    const { buffers } = setup();
    buffers.addNotification("a", "n", undefined);
    buffers.addLog("a", "info", "l");
    assert.deepEqual(
      buffers.takeLogs("a").map((l) => l.data),
      ["l"],
    );
    assert.deepEqual(
      buffers.takeNotifications("a").map((n) => n.method),
      ["n"],
    );
  });
});

describe("BufferManager: clearServer", () => {
  test("drops one server's notifications and logs only", () => {
    const { buffers } = setup();
    buffers.addNotification("a", "na", undefined);
    buffers.addLog("a", "info", "la");
    buffers.addNotification("b", "nb", undefined);
    buffers.addLog("b", "info", "lb");
    buffers.clearServer("a");
    assert.deepEqual(buffers.takeNotifications("a"), []);
    assert.deepEqual(buffers.takeLogs("a"), []);
    assert.deepEqual(
      buffers.takeNotifications().map((n) => n.method),
      ["nb"],
    );
    assert.deepEqual(
      buffers.takeLogs().map((l) => l.data),
      ["lb"],
    );
  });
});
