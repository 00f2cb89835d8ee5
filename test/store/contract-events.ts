/** Contract cases for EventStore (meta events, exactly once) and ReplayStore (SSE resumption); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { EventInput, EventLimits, EventRecord } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { event, rejectsWith, withStore } from "./fixtures.js";

const ROOMY: EventLimits = { maxPerSession: 1000, maxTotal: 10_000 };

function eventIds(events: ReadonlyArray<{ id: string }>): string[] {
  return events.map((e) => e.id);
}

export function eventContract(factory: StoreFactory): void {
  describe("events", () => {
    test("append assigns seq 1, 2, 3… per session, independently, and returns the stored event", () =>
      withStore(factory, async ({ store }) => {
        const e1 = event("task_created", { taskId: "01A" });
        const a1 = await store.events.append("A", e1, ROOMY);
        assert.deepEqual(a1, { event: { ...e1, seq: 1 }, evicted: [] });
        assert.equal((await store.events.append("B", event(), ROOMY)).event.seq, 1);
        assert.equal((await store.events.append("A", event(), ROOMY)).event.seq, 2);
        assert.equal((await store.events.append("A", event(), ROOMY)).event.seq, 3);
        assert.equal(await store.events.total(), 4);
        const { events, found } = await store.events.listAfter("A");
        assert.deepEqual(
          events.map((e) => e.seq),
          [1, 2, 3],
        );
        assert.equal(found, false);
        assert.deepEqual(events[0], { ...e1, seq: 1 });
      }));

    test("takeUndelivered hands each event out once; listAfter and stats mark nothing", () =>
      withStore(factory, async ({ store }) => {
        const first = [event(), event()];
        for (const e of first) await store.events.append("A", e, ROOMY);
        assert.deepEqual(await store.events.stats("A"), { count: 2, undelivered: 2, lastId: first[1]!.id, evicted: { session: 0, gateway: 0 } });
        assert.deepEqual(eventIds((await store.events.listAfter("A")).events), eventIds(first));
        const take1 = await store.events.takeUndelivered("A");
        assert.deepEqual(eventIds(take1.events), eventIds(first));
        assert.deepEqual(take1.evicted, { session: 0, gateway: 0 });
        assert.deepEqual((await store.events.takeUndelivered("A")).events, []);
        const later = event();
        await store.events.append("A", later, ROOMY);
        assert.equal((await store.events.stats("A")).undelivered, 1);
        assert.deepEqual(eventIds((await store.events.takeUndelivered("A")).events), [later.id]);
        assert.deepEqual(await store.events.stats("A"), { count: 3, undelivered: 0, lastId: later.id, evicted: { session: 0, gateway: 0 } });
        assert.deepEqual(await store.events.takeUndelivered("nobody"), { events: [], evicted: { session: 0, gateway: 0 } });
      }));

    test("exactly once under concurrent takes interleaved with appends", () =>
      withStore(factory, async ({ store }) => {
        const appended: EventInput[] = [];
        const ops: Array<Promise<EventRecord[] | undefined>> = [];
        for (let i = 0; i < 120; i++) {
          const e = event("notification", { i });
          appended.push(e);
          ops.push(store.events.append("A", e, ROOMY).then(() => undefined));
          if (i % 7 === 0) ops.push(store.events.takeUndelivered("A").then((t) => t.events));
          if (i % 11 === 0) ops.push(store.events.takeUndelivered("A").then((t) => t.events));
        }
        const results = await Promise.all(ops);
        const taken = results.flatMap((r) => r ?? []);
        taken.push(...(await store.events.takeUndelivered("A")).events);
        const got = eventIds(taken);
        assert.equal(new Set(got).size, got.length, "no event was handed out twice");
        assert.deepEqual([...got].sort(), eventIds(appended).sort(), "every event was handed out");
      }));

    test("takeAfter re-reads after a cursor (delivered or not), an unknown cursor reads all; both mark everything delivered", () =>
      withStore(factory, async ({ store }) => {
        const es = [event(), event(), event(), event()];
        for (const e of es.slice(0, 2)) await store.events.append("A", e, ROOMY);
        await store.events.takeUndelivered("A");
        for (const e of es.slice(2)) await store.events.append("A", e, ROOMY);
        const after = await store.events.takeAfter("A", es[0]!.id);
        assert.deepEqual(eventIds(after.events), eventIds(es.slice(1)));
        assert.equal(after.found, true);
        assert.deepEqual((await store.events.takeUndelivered("A")).events, [], "the cursor read delivered the rest");
        const unknown = await store.events.takeAfter("A", "01NOTANID");
        assert.equal(unknown.found, false);
        assert.deepEqual(eventIds(unknown.events), eventIds(es));
        assert.deepEqual(eventIds((await store.events.listAfter("A", es[2]!.id)).events), [es[3]!.id]);
        assert.equal((await store.events.listAfter("A", es[2]!.id)).found, true);
        assert.deepEqual(await store.events.takeAfter("nobody", es[0]!.id), { events: [], found: false, evicted: { session: 0, gateway: 0 } });
      }));

    test("sessions are isolated: one session's take or cursor never touches another's", () =>
      withStore(factory, async ({ store }) => {
        const a = event();
        const b = event();
        await store.events.append("A", a, ROOMY);
        await store.events.append("B", b, ROOMY);
        assert.deepEqual(eventIds((await store.events.takeUndelivered("A")).events), [a.id]);
        assert.equal((await store.events.stats("B")).undelivered, 1);
        const cross = await store.events.takeAfter("B", a.id);
        assert.equal(cross.found, false, "A's event id is not a cursor in B");
        assert.deepEqual(eventIds(cross.events), [b.id]);
      }));

    test("the per-session bound evicts the session's oldest 10% and reports the undelivered ones once", () =>
      withStore(factory, async ({ store }) => {
        const limits: EventLimits = { maxPerSession: 10, maxTotal: 10_000 };
        const es = Array.from({ length: 14 }, () => event());
        for (const e of es.slice(0, 3)) await store.events.append("A", e, limits);
        await store.events.takeUndelivered("A"); // seq 1-3 delivered
        for (const e of es.slice(3, 10)) assert.deepEqual((await store.events.append("A", e, limits)).evicted, []);
        const reports = [];
        for (const e of es.slice(10)) reports.push(...(await store.events.append("A", e, limits)).evicted);
        assert.deepEqual(reports, [
          { sessionId: "A", reason: "session", count: 1, undelivered: 0 },
          { sessionId: "A", reason: "session", count: 1, undelivered: 0 },
          { sessionId: "A", reason: "session", count: 1, undelivered: 0 },
          { sessionId: "A", reason: "session", count: 1, undelivered: 1 },
        ]);
        assert.deepEqual(await store.events.stats("A"), { count: 10, undelivered: 10, lastId: es[13]!.id, evicted: { session: 1, gateway: 0 } });
        const take = await store.events.takeUndelivered("A");
        assert.deepEqual(eventIds(take.events), eventIds(es.slice(4)));
        assert.deepEqual(take.evicted, { session: 1, gateway: 0 });
        assert.deepEqual((await store.events.stats("A")).evicted, { session: 0, gateway: 0 }, "the notice is given once");
        assert.equal((await store.events.append("A", event(), limits)).event.seq, 15, "seq numbers are never reused");
        // A bound of 30 evicts 3 at once.
        for (let i = 0; i < 30; i++) await store.events.append("B", event(), { maxPerSession: 30, maxTotal: 10_000 });
        assert.deepEqual((await store.events.append("B", event(), { maxPerSession: 30, maxTotal: 10_000 })).evicted, [
          { sessionId: "B", reason: "session", count: 3, undelivered: 3 },
        ]);
        assert.equal((await store.events.stats("B")).count, 28);
      }));

    test("the gateway-wide bound evicts the oldest 10% across sessions, each session's own oldest", () =>
      withStore(factory, async ({ store }) => {
        const limits: EventLimits = { maxPerSession: 100, maxTotal: 20 };
        const a: EventInput[] = [];
        const b: EventInput[] = [];
        for (let i = 0; i < 10; i++) {
          a.push(event());
          await store.events.append("A", a.at(-1)!, limits);
          b.push(event());
          await store.events.append("B", b.at(-1)!, limits);
        }
        await store.events.takeUndelivered("B");
        assert.equal(await store.events.total(), 20);
        const { evicted } = await store.events.append("C", event(), limits);
        assert.deepEqual(evicted, [
          { sessionId: "A", reason: "gateway", count: 1, undelivered: 1 },
          { sessionId: "B", reason: "gateway", count: 1, undelivered: 0 },
        ]);
        assert.equal(await store.events.total(), 19);
        assert.deepEqual((await store.events.stats("A")).evicted, { session: 0, gateway: 1 });
        const take = await store.events.takeUndelivered("A");
        assert.deepEqual(eventIds(take.events), eventIds(a.slice(1)));
        assert.deepEqual(take.evicted, { session: 0, gateway: 1 });
        assert.deepEqual(eventIds((await store.events.listAfter("B")).events), eventIds(b.slice(1)));
        assert.equal((await store.events.stats("C")).count, 1);
      }));

    test("deleteBySession removes a session's events and their share of the gateway-wide count", () =>
      withStore(factory, async ({ store }) => {
        for (let i = 0; i < 3; i++) await store.events.append("A", event(), ROOMY);
        const keep = event();
        await store.events.append("B", keep, ROOMY);
        assert.equal(await store.events.deleteBySession("A"), 3);
        assert.equal(await store.events.deleteBySession("A"), 0);
        assert.equal(await store.events.total(), 1);
        assert.deepEqual(await store.events.stats("A"), { count: 0, undelivered: 0, evicted: { session: 0, gateway: 0 } });
        assert.deepEqual(eventIds((await store.events.takeUndelivered("B")).events), [keep.id]);
      }));

    test("limits that are not positive integers are refused (a wiring bug)", () =>
      withStore(factory, async ({ store }) => {
        await rejectsWith(store.events.append("A", event(), { maxPerSession: 0, maxTotal: 10 }), "EMCP_INTERNAL");
        await rejectsWith(store.replay.append("A", "s", {}, { maxEvents: 10, maxBytes: Number.NaN }), "EMCP_INTERNAL");
        assert.equal(await store.events.total(), 0);
      }));
  });

  describe("SSE replay", () => {
    const ROOMY_REPLAY = { maxEvents: 100, maxBytes: 1_000_000 };

    test("replayAfter returns the later messages of the same stream, oldest first; streamOf names the stream", () =>
      withStore(factory, async ({ store }) => {
        const id0 = await store.replay.append("A", "get", {}, ROOMY_REPLAY); // a priming event
        const id1 = await store.replay.append("A", "post-1", { jsonrpc: "2.0", method: "notifications/progress", params: { progress: 1 } }, ROOMY_REPLAY);
        const id2 = await store.replay.append("A", "get", { jsonrpc: "2.0", method: "notifications/message", params: { level: "info" } }, ROOMY_REPLAY);
        const id3 = await store.replay.append("A", "post-1", { jsonrpc: "2.0", id: 7, result: { content: [] } }, ROOMY_REPLAY);
        assert.equal(new Set([id0, id1, id2, id3]).size, 4);
        assert.equal(await store.replay.streamOf("A", id1), "post-1");
        assert.deepEqual(await store.replay.replayAfter("A", id1), {
          streamId: "post-1",
          messages: [{ eventId: id3, message: { jsonrpc: "2.0", id: 7, result: { content: [] } } }],
        });
        assert.deepEqual(await store.replay.replayAfter("A", id0), {
          streamId: "get",
          messages: [{ eventId: id2, message: { jsonrpc: "2.0", method: "notifications/message", params: { level: "info" } } }],
        });
        assert.deepEqual(await store.replay.replayAfter("A", id3), { streamId: "post-1", messages: [] });
      }));

    test("ids are scoped to their session: another session's id, or garbage, is unknown", () =>
      withStore(factory, async ({ store }) => {
        const a = await store.replay.append("A", "s", { n: 1 }, ROOMY_REPLAY);
        await store.replay.append("B", "s", { n: 2 }, ROOMY_REPLAY);
        await store.replay.append("B", "s", { n: 3 }, ROOMY_REPLAY);
        assert.equal((await store.replay.replayAfter("B", a))?.messages.length, 1, "the same id string in B names B's own event");
        for (const bad of ["", "0", "-1", "1.5", "abc", "99999", "1e3"]) {
          assert.equal(await store.replay.replayAfter("A", bad), undefined, `id '${bad}'`);
          assert.equal(await store.replay.streamOf("A", bad), undefined, `id '${bad}'`);
        }
        assert.equal(await store.replay.replayAfter("C", a), undefined);
      }));

    test("bounded per session by count and bytes, oldest dropped first, the newest message always kept", () =>
      withStore(factory, async ({ store }) => {
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push(await store.replay.append("A", "s", { i }, { maxEvents: 3, maxBytes: 1_000_000 }));
        assert.deepEqual(await store.replay.size("A"), { events: 3, bytes: 3 * Buffer.byteLength('{"i":0}') });
        assert.equal(await store.replay.streamOf("A", ids[1]!), undefined, "evicted");
        assert.equal(await store.replay.streamOf("A", ids[2]!), "s");
        const big = { blob: "x".repeat(500) };
        const bigBytes = Buffer.byteLength(JSON.stringify(big));
        const bigId = await store.replay.append("A", "s", big, { maxEvents: 100, maxBytes: bigBytes + 10 });
        assert.deepEqual(await store.replay.size("A"), { events: 2, bytes: bigBytes + 7 }, "one small one still fits beside it");
        const huge = await store.replay.append("A", "s", { blob: "y".repeat(2000) }, { maxEvents: 100, maxBytes: 100 });
        assert.equal((await store.replay.size("A")).events, 1, "larger than the bound alone: kept, everything older dropped");
        assert.equal(await store.replay.streamOf("A", bigId), undefined);
        assert.equal(await store.replay.streamOf("A", huge), "s");
        assert.ok(Number(huge) > Number(bigId), "ids keep increasing");
      }));

    test("replayStream: a stream's messages after a sequence number, and where the session's kept events start", () =>
      withStore(factory, async ({ store }) => {
        const progress = { jsonrpc: "2.0", method: "notifications/progress", params: { progress: 1 } };
        const result = { jsonrpc: "2.0", id: 7, result: { content: [] } };
        await store.replay.append("A", "get", {}, ROOMY_REPLAY);
        const p = await store.replay.append("A", "post-1", progress, ROOMY_REPLAY);
        await store.replay.append("A", "get", { jsonrpc: "2.0", method: "notifications/message" }, ROOMY_REPLAY);
        const r = await store.replay.append("A", "post-1", result, ROOMY_REPLAY);
        assert.deepEqual(await store.replay.replayStream("A", "post-1", 0), {
          keptFrom: 1,
          messages: [
            { eventId: p, message: progress },
            { eventId: r, message: result },
          ],
        });
        assert.deepEqual(await store.replay.replayStream("A", "post-1", Number(p)), { keptFrom: 1, messages: [{ eventId: r, message: result }] });
        assert.deepEqual(await store.replay.replayStream("A", "post-2", 0), { keptFrom: 1, messages: [] }, "a stream with nothing stored");
        assert.deepEqual(await store.replay.replayStream("B", "post-1", 0), { keptFrom: 1, messages: [] }, "another session's stream is unknown");
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push(await store.replay.append("C", "s", { i }, { maxEvents: 3, maxBytes: 1_000_000 }));
        assert.deepEqual(await store.replay.replayStream("C", "s", 0), {
          keptFrom: Number(ids[2]),
          messages: ids.slice(2).map((eventId, i) => ({ eventId, message: { i: i + 2 } })),
        });
      }));

    test("deleteBySession empties that session only", () =>
      withStore(factory, async ({ store }) => {
        const a = await store.replay.append("A", "s", { n: 1 }, ROOMY_REPLAY);
        const b = await store.replay.append("B", "s", { n: 1 }, ROOMY_REPLAY);
        assert.equal(await store.replay.deleteBySession("A"), 1);
        assert.deepEqual(await store.replay.size("A"), { events: 0, bytes: 0 });
        assert.equal(await store.replay.streamOf("A", a), undefined);
        assert.equal(await store.replay.streamOf("B", b), "s");
      }));
  });
}
