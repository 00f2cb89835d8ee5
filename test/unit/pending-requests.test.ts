import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import type { CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { IdGenerator } from "../../src/clock.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { EventSystem } from "../../src/session/event-system.js";
import { PendingRequests } from "../../src/session/pending-requests.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, settle, track } from "../helpers/promises.js";

function counterIds(prefix: string): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

const TIMEOUT = 10_000;

function setup(maxPerSession = 100) {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const events = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds("ev"));
  const pending = new PendingRequests("s1", { timeoutMs: TIMEOUT, maxPerSession }, store.pending, events, clock, counterIds("req"));
  /** The events so far, once what was asked is stored (a request is announced after its record is written). */
  const taken = async () => {
    await flush();
    return events.takeNew();
  };
  /** The stored records of the session. */
  const rows = () => store.pending.listBySession("s1");
  return { clock, events, pending, store, taken, rows };
}

const elicitParams: ElicitRequest["params"] = {
  message: "What is your name?",
  requestedSchema: { type: "object", properties: { name: { type: "string" } } },
};
const samplingParams: CreateMessageRequest["params"] = {
  messages: [{ role: "user", content: { type: "text", text: "hi" } }],
  maxTokens: 10,
};
const elicitAnswer: ElicitResult = { action: "accept", content: { name: "Ada" } };
const samplingAnswer: CreateMessageResult = { role: "assistant", content: { type: "text", text: "hello" }, model: "m" };

function isGatewayError(code: string) {
  return (err: unknown) => {
    assert.ok(err instanceof GatewayError, `expected GatewayError, got ${String(err)}`);
    assert.equal(err.code, code);
    return true;
  };
}

describe("PendingRequests", () => {
  test("add stores the record, then emits <kind>_request and lists it; respond deletes it and resolves the promise", async () => {
    const { clock, pending, taken, rows } = setup();
    clock.advance(500);
    const p = pending.add("elicitation", "srv", elicitParams);
    assert.equal(pending.size, 1);
    assert.equal(clock.pendingTimers, 1);

    const [ev] = await taken();
    assert.equal(ev?.type, "elicitation_request");
    assert.equal(ev?.server, "srv");
    const requestId = ev?.data["requestId"];
    assert.equal(typeof requestId, "string");
    assert.deepEqual(ev?.data["params"], elicitParams);
    assert.deepEqual(await rows(), [
      { requestId, sessionId: "s1", kind: "elicitation", server: "srv", params: elicitParams, createdAt: clock.now(), expiresAt: clock.now() + TIMEOUT },
    ]);

    const [info] = pending.list("elicitation");
    assert.ok(info);
    assert.equal(info.requestId, requestId);
    assert.equal(info.kind, "elicitation");
    assert.equal(info.server, "srv");
    assert.equal(info.receivedAt, clock.now());
    assert.equal(info.expiresAt, clock.now() + TIMEOUT);
    assert.deepEqual(info.params, elicitParams);
    assert.deepEqual(pending.get("elicitation", info.requestId), info);
    assert.deepEqual(pending.list("sampling"), []);

    const answered = await pending.respond("elicitation", info.requestId, elicitAnswer);
    assert.equal(answered.requestId, info.requestId);
    assert.deepEqual(await settle(p), elicitAnswer);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(await rows(), []);
    assert.deepEqual(await taken(), [], "answering emits no event");
  });

  test("sampling requests work the same way", async () => {
    const { clock, pending, taken } = setup();
    const p = pending.add("sampling", "srv", samplingParams);
    const [ev] = await taken();
    assert.equal(ev?.type, "sampling_request");
    const id = String(ev?.data["requestId"]);
    await pending.respond("sampling", id, samplingAnswer);
    assert.deepEqual(await settle(p), samplingAnswer);
    assert.equal(clock.pendingTimers, 0);
  });

  test("a request whose record cannot be stored is refused (the store's error) and leaves nothing behind", async () => {
    const clock = new ManualClock();
    const store = createMemoryStore(clock);
    const events = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds("ev"));
    const full = new GatewayError(ErrorCodes.STORE_UNAVAILABLE, "the disk (or its quota) is full: nothing was written");
    const broken = { ...store.pending, put: () => Promise.reject(full) };
    const pending = new PendingRequests("s1", { timeoutMs: TIMEOUT, maxPerSession: 10 }, broken, events, clock, counterIds("req"));
    await assert.rejects(settle(pending.add("elicitation", "srv", elicitParams)), isGatewayError(ErrorCodes.STORE_UNAVAILABLE));
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(await events.takeNew(), [], "the client never hears of it");
  });

  test("list filters by kind and server", async () => {
    const { pending } = setup();
    const ps = [pending.add("elicitation", "a", elicitParams), pending.add("elicitation", "b", elicitParams), pending.add("sampling", "a", samplingParams)];
    for (const p of ps) p.catch(() => undefined);
    assert.equal(pending.list("elicitation").length, 0, "listed once stored");
    await flush();
    assert.equal(pending.list("elicitation").length, 2);
    assert.deepEqual(
      pending.list("elicitation", "a").map((i) => i.server),
      ["a"],
    );
    assert.equal(pending.list("sampling", "a").length, 1);
    assert.equal(pending.list("sampling", "b").length, 0);
    await pending.close();
  });

  test("timeout rejects the promise, deletes the record and emits <kind>_expired", async () => {
    const { clock, pending, taken, rows } = setup();
    const p = pending.add("elicitation", "srv", elicitParams);
    const state = track(p);
    const id = String((await taken())[0]?.data["requestId"]);
    clock.advance(TIMEOUT - 1);
    await flush();
    assert.equal(state.settled, false);
    assert.equal(pending.size, 1);
    clock.advance(1);
    await flush();
    assert.equal(state.settled, true);
    assert.ok(state.error instanceof Error);
    assert.match(state.error.message, /timed out after 10000ms/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(await rows(), []);
    const evs = await taken();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["elicitation_expired"],
    );
    assert.equal(evs[0]?.data["requestId"], id);
    assert.equal(evs[0]?.server, "srv");
    await assert.rejects(pending.respond("elicitation", id, elicitAnswer), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
  });

  test("sampling timeout emits sampling_expired", async () => {
    const { clock, pending, taken } = setup();
    const p = pending.add("sampling", "srv", samplingParams);
    await taken();
    clock.advance(TIMEOUT);
    await assert.rejects(settle(p), /sampling request timed out/);
    assert.deepEqual(
      (await taken()).map((e) => e.type),
      ["sampling_expired"],
    );
    assert.equal(clock.pendingTimers, 0);
  });

  test("upstream abort signal withdraws the request: rejected, removed, timer and listener cleared", async () => {
    const { clock, pending, taken, rows } = setup();
    const ctrl = new AbortController();
    const p = pending.add("elicitation", "srv", elicitParams, ctrl.signal);
    const id = String((await taken())[0]?.data["requestId"]);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 1);
    ctrl.abort();
    await assert.rejects(settle(p), /cancelled/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
    const evs = await taken();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["elicitation_expired"],
    );
    assert.equal(evs[0]?.data["requestId"], id);
    assert.equal(evs[0]?.data["reason"], "cancelled by the upstream");
    assert.deepEqual(await rows(), []);
    await assert.rejects(pending.respond("elicitation", id, elicitAnswer), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
  });

  test("answering removes the upstream abort listener; a later abort does nothing", async () => {
    const { clock, pending, taken } = setup();
    const ctrl = new AbortController();
    const p = pending.add("elicitation", "srv", elicitParams, ctrl.signal);
    const id = String((await taken())[0]?.data["requestId"]);
    await pending.respond("elicitation", id, elicitAnswer);
    assert.deepEqual(await settle(p), elicitAnswer);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
    ctrl.abort();
    assert.deepEqual(await taken(), []);
    assert.equal(clock.pendingTimers, 0);
  });

  test("regression: an upstream signal that is already aborted rejects at once, leaving nothing pending", async () => {
    // The upstream may cancel before the gateway registers the request; it used
    // to stay pending (and shown to the client) until the full timeout.
    const { clock, pending, taken, rows } = setup();
    const ctrl = new AbortController();
    ctrl.abort();
    await assert.rejects(settle(pending.add("elicitation", "srv", elicitParams, ctrl.signal)), /cancelled/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(await taken(), [], "a request nobody will see emits no event");
    assert.deepEqual(await rows(), []);
  });

  test("an upstream cancel while the record is being written: rejected, announced consistently, no record left", async () => {
    const { clock, pending, taken, rows } = setup();
    const ctrl = new AbortController();
    const p = pending.add("elicitation", "srv", elicitParams, ctrl.signal);
    ctrl.abort();
    await assert.rejects(settle(p), /cancelled/);
    await flush();
    const types = (await taken()).map((e) => e.type);
    assert.ok(
      types.length === 0 || JSON.stringify(types) === JSON.stringify(["elicitation_request", "elicitation_expired"]),
      `either never announced, or announced and withdrawn: ${types.join(", ")}`,
    );
    assert.deepEqual(await rows(), []);
    assert.equal(clock.pendingTimers, 0);
  });

  test("rejectServer rejects only that server's requests, with <kind>_rejected events", async () => {
    const { clock, pending, taken, rows } = setup();
    const a1 = pending.add("elicitation", "a", elicitParams);
    const a2 = pending.add("sampling", "a", samplingParams);
    const b1 = track(pending.add("elicitation", "b", elicitParams));
    await taken();
    assert.equal(clock.pendingTimers, 3);

    assert.equal(pending.rejectServer("a", "server a removed"), 2);
    await assert.rejects(settle(a1), /server a removed/);
    await assert.rejects(settle(a2), /server a removed/);
    await flush();
    assert.equal(b1.settled, false);
    assert.equal(pending.size, 1);
    assert.equal(pending.list("elicitation", "b").length, 1);
    assert.equal(clock.pendingTimers, 1, "only b's timer remains");
    assert.deepEqual(
      (await rows()).map((r) => r.server),
      ["b"],
    );

    const evs = await taken();
    assert.deepEqual(evs.map((e) => e.type).sort(), ["elicitation_rejected", "sampling_rejected"]);
    for (const e of evs) {
      assert.equal(e.server, "a");
      assert.equal(e.data["reason"], "server a removed");
    }
    assert.equal(pending.rejectServer("nobody", "x"), 0);
    await pending.close();
    assert.equal(clock.pendingTimers, 0);
  });

  test("respond to an unknown id or the wrong kind rejects with EMCP_UNKNOWN_REQUEST and keeps the request", async () => {
    const { clock, pending, taken } = setup();
    const p = pending.add("elicitation", "srv", elicitParams);
    const id = String((await taken())[0]?.data["requestId"]);

    await assert.rejects(pending.respond("elicitation", "no-such-id", elicitAnswer), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.UNKNOWN_REQUEST);
      assert.match(err.message, /no-such-id/);
      assert.match(err.message, /get_elicitations/);
      return true;
    });
    await assert.rejects(pending.respond("sampling", id, samplingAnswer), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.UNKNOWN_REQUEST);
      assert.match(err.message, /get_sampling_requests/);
      return true;
    });
    assert.throws(() => pending.get("sampling", id), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
    await assert.rejects(pending.reject("sampling", id, "no"), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));

    assert.equal(pending.size, 1, "a failed respond leaves the request pending");
    assert.equal(clock.pendingTimers, 1);
    await pending.respond("elicitation", id, elicitAnswer);
    assert.deepEqual(await settle(p), elicitAnswer);
    await assert.rejects(pending.respond("elicitation", id, elicitAnswer), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
  });

  test("two answers at once: exactly one is delivered", async () => {
    const { pending, taken } = setup();
    const p = pending.add("elicitation", "srv", elicitParams);
    const id = String((await taken())[0]?.data["requestId"]);
    const outcomes = await Promise.allSettled([pending.respond("elicitation", id, elicitAnswer), pending.respond("elicitation", id, { action: "decline" })]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ["fulfilled", "rejected"],
    );
    assert.deepEqual(await settle(p), elicitAnswer);
  });

  test("reject() on the client's behalf rejects with the reason and clears the timer", async () => {
    const { clock, pending, taken } = setup();
    const p = pending.add("elicitation", "srv", elicitParams);
    const id = String((await taken())[0]?.data["requestId"]);
    await pending.reject("elicitation", id, "user declined");
    await assert.rejects(settle(p), /user declined/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test("maxPerSession: the next add rejects with EMCP_LIMIT_REACHED, without a timer or event", async () => {
    const { clock, pending, taken } = setup(2);
    const p1 = pending.add("elicitation", "srv", elicitParams);
    pending.add("sampling", "srv", samplingParams).catch(() => undefined);
    await taken();
    await assert.rejects(settle(pending.add("elicitation", "srv", elicitParams)), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.LIMIT_REACHED);
      assert.match(err.message, /max 2/);
      return true;
    });
    assert.equal(pending.size, 2);
    assert.equal(clock.pendingTimers, 2);
    assert.deepEqual(await taken(), []);

    // Answering one frees a slot.
    await pending.respond("elicitation", pending.list("elicitation")[0]!.requestId, elicitAnswer);
    await settle(p1);
    const p3 = pending.add("elicitation", "srv", elicitParams);
    assert.equal(pending.size, 2);
    await pending.close();
    await assert.rejects(settle(p3));
    assert.equal(clock.pendingTimers, 0);
  });

  test("close() rejects every request, emits no events, clears timers and listeners, deletes the records", async () => {
    const { clock, pending, taken, rows } = setup();
    const ctrl = new AbortController();
    const p1 = pending.add("elicitation", "a", elicitParams, ctrl.signal);
    const p2 = pending.add("sampling", "b", samplingParams);
    await taken();
    await pending.close("bye");
    await assert.rejects(settle(p1), /bye/);
    await assert.rejects(settle(p2), /bye/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
    assert.deepEqual(await taken(), []);
    assert.deepEqual(await rows(), []);
    // Nothing fires later.
    clock.advance(TIMEOUT * 2);
    assert.deepEqual(await taken(), []);
  });

  test("close({ keepRecords }) (a gateway shutdown) keeps the records for the next start to withdraw", async () => {
    const { pending, taken, rows } = setup();
    const p = pending.add("elicitation", "a", elicitParams);
    await taken();
    await pending.close("gateway shutdown", { keepRecords: true });
    await assert.rejects(settle(p), /gateway shutdown/);
    assert.equal((await rows()).length, 1);
  });

  test("close() uses 'session closed' as the default reason", async () => {
    const { pending } = setup();
    const p = pending.add("elicitation", "a", elicitParams);
    await pending.close();
    await assert.rejects(settle(p), /session closed/);
  });
});
