import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import type { CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { IdGenerator } from "../../src/clock.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { EventSystem } from "../../src/session/event-system.js";
import { PendingRequests } from "../../src/session/pending-requests.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, settle, track } from "../helpers/promises.js";

function counterIds(prefix: string): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

const TIMEOUT = 10_000;

function setup(maxPerSession = 100) {
  const clock = new ManualClock();
  const events = new EventSystem({ maxEvents: 1000, warningThreshold: 0.8 }, clock, counterIds("ev"));
  const pending = new PendingRequests({ timeoutMs: TIMEOUT, maxPerSession }, events, clock, counterIds("req"));
  return { clock, events, pending };
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
  test("add emits <kind>_request, is listed, and respond resolves the promise", async () => {
    const { clock, events, pending } = setup();
    clock.advance(500);
    const p = pending.add("elicitation", "srv", elicitParams);
    assert.equal(pending.size, 1);
    assert.equal(clock.pendingTimers, 1);

    const [ev] = events.takeNew();
    assert.equal(ev?.type, "elicitation_request");
    assert.equal(ev?.server, "srv");
    const requestId = ev?.data["requestId"];
    assert.equal(typeof requestId, "string");
    assert.deepEqual(ev?.data["params"], elicitParams);

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

    const answered = pending.respond("elicitation", info.requestId, elicitAnswer);
    assert.equal(answered.requestId, info.requestId);
    assert.deepEqual(await settle(p), elicitAnswer);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(events.takeNew(), [], "answering emits no event");
  });

  test("sampling requests work the same way", async () => {
    const { clock, events, pending } = setup();
    const p = pending.add("sampling", "srv", samplingParams);
    const [ev] = events.takeNew();
    assert.equal(ev?.type, "sampling_request");
    const id = String(ev?.data["requestId"]);
    pending.respond("sampling", id, samplingAnswer);
    assert.deepEqual(await settle(p), samplingAnswer);
    assert.equal(clock.pendingTimers, 0);
  });

  test("list filters by kind and server", () => {
    const { pending } = setup();
    const ps = [pending.add("elicitation", "a", elicitParams), pending.add("elicitation", "b", elicitParams), pending.add("sampling", "a", samplingParams)];
    for (const p of ps) p.catch(() => undefined);
    assert.equal(pending.list("elicitation").length, 2);
    assert.deepEqual(
      pending.list("elicitation", "a").map((i) => i.server),
      ["a"],
    );
    assert.equal(pending.list("sampling", "a").length, 1);
    assert.equal(pending.list("sampling", "b").length, 0);
    pending.close();
  });

  test("timeout rejects the promise and emits <kind>_expired", async () => {
    const { clock, events, pending } = setup();
    const p = pending.add("elicitation", "srv", elicitParams);
    const state = track(p);
    const id = String(events.takeNew()[0]?.data["requestId"]);
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
    const evs = events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["elicitation_expired"],
    );
    assert.equal(evs[0]?.data["requestId"], id);
    assert.equal(evs[0]?.server, "srv");
    assert.throws(() => pending.respond("elicitation", id, elicitAnswer), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
  });

  test("sampling timeout emits sampling_expired", async () => {
    const { clock, events, pending } = setup();
    const p = pending.add("sampling", "srv", samplingParams);
    events.takeNew();
    clock.advance(TIMEOUT);
    await assert.rejects(settle(p), /sampling request timed out/);
    assert.deepEqual(
      events.takeNew().map((e) => e.type),
      ["sampling_expired"],
    );
    assert.equal(clock.pendingTimers, 0);
  });

  test("upstream abort signal withdraws the request: rejected, removed, timer and listener cleared", async () => {
    const { clock, events, pending } = setup();
    const ctrl = new AbortController();
    const p = pending.add("elicitation", "srv", elicitParams, ctrl.signal);
    const id = String(events.takeNew()[0]?.data["requestId"]);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 1);
    ctrl.abort();
    await assert.rejects(settle(p), /cancelled/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
    const evs = events.takeNew();
    assert.deepEqual(
      evs.map((e) => e.type),
      ["elicitation_expired"],
    );
    assert.equal(evs[0]?.data["requestId"], id);
    assert.equal(evs[0]?.data["reason"], "cancelled by the upstream");
    assert.throws(() => pending.respond("elicitation", id, elicitAnswer), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
  });

  test("answering removes the upstream abort listener; a later abort does nothing", async () => {
    const { clock, events, pending } = setup();
    const ctrl = new AbortController();
    const p = pending.add("elicitation", "srv", elicitParams, ctrl.signal);
    const id = String(events.takeNew()[0]?.data["requestId"]);
    pending.respond("elicitation", id, elicitAnswer);
    assert.deepEqual(await settle(p), elicitAnswer);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
    ctrl.abort();
    assert.deepEqual(events.takeNew(), []);
    assert.equal(clock.pendingTimers, 0);
  });

  test("regression: an upstream signal that is already aborted rejects at once, leaving nothing pending", async () => {
    // The upstream may cancel before the gateway registers the request; it used
    // to stay pending (and shown to the client) until the full timeout.
    const { clock, events, pending } = setup();
    const ctrl = new AbortController();
    ctrl.abort();
    await assert.rejects(settle(pending.add("elicitation", "srv", elicitParams, ctrl.signal)), /cancelled/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(events.takeNew(), [], "a request nobody will see emits no event");
  });

  test("rejectServer rejects only that server's requests, with <kind>_rejected events", async () => {
    const { clock, events, pending } = setup();
    const a1 = pending.add("elicitation", "a", elicitParams);
    const a2 = pending.add("sampling", "a", samplingParams);
    const b1 = track(pending.add("elicitation", "b", elicitParams));
    events.takeNew();
    assert.equal(clock.pendingTimers, 3);

    assert.equal(pending.rejectServer("a", "server a removed"), 2);
    await assert.rejects(settle(a1), /server a removed/);
    await assert.rejects(settle(a2), /server a removed/);
    await flush();
    assert.equal(b1.settled, false);
    assert.equal(pending.size, 1);
    assert.equal(pending.list("elicitation", "b").length, 1);
    assert.equal(clock.pendingTimers, 1, "only b's timer remains");

    const evs = events.takeNew();
    assert.deepEqual(evs.map((e) => e.type).sort(), ["elicitation_rejected", "sampling_rejected"]);
    for (const e of evs) {
      assert.equal(e.server, "a");
      assert.equal(e.data["reason"], "server a removed");
    }
    assert.equal(pending.rejectServer("nobody", "x"), 0);
    pending.close();
    assert.equal(clock.pendingTimers, 0);
  });

  test("respond to an unknown id or the wrong kind throws EMCP_UNKNOWN_REQUEST and keeps the request", async () => {
    const { clock, events, pending } = setup();
    const p = pending.add("elicitation", "srv", elicitParams);
    const id = String(events.takeNew()[0]?.data["requestId"]);

    assert.throws(
      () => pending.respond("elicitation", "no-such-id", elicitAnswer),
      (err: unknown) => {
        assert.ok(err instanceof GatewayError);
        assert.equal(err.code, ErrorCodes.UNKNOWN_REQUEST);
        assert.match(err.message, /no-such-id/);
        assert.match(err.message, /get_elicitations/);
        return true;
      },
    );
    assert.throws(
      () => pending.respond("sampling", id, samplingAnswer),
      (err: unknown) => {
        assert.ok(err instanceof GatewayError);
        assert.equal(err.code, ErrorCodes.UNKNOWN_REQUEST);
        assert.match(err.message, /get_sampling_requests/);
        return true;
      },
    );
    assert.throws(() => pending.get("sampling", id), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
    assert.throws(() => pending.reject("sampling", id, "no"), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));

    assert.equal(pending.size, 1, "a failed respond leaves the request pending");
    assert.equal(clock.pendingTimers, 1);
    pending.respond("elicitation", id, elicitAnswer);
    assert.deepEqual(await settle(p), elicitAnswer);
    assert.throws(() => pending.respond("elicitation", id, elicitAnswer), isGatewayError(ErrorCodes.UNKNOWN_REQUEST));
  });

  test("reject() on the client's behalf rejects with the reason and clears the timer", async () => {
    const { clock, events, pending } = setup();
    const p = pending.add("elicitation", "srv", elicitParams);
    const id = String(events.takeNew()[0]?.data["requestId"]);
    pending.reject("elicitation", id, "user declined");
    await assert.rejects(settle(p), /user declined/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test("maxPerSession: the next add rejects with EMCP_LIMIT_REACHED, without a timer or event", async () => {
    const { clock, events, pending } = setup(2);
    const p1 = pending.add("elicitation", "srv", elicitParams);
    pending.add("sampling", "srv", samplingParams).catch(() => undefined);
    events.takeNew();
    await assert.rejects(settle(pending.add("elicitation", "srv", elicitParams)), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.LIMIT_REACHED);
      assert.match(err.message, /max 2/);
      return true;
    });
    assert.equal(pending.size, 2);
    assert.equal(clock.pendingTimers, 2);
    assert.deepEqual(events.takeNew(), []);

    // Answering one frees a slot.
    pending.respond("elicitation", pending.list("elicitation")[0]!.requestId, elicitAnswer);
    await settle(p1);
    const p3 = pending.add("elicitation", "srv", elicitParams);
    assert.equal(pending.size, 2);
    pending.close();
    await assert.rejects(settle(p3));
    assert.equal(clock.pendingTimers, 0);
  });

  test("close() rejects every request, emits no events, clears timers and listeners", async () => {
    const { clock, events, pending } = setup();
    const ctrl = new AbortController();
    const p1 = pending.add("elicitation", "a", elicitParams, ctrl.signal);
    const p2 = pending.add("sampling", "b", samplingParams);
    events.takeNew();
    pending.close("bye");
    await assert.rejects(settle(p1), /bye/);
    await assert.rejects(settle(p2), /bye/);
    assert.equal(pending.size, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ctrl.signal, "abort").length, 0);
    assert.deepEqual(events.takeNew(), []);
    // Nothing fires later.
    clock.advance(TIMEOUT * 2);
    assert.deepEqual(events.takeNew(), []);
  });

  test("close() uses 'session closed' as the default reason", async () => {
    const { pending } = setup();
    const p = pending.add("elicitation", "a", elicitParams);
    pending.close();
    await assert.rejects(settle(p), /session closed/);
  });
});
