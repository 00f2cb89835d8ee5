import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import type { IdGenerator } from "../../src/clock.js";
import { EventSystem, type StoredEvent } from "../../src/session/event-system.js";
import type { Logger } from "../../src/logging.js";
import type { Store } from "../../src/store/contracts.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, settle, track } from "../helpers/promises.js";

/** Lexicographically sortable ids, like ULIDs. */
function counterIds(prefix = "ev"): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

/** One session's events over a memory store (the store's own contract suite covers SQLite alike). */
function setup(maxEvents = 1000, warningThreshold = 0.8) {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const events = new EventSystem("s1", { maxEvents, warningThreshold, maxTotal: 10_000 }, store.events, clock, counterIds());
  return { clock, events, store };
}

async function size(events: EventSystem): Promise<number> {
  return (await events.stats()).count;
}

async function ids(events: Promise<StoredEvent[]>): Promise<string[]> {
  return (await events).map((e) => e.id);
}

describe("EventSystem: delivery", () => {
  test("add stores an event with id, type, server, createdAt and data", async () => {
    const { clock, events } = setup();
    clock.advance(1234);
    const e = events.add("task_created", "srv", { taskId: "t1" });
    assert.equal(e.type, "task_created");
    assert.equal(e.server, "srv");
    assert.equal(e.createdAt, clock.now());
    assert.deepEqual(e.data, { taskId: "t1" });
    assert.equal(e.id, "ev-000001");
    assert.deepEqual(await events.stats(), { count: 1, undelivered: 1, lastEventId: e.id });
    const bare = events.add("server_added", "srv");
    assert.deepEqual(bare.data, {});
  });

  test("takeNew delivers each event exactly once, in order", async () => {
    const { events } = setup();
    assert.deepEqual(await events.takeNew(), []);
    const a = events.add("notification", "s1", { n: 1 });
    const b = events.add("notification", "s2", { n: 2 });
    assert.deepEqual(await ids(events.takeNew()), [a.id, b.id]);
    assert.deepEqual(await events.takeNew(), [], "second take returns nothing");
    const c = events.add("task_failed", "s1");
    assert.deepEqual(await ids(events.takeNew()), [c.id], "only the event added after the last take");
    assert.deepEqual(await events.takeNew(), []);
    assert.equal(await size(events), 3, "delivered events stay stored (for after())");
  });

  test("concurrent takes hand each event to exactly one of them", async () => {
    const { events } = setup();
    const added = Array.from({ length: 20 }, (_, i) => events.add("notification", "s", { i }).id);
    const takes = await Promise.all([events.takeNew(), events.takeNew(), events.takeNew()]);
    const taken = takes.flat().map((e) => e.id);
    assert.deepEqual(taken.sort(), added.sort());
  });

  test("hasNew reflects undelivered events", async () => {
    const { events } = setup();
    assert.equal(await events.hasNew(), false);
    events.add("notification", "s");
    assert.equal(await events.hasNew(), true);
    assert.equal(await events.hasNew(), true, "hasNew does not consume");
    await events.takeNew();
    assert.equal(await events.hasNew(), false);
    events.add("notification", "s");
    assert.equal(await events.hasNew(), true);
  });

  test("after(cursor) returns later events without marking delivery", async () => {
    const { events } = setup();
    const a = events.add("notification", "s", { i: 0 });
    const b = events.add("notification", "s", { i: 1 });
    const c = events.add("notification", "s", { i: 2 });
    assert.deepEqual(await ids(events.after(undefined)), [a.id, b.id, c.id]);
    assert.deepEqual(await ids(events.after(a.id)), [b.id, c.id]);
    assert.deepEqual(await events.after(c.id), []);
    // The returned array is a copy.
    (await events.after(undefined)).pop();
    assert.equal(await size(events), 3);
    assert.equal(await events.hasNew(), true, "after() must not mark events delivered");
    assert.equal((await events.takeNew()).length, 3);
  });

  test("events of two sessions in one store stay apart", async () => {
    const { clock, events, store } = setup();
    const other = new EventSystem("s2", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds("ev2"));
    const mine = events.add("notification", "s", { who: "s1" });
    other.add("notification", "s", { who: "s2" });
    assert.deepEqual(await ids(events.takeNew()), [mine.id]);
    assert.equal(await other.hasNew(), true, "s1's take delivered nothing of s2");
    const read = await events.takeAfter("ev2-000001");
    assert.equal(read.found, false, "another session's id is an unknown cursor");
    assert.deepEqual(
      read.events.map((e) => e.data),
      [{ who: "s1" }],
      "…which reads this session's events only",
    );
  });

  test("a failed append is logged, never thrown; later events still go through", async () => {
    const clock = new ManualClock();
    const store = createMemoryStore(clock);
    const logged: string[] = [];
    const logger = { error: (_o: unknown, msg: string) => logged.push(msg), warn: () => undefined } as unknown as Logger;
    let fail = true;
    const flaky = {
      ...store.events,
      append: (...args: Parameters<Store["events"]["append"]>) => (fail ? Promise.reject(new Error("disk full")) : store.events.append(...args)),
      takeUndelivered: (id: string) => store.events.takeUndelivered(id),
    };
    const events = new EventSystem("s1", { maxEvents: 100, warningThreshold: 0.8, maxTotal: 1000 }, flaky, clock, counterIds(), logger);
    events.add("notification", "s", { lost: true });
    await events.flushed();
    assert.deepEqual(logged, ["event_store_write_failed"]);
    fail = false;
    const kept = events.add("notification", "s", { kept: true });
    assert.deepEqual(await ids(events.takeNew()), [kept.id]);
  });
});

describe("EventSystem: waitForNext", () => {
  test("resolves with the next added event once it is stored, and removes its waiter and timer", async () => {
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
    assert.equal(await events.hasNew(), true);
    assert.deepEqual(await ids(events.takeNew()), [e.id]);
  });

  test("waits only for events added after the call (existing undelivered ones do not count)", async () => {
    const { clock, events } = setup();
    events.add("notification", "s");
    await events.flushed();
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
    await events.flushed();
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
    await events.flushed();
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
    await events.close();
    await flush();
    assert.equal(events.waiterCount, 0);
    assert.equal(a.settled, true, "waiter must be woken by close()");
    assert.equal(a.value, null);
    assert.equal(b.settled, true, "waiter must be woken by close()");
    assert.equal(b.value, null);
    assert.equal(clock.pendingTimers, 0, "close() must clear the waiters' timers");
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
  });

  test("close() deletes the session's stored events; a closed session stores nothing", async () => {
    const { events, store } = setup();
    events.add("notification", "s");
    await events.close();
    assert.equal(await store.events.total(), 0);
    events.add("notification", "s", { late: true });
    assert.equal(await store.events.total(), 0);
  });

  test("close({ keepRecords }) (a gateway shutdown) keeps undelivered events for the next start", async () => {
    const { clock, events, store } = setup();
    const e = events.add("task_completed", "s");
    await events.close({ keepRecords: true });
    const next = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds("evB"));
    assert.deepEqual(await ids(next.takeNew()), [e.id], "delivered once, by the next process's session");
    assert.deepEqual(await next.takeNew(), []);
  });
});

describe("EventSystem: eviction", () => {
  function fill(events: EventSystem, n: number, from = 0): StoredEvent[] {
    const out: StoredEvent[] = [];
    for (let i = 0; i < n; i++) out.push(events.add("notification", "s", { i: from + i }));
    return out;
  }

  test("holds up to maxEvents; the next add evicts the oldest 10%", async () => {
    const { events } = setup(20);
    const first = fill(events, 20);
    assert.equal(await size(events), 20);
    fill(events, 1, 20);
    assert.equal(await size(events), 19, "20 - ceil(20 * 10%) + 1");
    const stored = await ids(events.after(undefined));
    assert.ok(!stored.includes(first[0]!.id));
    assert.ok(!stored.includes(first[1]!.id));
    assert.equal(stored[0], first[2]!.id, "the oldest survivor is the third event");
  });

  test("evicting undelivered events yields one events_evicted event with their count", async () => {
    const { events } = setup(20);
    fill(events, 21); // evicts events 0 and 1 before either was delivered
    assert.equal(await events.hasNew(), true);
    const taken = await events.takeNew();
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
    assert.equal(await events.hasNew(), false);
    assert.deepEqual(await events.takeNew(), []);
  });

  test("evicting only delivered events reports nothing", async () => {
    const { events } = setup(20);
    fill(events, 20);
    await events.takeNew();
    fill(events, 1, 20);
    const taken = await events.takeNew();
    assert.deepEqual(
      taken.map((e) => e.type),
      ["notification"],
    );
    assert.equal(taken[0]!.data["i"], 20);
  });

  test("counts only the undelivered part of a mixed eviction, and accumulates", async () => {
    const { events } = setup(50); // evicts 5 at a time
    fill(events, 3);
    await events.takeNew(); // 3 delivered
    fill(events, 47, 3); // 50 stored, 47 undelivered
    fill(events, 1, 50); // evicts 0..4: 3 delivered + 2 undelivered
    assert.equal(await size(events), 46);
    // Fill up again without taking: another eviction of 5 undelivered.
    fill(events, 4, 51); // 50 stored
    fill(events, 1, 55); // evicts 5..9, all undelivered
    const taken = await events.takeNew();
    assert.equal(taken[0]!.type, "events_evicted");
    assert.equal(taken[0]!.data["count"], 2 + 5);
    assert.equal(taken.length, 1 + 46);
    assert.equal(taken[1]!.data["i"], 10, "first surviving undelivered event");
    assert.equal(taken.at(-1)!.data["i"], 55);
  });

  test("smallest store evicts at least one event", async () => {
    const { events } = setup(10);
    fill(events, 11);
    assert.equal(await size(events), 10);
    const taken = await events.takeNew();
    assert.equal(taken[0]!.type, "events_evicted");
    assert.equal(taken[0]!.data["count"], 1);
  });

  test("an eviction still wakes waiters with the new event", async () => {
    const { clock, events } = setup(10);
    fill(events, 10);
    await events.flushed();
    const p = events.waitForNext(1000);
    const e = events.add("task_completed", "s");
    assert.equal(await settle(p), e);
    assert.equal(clock.pendingTimers, 0);
  });
});

describe("EventSystem: cursor reads (await_activity sinceEventId)", () => {
  test("takeAfter returns the events after the cursor, delivered or not, and then counts everything as delivered", async () => {
    const { events } = setup();
    const a = events.add("notification", "s", { i: 0 });
    const b = events.add("notification", "s", { i: 1 });
    assert.deepEqual(await ids(events.takeNew()), [a.id, b.id]);
    const c = events.add("notification", "s", { i: 2 });
    assert.equal(await events.hasAfter(a.id), true);
    const read = await events.takeAfter(a.id);
    assert.equal(read.found, true);
    assert.deepEqual(
      read.events.map((e) => e.id),
      [b.id, c.id],
      "b is re-delivered because the client asked from a",
    );
    assert.equal(await events.hasNew(), false, "c was delivered by the cursor read");
    assert.deepEqual(await events.takeNew(), []);
    assert.equal(await events.hasAfter(c.id), false, "nothing after the newest event");
    assert.deepEqual(await events.takeAfter(c.id), { events: [], found: true });
  });

  test("a cursor not in the store (evicted, or another session's) reads everything stored, found: false", async () => {
    const { events } = setup();
    const a = events.add("notification", "s");
    const b = events.add("notification", "s");
    assert.equal(await events.hasAfter("ev-999999"), true);
    const read = await events.takeAfter("not-an-id-of-this-session");
    assert.equal(read.found, false);
    assert.deepEqual(
      read.events.map((e) => e.id),
      [a.id, b.id],
    );
    assert.equal(await events.hasNew(), false);
  });

  test("an empty store has nothing after any cursor", async () => {
    const { events } = setup();
    assert.equal(await events.hasAfter("x"), false);
    assert.deepEqual(await events.takeAfter("x"), { events: [], found: false });
  });

  test("undelivered events up to the cursor count as delivered (the client says it has them)", async () => {
    const { events } = setup();
    events.add("notification", "s", { i: 0 });
    const b = events.add("notification", "s", { i: 1 });
    const c = events.add("notification", "s", { i: 2 });
    assert.deepEqual(
      (await events.takeAfter(b.id)).events.map((e) => e.id),
      [c.id],
    );
    assert.deepEqual(await events.takeNew(), [], "event 0 is not delivered later");
  });

  test("a cursor read carries a pending events_evicted notice first, once", async () => {
    const { events } = setup(10);
    const first = events.add("notification", "s", { i: 0 });
    for (let i = 1; i <= 10; i++) events.add("notification", "s", { i });
    const read = await events.takeAfter(first.id);
    assert.equal(read.found, false, "the cursor itself was evicted");
    assert.equal(read.events[0]!.type, "events_evicted");
    assert.equal(read.events[0]!.data["count"], 1);
    assert.equal(read.events.length, 1 + 10);
    assert.equal(await events.hasNew(), false);
  });
});

describe("EventSystem: the gateway-wide bound (events.maxTotal), kept by the shared store", () => {
  /** Sessions sharing one store and one id sequence, as the gateway wires them. */
  function shared(maxTotal: number, n: number, maxEvents = 1000) {
    const clock = new ManualClock();
    const store = createMemoryStore(clock);
    const idGen = counterIds();
    const sessions = Array.from({ length: n }, (_, i) => new EventSystem(`s${i}`, { maxEvents, warningThreshold: 0.8, maxTotal }, store.events, clock, idGen));
    return { clock, store, sessions };
  }

  test("counts events across sessions; beyond maxTotal the oldest 10% gateway-wide go, whichever sessions hold them", async () => {
    const { clock, store, sessions } = shared(20, 2);
    const [a, b] = sessions as [EventSystem, EventSystem];
    const added: StoredEvent[] = [];
    for (let i = 0; i < 10; i++) added.push(a.add("notification", "s", { i }), b.add("notification", "s", { i }));
    await Promise.all([a.flushed(), b.flushed()]);
    assert.equal(await store.events.total(), 20);
    const next = a.add("notification", "s", { i: 10 });
    await a.flushed();
    assert.equal(await store.events.total(), 19, "20 - ceil(20 * 10%) + 1");
    assert.equal(await size(a), 10);
    assert.equal(await size(b), 9);
    assert.ok(!(await ids(a.after(undefined))).includes(added[0]!.id), "A's oldest went");
    assert.ok(!(await ids(b.after(undefined))).includes(added[1]!.id), "B's oldest went");
    // Each session is told once, about its own loss, naming the gateway-wide limit.
    for (const s of [a, b]) {
      const taken = await s.takeNew();
      assert.equal(taken[0]!.type, "events_evicted");
      assert.equal(taken[0]!.data["count"], 1);
      assert.equal(taken[0]!.data["byGatewayLimit"], 1);
      assert.equal(taken[0]!.data["bySessionLimit"], 0);
      assert.match(String(taken[0]!.data["message"]), /gateway\.events\.maxTotal 20 across all sessions/);
      assert.doesNotMatch(String(taken[0]!.data["message"]), /maxEvents/);
      assert.equal(await s.hasNew(), false);
    }
    assert.equal((await a.stats()).lastEventId, next.id);
    assert.equal(clock.pendingTimers, 0, "the bound keeps no timers");
  });

  test("evicts only the oldest: a session whose events are all newer keeps them and gets no notice", async () => {
    const { store, sessions } = shared(20, 2);
    const [a, b] = sessions as [EventSystem, EventSystem];
    for (let i = 0; i < 15; i++) a.add("notification", "s", { i });
    await a.flushed();
    for (let i = 0; i < 5; i++) b.add("notification", "s", { i });
    b.add("notification", "s", { i: 5 });
    await b.flushed();
    assert.equal(await store.events.total(), 19);
    assert.equal(await size(a), 13, "A lost its 2 oldest");
    assert.equal(await size(b), 6, "B lost nothing");
    assert.deepEqual(
      (await a.takeNew()).map((e) => e.data["count"] ?? e.data["i"]),
      [2, ...Array.from({ length: 13 }, (_, k) => k + 2)],
    );
    assert.ok(
      (await b.takeNew()).every((e) => e.type === "notification"),
      "no events_evicted for B",
    );
  });

  test("evicting delivered events gateway-wide reports nothing", async () => {
    const { sessions } = shared(10, 2);
    const [a, b] = sessions as [EventSystem, EventSystem];
    for (let i = 0; i < 5; i++) a.add("notification", "s", { i });
    await a.takeNew();
    for (let i = 0; i < 5; i++) b.add("notification", "s", { i });
    b.add("notification", "s", { i: 5 }); // evicts A's (delivered) oldest
    await b.flushed();
    assert.equal(await size(a), 4);
    assert.equal(await a.hasNew(), false, "A had read everything: nothing to report");
    assert.equal((await b.takeNew()).length, 6);
  });

  test("a session's own eviction and its close give their events back to the total", async () => {
    const { store, sessions } = shared(100, 2, 10);
    const [a, b] = sessions as [EventSystem, EventSystem];
    for (let i = 0; i < 11; i++) a.add("notification", "s", { i }); // A's own bound evicts 1
    assert.equal(await size(a), 10);
    assert.equal(await store.events.total(), 10);
    for (let i = 0; i < 3; i++) b.add("notification", "s", { i });
    await b.flushed();
    assert.equal(await store.events.total(), 13);
    await a.close();
    assert.equal(await store.events.total(), 3);
    const late = a.add("notification", "s", { late: true });
    assert.equal(late.type, "notification");
    assert.equal(await store.events.total(), 3, "a closed session stores nothing");
  });

  test("both bounds in one notice", async () => {
    const { sessions } = shared(20, 3, 10);
    const [a, b, c] = sessions as [EventSystem, EventSystem, EventSystem];
    for (let i = 0; i < 11; i++) a.add("notification", "s", { i }); // A's own bound: 1 undelivered gone
    await a.flushed();
    for (let i = 0; i < 9; i++) b.add("notification", "s", { i });
    await b.flushed();
    c.add("notification", "s", { i: 0 }); // total 20
    c.add("notification", "s", { i: 1 }); // gateway bound: A's 2 oldest gone
    await c.flushed();
    const notice = (await a.takeNew())[0]!;
    assert.equal(notice.type, "events_evicted");
    assert.equal(notice.data["count"], 3);
    assert.equal(notice.data["bySessionLimit"], 1);
    assert.equal(notice.data["byGatewayLimit"], 2);
    assert.match(String(notice.data["message"]), /maxEvents 10\) and the gateway's event store is full \(gateway\.events\.maxTotal 20/);
  });

  test("the store stays bounded while sessions churn through their own bounds and close", async () => {
    const { store, sessions } = shared(10_000, 4, 10);
    for (let round = 0; round < 50; round++) {
      for (const s of sessions) for (let i = 0; i < 100; i++) s.add("notification", "s", { i });
    }
    await Promise.all(sessions.map((s) => s.flushed()));
    assert.equal(await store.events.total(), 40, "each session holds its own 10");
    for (const s of sessions) await s.close();
    assert.equal(await store.events.total(), 0);
  });
});

describe("EventSystem: an exclusive store (memory, SQLite: this object is the session's only writer)", () => {
  /** One session over a memory store whose takes are counted. */
  function exclusive(maxEvents = 1000, maxTotal = 10_000) {
    const clock = new ManualClock();
    const store = createMemoryStore(clock);
    const reads = { takes: 0 };
    const counted = new Proxy(store.events, {
      get: (target, key, receiver) => {
        const value: unknown = Reflect.get(target, key, receiver);
        if (key === "takeUndelivered") reads.takes++;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const events = new EventSystem("s1", { maxEvents, warningThreshold: 0.8, maxTotal }, counted, clock, counterIds(), undefined, true);
    return { clock, store, events, reads };
  }

  test("a take right after a take, with nothing added, does not read the store; one after an add does", async () => {
    const { events, reads } = exclusive();
    assert.deepEqual(await events.takeNew(), []);
    assert.equal(reads.takes, 1, "the first take reads (what a resumed session's store holds is unknown)");
    assert.deepEqual(await events.takeNew(), []);
    assert.deepEqual(await events.takeNew(), []);
    assert.equal(reads.takes, 1, "nothing added since: no read");
    const a = events.add("notification", "s1", { n: 1 });
    assert.deepEqual(await ids(events.takeNew()), [a.id]);
    assert.equal(reads.takes, 2);
    assert.deepEqual(await events.takeNew(), []);
    assert.equal(reads.takes, 2);
  });

  test("the first take reads what an earlier process stored for the session", async () => {
    const { store, clock } = exclusive();
    const before = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds("old"));
    const left = before.add("task_expired", "srv");
    await before.close({ keepRecords: true });
    const next = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds(), undefined, true);
    assert.deepEqual(await ids(next.takeNew()), [left.id]);
    assert.deepEqual(await next.takeNew(), []);
  });

  test("an event added while a take is under way is delivered by the next take, exactly once", async () => {
    const { events } = exclusive();
    await events.takeNew();
    const a = events.add("notification", "s1", { n: 1 });
    const first = events.takeNew();
    const b = events.add("notification", "s1", { n: 2 }); // added after the first take began
    const got = [...(await ids(first)), ...(await ids(events.takeNew())), ...(await ids(events.takeNew()))];
    assert.deepEqual(got, [a.id, b.id]);
  });

  test("concurrent takes with adds between them hand each event to exactly one take", async () => {
    const { events } = exclusive();
    const added: string[] = [];
    const takes: Array<Promise<StoredEvent[]>> = [];
    for (let i = 0; i < 20; i++) {
      added.push(events.add("notification", "s1", { i }).id);
      takes.push(events.takeNew());
      if (i % 3 === 0) takes.push(events.takeNew());
    }
    const got = (await Promise.all(takes)).flat().map((e) => e.id);
    got.push(...(await ids(events.takeNew())));
    assert.deepEqual(got.sort(), added.sort());
  });

  test("a cursor read counts as a take; an eviction notice still comes with the next take", async () => {
    const { events, reads } = exclusive(10);
    const a = events.add("notification", "s1", { n: 1 });
    events.add("notification", "s1", { n: 2 });
    await events.takeAfter(a.id);
    assert.deepEqual(await events.takeNew(), []);
    assert.equal(reads.takes, 0, "the cursor read marked everything delivered: no read");
    for (let i = 0; i < 11; i++) events.add("notification", "s1", { i }); // its own bound evicts undelivered ones
    const taken = await events.takeNew();
    assert.equal(taken[0]!.type, "events_evicted");
    assert.equal(reads.takes, 1);
  });
});
