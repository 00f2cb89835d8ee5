import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import type { IdGenerator } from "../../src/clock.js";
import { EventLedger, EventSystem, type StoredEvent } from "../../src/session/event-system.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, settle, track } from "../helpers/promises.js";

/** Lexicographically sortable ids, like ULIDs. */
function counterIds(prefix = "ev"): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

function setup(maxEvents = 1000, warningThreshold = 0.8) {
  const clock = new ManualClock();
  const events = new EventSystem({ maxEvents, warningThreshold }, clock, counterIds());
  return { clock, events };
}

describe("EventSystem: delivery", () => {
  test("add stores an event with id, type, server, createdAt and data", () => {
    const { clock, events } = setup();
    clock.advance(1234);
    const e = events.add("task_created", "srv", { taskId: "t1" });
    assert.equal(e.type, "task_created");
    assert.equal(e.server, "srv");
    assert.equal(e.createdAt, clock.now());
    assert.deepEqual(e.data, { taskId: "t1" });
    assert.equal(e.id, "ev-000001");
    assert.equal(events.size, 1);
    assert.equal(events.lastEventId, e.id);
    const bare = events.add("server_added", "srv");
    assert.deepEqual(bare.data, {});
  });

  test("takeNew delivers each event exactly once, in order", () => {
    const { events } = setup();
    assert.deepEqual(events.takeNew(), []);
    const a = events.add("notification", "s1", { n: 1 });
    const b = events.add("notification", "s2", { n: 2 });
    assert.deepEqual(
      events.takeNew().map((e) => e.id),
      [a.id, b.id],
    );
    assert.deepEqual(events.takeNew(), [], "second take returns nothing");
    const c = events.add("task_failed", "s1");
    assert.deepEqual(
      events.takeNew().map((e) => e.id),
      [c.id],
      "only the event added after the last take",
    );
    assert.deepEqual(events.takeNew(), []);
    assert.equal(events.size, 3, "delivered events stay stored (for after())");
  });

  test("hasNew reflects undelivered events", () => {
    const { events } = setup();
    assert.equal(events.hasNew(), false);
    events.add("notification", "s");
    assert.equal(events.hasNew(), true);
    assert.equal(events.hasNew(), true, "hasNew does not consume");
    events.takeNew();
    assert.equal(events.hasNew(), false);
    events.add("notification", "s");
    assert.equal(events.hasNew(), true);
  });

  test("after(cursor) returns later events without marking delivery", () => {
    const { events } = setup();
    const a = events.add("notification", "s", { i: 0 });
    const b = events.add("notification", "s", { i: 1 });
    const c = events.add("notification", "s", { i: 2 });
    assert.deepEqual(
      events.after(undefined).map((e) => e.id),
      [a.id, b.id, c.id],
    );
    assert.deepEqual(
      events.after(a.id).map((e) => e.id),
      [b.id, c.id],
    );
    assert.deepEqual(events.after(c.id), []);
    // The returned array is a copy.
    events.after(undefined).pop();
    assert.equal(events.size, 3);
    assert.equal(events.hasNew(), true, "after() must not mark events delivered");
    assert.equal(events.takeNew().length, 3);
  });
});

describe("EventSystem: waitForNext", () => {
  test("resolves with the next added event and removes its waiter and timer", async () => {
    const { clock, events } = setup();
    const p = events.waitForNext(5000);
    assert.equal(events.waiterCount, 1);
    assert.equal(clock.pendingTimers, 1);
    const state = track(p);
    await flush();
    assert.equal(state.settled, false, "must wait for an event");
    const e = events.add("notification", "s", { method: "x" });
    const got = await settle(p);
    assert.equal(got, e);
    assert.equal(events.waiterCount, 0);
    assert.equal(clock.pendingTimers, 0);
    // Waking does not deliver: the event is still new.
    assert.equal(events.hasNew(), true);
    assert.deepEqual(
      events.takeNew().map((x) => x.id),
      [e.id],
    );
  });

  test("waits only for events added after the call (existing undelivered ones do not count)", async () => {
    const { clock, events } = setup();
    events.add("notification", "s");
    const state = track(events.waitForNext(100));
    await flush();
    assert.equal(state.settled, false);
    clock.advance(100);
    await flush();
    assert.equal(state.settled, true);
    assert.equal(state.value, null);
  });

  test("resolves null on timeout, not before; waiter and timer removed", async () => {
    const { clock, events } = setup();
    const state = track(events.waitForNext(1000));
    clock.advance(999);
    await flush();
    assert.equal(state.settled, false);
    clock.advance(1);
    await flush();
    assert.equal(state.settled, true);
    assert.equal(state.value, null);
    assert.equal(events.waiterCount, 0);
    assert.equal(clock.pendingTimers, 0);
    // A later event does not reach the finished waiter (and does not throw).
    events.add("notification", "s");
    assert.equal(events.waiterCount, 0);
  });

  test("resolves null on abort; waiter, timer and abort listener removed", async () => {
    const { clock, events } = setup();
    const ctrl = new AbortController();
    const p = events.waitForNext(1000, ctrl.signal);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 1);
    ctrl.abort();
    assert.equal(await settle(p), null);
    assert.equal(events.waiterCount, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
  });

  test("abort listener is removed when an event or the timeout ends the wait", async () => {
    const { clock, events } = setup();
    const c1 = new AbortController();
    const p1 = events.waitForNext(1000, c1.signal);
    events.add("notification", "s");
    assert.notEqual(await settle(p1), null);
    assert.equal(getEventListeners(c1.signal, "abort").length, 0);

    const c2 = new AbortController();
    const p2 = events.waitForNext(1000, c2.signal);
    clock.advance(1000);
    assert.equal(await settle(p2), null);
    assert.equal(getEventListeners(c2.signal, "abort").length, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(events.waiterCount, 0);
  });

  test("an already-aborted signal resolves null at once without a timer or waiter", async () => {
    const { clock, events } = setup();
    const ctrl = new AbortController();
    ctrl.abort();
    assert.equal(await settle(events.waitForNext(1000, ctrl.signal)), null);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(events.waiterCount, 0);
  });

  test("all concurrent waiters wake on one event", async () => {
    const { clock, events } = setup();
    const ps = [events.waitForNext(1000), events.waitForNext(2000), events.waitForNext(3000)];
    assert.equal(events.waiterCount, 3);
    assert.equal(clock.pendingTimers, 3);
    const e = events.add("task_completed", "s");
    const got = await settle(Promise.all(ps));
    assert.deepEqual(got, [e, e, e]);
    assert.equal(events.waiterCount, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test("one waiter timing out does not disturb the others", async () => {
    const { clock, events } = setup();
    const short = events.waitForNext(100);
    const long = track(events.waitForNext(1000));
    clock.advance(100);
    assert.equal(await settle(short), null);
    await flush();
    assert.equal(long.settled, false);
    assert.equal(events.waiterCount, 1);
    assert.equal(clock.pendingTimers, 1);
    const e = events.add("notification", "s");
    await flush();
    assert.equal(long.value, e);
    assert.equal(clock.pendingTimers, 0);
  });

  test("regression: close() wakes every waiter with null and clears their timers", async () => {
    // Documented: "Wakes every waiter with nothing (session closing)" and
    // "Every path removes the waiter and clears the timer".
    const { clock, events } = setup();
    const ctrl = new AbortController();
    const a = track(events.waitForNext(60_000));
    const b = track(events.waitForNext(60_000, ctrl.signal));
    events.close();
    await flush();
    assert.equal(events.waiterCount, 0);
    assert.equal(a.settled, true, "waiter must be woken by close()");
    assert.equal(a.value, null);
    assert.equal(b.settled, true, "waiter must be woken by close()");
    assert.equal(b.value, null);
    assert.equal(clock.pendingTimers, 0, "close() must clear the waiters' timers");
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
  });

  test("close() drops stored events", () => {
    const { events } = setup();
    events.add("notification", "s");
    events.close();
    assert.equal(events.size, 0);
    assert.equal(events.hasNew(), false);
    assert.deepEqual(events.takeNew(), []);
  });
});

describe("EventSystem: eviction", () => {
  function fill(events: EventSystem, n: number, from = 0): StoredEvent[] {
    const out: StoredEvent[] = [];
    for (let i = 0; i < n; i++) out.push(events.add("notification", "s", { i: from + i }));
    return out;
  }

  test("holds up to maxEvents; the next add evicts the oldest 10%", () => {
    const { events } = setup(20);
    const first = fill(events, 20);
    assert.equal(events.size, 20);
    fill(events, 1, 20);
    assert.equal(events.size, 19, "20 - ceil(20 * 10%) + 1");
    const ids = events.after(undefined).map((e) => e.id);
    assert.ok(!ids.includes(first[0]!.id));
    assert.ok(!ids.includes(first[1]!.id));
    assert.equal(ids[0], first[2]!.id, "the oldest survivor is the third event");
  });

  test("evicting undelivered events yields one events_evicted event with their count", () => {
    const { events } = setup(20);
    fill(events, 21); // evicts events 0 and 1 before either was delivered
    assert.equal(events.hasNew(), true);
    const taken = events.takeNew();
    assert.equal(taken.length, 1 + 19);
    const evicted = taken[0]!;
    assert.equal(evicted.type, "events_evicted");
    assert.equal(evicted.server, "emceepee");
    assert.equal(evicted.data["count"], 2);
    assert.match(String(evicted.data["message"]), /2 undelivered event\(s\) were dropped/);
    assert.match(String(evicted.data["message"]), /maxEvents 20/);
    assert.deepEqual(
      taken.slice(1).map((e) => e.data["i"]),
      Array.from({ length: 19 }, (_, k) => k + 2),
    );
    // Reported once only.
    assert.equal(events.hasNew(), false);
    assert.deepEqual(events.takeNew(), []);
  });

  test("evicting only delivered events reports nothing", () => {
    const { events } = setup(20);
    fill(events, 20);
    events.takeNew();
    fill(events, 1, 20);
    const taken = events.takeNew();
    assert.deepEqual(
      taken.map((e) => e.type),
      ["notification"],
    );
    assert.equal(taken[0]!.data["i"], 20);
  });

  test("counts only the undelivered part of a mixed eviction, and accumulates", () => {
    const { events } = setup(50); // evicts 5 at a time
    fill(events, 3);
    events.takeNew(); // 3 delivered
    fill(events, 47, 3); // 50 stored, 47 undelivered
    fill(events, 1, 50); // evicts 0..4: 3 delivered + 2 undelivered
    assert.equal(events.size, 46);
    // Fill up again without taking: another eviction of 5 undelivered.
    fill(events, 4, 51); // 50 stored
    fill(events, 1, 55); // evicts 5..9, all undelivered
    const taken = events.takeNew();
    assert.equal(taken[0]!.type, "events_evicted");
    assert.equal(taken[0]!.data["count"], 2 + 5);
    assert.equal(taken.length, 1 + 46);
    assert.equal(taken[1]!.data["i"], 10, "first surviving undelivered event");
    assert.equal(taken.at(-1)!.data["i"], 55);
  });

  test("smallest store evicts at least one event", () => {
    const { events } = setup(10);
    fill(events, 11);
    assert.equal(events.size, 10);
    const taken = events.takeNew();
    assert.equal(taken[0]!.type, "events_evicted");
    assert.equal(taken[0]!.data["count"], 1);
  });

  test("an eviction still wakes waiters with the new event", async () => {
    const { clock, events } = setup(10);
    fill(events, 10);
    const p = events.waitForNext(1000);
    const e = events.add("task_completed", "s");
    assert.equal(await settle(p), e);
    assert.equal(clock.pendingTimers, 0);
  });
});

describe("EventSystem: cursor reads (await_activity sinceEventId)", () => {
  test("takeAfter returns the events after the cursor, delivered or not, and then counts everything as delivered", () => {
    const { events } = setup();
    const a = events.add("notification", "s", { i: 0 });
    const b = events.add("notification", "s", { i: 1 });
    assert.deepEqual(
      events.takeNew().map((e) => e.id),
      [a.id, b.id],
    );
    const c = events.add("notification", "s", { i: 2 });
    assert.equal(events.hasAfter(a.id), true);
    const read = events.takeAfter(a.id);
    assert.equal(read.found, true);
    assert.deepEqual(
      read.events.map((e) => e.id),
      [b.id, c.id],
      "b is re-delivered because the client asked from a",
    );
    assert.equal(events.hasNew(), false, "c was delivered by the cursor read");
    assert.deepEqual(events.takeNew(), []);
    assert.equal(events.hasAfter(c.id), false, "nothing after the newest event");
    assert.deepEqual(events.takeAfter(c.id), { events: [], found: true });
  });

  test("a cursor not in the store (evicted, or another session's) reads everything stored, found: false", () => {
    const { events } = setup();
    const a = events.add("notification", "s");
    const b = events.add("notification", "s");
    assert.equal(events.hasAfter("ev-999999"), true);
    const read = events.takeAfter("not-an-id-of-this-session");
    assert.equal(read.found, false);
    assert.deepEqual(
      read.events.map((e) => e.id),
      [a.id, b.id],
    );
    assert.equal(events.hasNew(), false);
  });

  test("an empty store has nothing after any cursor", () => {
    const { events } = setup();
    assert.equal(events.hasAfter("x"), false);
    assert.deepEqual(events.takeAfter("x"), { events: [], found: false });
  });

  test("undelivered events up to the cursor count as delivered (the client says it has them)", () => {
    const { events } = setup();
    events.add("notification", "s", { i: 0 });
    const b = events.add("notification", "s", { i: 1 });
    const c = events.add("notification", "s", { i: 2 });
    assert.deepEqual(
      events.takeAfter(b.id).events.map((e) => e.id),
      [c.id],
    );
    assert.deepEqual(events.takeNew(), [], "event 0 is not delivered later");
  });

  test("a cursor read carries a pending events_evicted notice first, once", () => {
    const { events } = setup(10);
    const first = events.add("notification", "s", { i: 0 });
    for (let i = 1; i <= 10; i++) events.add("notification", "s", { i });
    const read = events.takeAfter(first.id);
    assert.equal(read.found, false, "the cursor itself was evicted");
    assert.equal(read.events[0]!.type, "events_evicted");
    assert.equal(read.events[0]!.data["count"], 1);
    assert.equal(read.events.length, 1 + 10);
    assert.equal(events.hasNew(), false);
  });
});

describe("EventLedger: the gateway-wide bound (events.maxTotal)", () => {
  /** Sessions sharing one ledger and one id sequence, as the SessionManager wires them. */
  function shared(maxTotal: number, n: number, maxEvents = 1000) {
    const clock = new ManualClock();
    const ledger = new EventLedger({ maxTotal, warningThreshold: 0.8 });
    const ids = counterIds();
    const sessions = Array.from({ length: n }, () => new EventSystem({ maxEvents, warningThreshold: 0.8 }, clock, ids, undefined, ledger));
    return { clock, ledger, sessions };
  }

  test("counts events across sessions; beyond maxTotal the oldest 10% gateway-wide go, whichever sessions hold them", () => {
    const { clock, ledger, sessions } = shared(20, 2);
    const [a, b] = sessions as [EventSystem, EventSystem];
    const added: StoredEvent[] = [];
    for (let i = 0; i < 10; i++) added.push(a.add("notification", "s", { i }), b.add("notification", "s", { i }));
    assert.equal(ledger.total, 20);
    const next = a.add("notification", "s", { i: 10 });
    assert.equal(ledger.total, 19, "20 - ceil(20 * 10%) + 1");
    assert.equal(a.size, 10);
    assert.equal(b.size, 9);
    assert.ok(!a.after(undefined).some((e) => e.id === added[0]!.id), "A's oldest went");
    assert.ok(!b.after(undefined).some((e) => e.id === added[1]!.id), "B's oldest went");
    // Each session is told once, about its own loss, naming the gateway-wide limit.
    for (const s of [a, b]) {
      const taken = s.takeNew();
      assert.equal(taken[0]!.type, "events_evicted");
      assert.equal(taken[0]!.data["count"], 1);
      assert.equal(taken[0]!.data["byGatewayLimit"], 1);
      assert.equal(taken[0]!.data["bySessionLimit"], 0);
      assert.match(String(taken[0]!.data["message"]), /gateway\.events\.maxTotal 20 across all sessions/);
      assert.doesNotMatch(String(taken[0]!.data["message"]), /maxEvents/);
      assert.equal(s.hasNew(), false);
    }
    assert.equal(a.lastEventId, next.id);
    assert.equal(clock.pendingTimers, 0, "the ledger keeps no timers");
  });

  test("evicts only the oldest: a session whose events are all newer keeps them and gets no notice", () => {
    const { ledger, sessions } = shared(20, 2);
    const [a, b] = sessions as [EventSystem, EventSystem];
    for (let i = 0; i < 15; i++) a.add("notification", "s", { i });
    for (let i = 0; i < 5; i++) b.add("notification", "s", { i });
    b.add("notification", "s", { i: 5 });
    assert.equal(ledger.total, 19);
    assert.equal(a.size, 13, "A lost its 2 oldest");
    assert.equal(b.size, 6, "B lost nothing");
    assert.deepEqual(
      a.takeNew().map((e) => e.data["count"] ?? e.data["i"]),
      [2, ...Array.from({ length: 13 }, (_, k) => k + 2)],
    );
    assert.ok(
      b.takeNew().every((e) => e.type === "notification"),
      "no events_evicted for B",
    );
  });

  test("evicting delivered events gateway-wide reports nothing", () => {
    const { sessions } = shared(10, 2);
    const [a, b] = sessions as [EventSystem, EventSystem];
    for (let i = 0; i < 5; i++) a.add("notification", "s", { i });
    a.takeNew();
    for (let i = 0; i < 5; i++) b.add("notification", "s", { i });
    b.add("notification", "s", { i: 5 }); // evicts A's (delivered) oldest
    assert.equal(a.size, 4);
    assert.equal(a.hasNew(), false, "A had read everything: nothing to report");
    assert.equal(b.takeNew().length, 6);
  });

  test("a session's own eviction and its close give their events back to the total", () => {
    const { ledger, sessions } = shared(100, 2, 10);
    const [a, b] = sessions as [EventSystem, EventSystem];
    for (let i = 0; i < 11; i++) a.add("notification", "s", { i }); // A's own bound evicts 1
    assert.equal(a.size, 10);
    assert.equal(ledger.total, 10);
    for (let i = 0; i < 3; i++) b.add("notification", "s", { i });
    assert.equal(ledger.total, 13);
    a.close();
    assert.equal(ledger.total, 3);
    const late = a.add("notification", "s", { late: true });
    assert.equal(late.type, "notification");
    assert.equal(a.size, 0, "a closed session stores nothing");
    assert.equal(ledger.total, 3);
  });

  test("events a session already dropped are skipped: gateway eviction takes the oldest events still stored", () => {
    const { ledger, sessions } = shared(10, 3);
    const [a, b, c] = sessions as [EventSystem, EventSystem, EventSystem];
    for (let i = 0; i < 4; i++) a.add("notification", "s", { i });
    for (let i = 0; i < 3; i++) b.add("notification", "s", { i });
    a.close(); // A's 4 entries are stale now
    for (let i = 0; i < 7; i++) c.add("notification", "s", { i });
    assert.equal(ledger.total, 10);
    c.add("notification", "s", { i: 7 }); // evicts 1: B's oldest, not a stale entry of A
    assert.equal(b.size, 2);
    assert.equal(c.size, 8);
    assert.equal(ledger.total, 10);
    assert.equal(b.takeNew()[0]!.type, "events_evicted");
  });

  test("both bounds in one notice", () => {
    const { sessions } = shared(20, 3, 10);
    const [a, b, c] = sessions as [EventSystem, EventSystem, EventSystem];
    for (let i = 0; i < 11; i++) a.add("notification", "s", { i }); // A's own bound: 1 undelivered gone
    for (let i = 0; i < 9; i++) b.add("notification", "s", { i });
    c.add("notification", "s", { i: 0 }); // total 20
    c.add("notification", "s", { i: 1 }); // gateway bound: A's 2 oldest gone
    const notice = a.takeNew()[0]!;
    assert.equal(notice.type, "events_evicted");
    assert.equal(notice.data["count"], 3);
    assert.equal(notice.data["bySessionLimit"], 1);
    assert.equal(notice.data["byGatewayLimit"], 2);
    assert.match(String(notice.data["message"]), /maxEvents 10\) and the gateway's event store is full \(gateway\.events\.maxTotal 20/);
  });

  test("the ledger's queue stays bounded while sessions churn through their own bounds and close", () => {
    const { ledger, sessions } = shared(10_000, 4, 10);
    for (let round = 0; round < 50; round++) {
      for (const s of sessions) for (let i = 0; i < 100; i++) s.add("notification", "s", { i });
    }
    assert.equal(ledger.total, 40, "each session holds its own 10");
    assert.ok(ledger.queueLength <= 2 * ledger.total + 64 + 100, `queue holds ${ledger.queueLength} entries for ${ledger.total} events`);
    for (const s of sessions) s.close();
    assert.equal(ledger.total, 0);
    assert.ok(ledger.queueLength <= 64, `queue holds ${ledger.queueLength} entries for no events`);
  });
});
