/**
 * First answer wins, and the loser hears who won (src/session/
 * pending-requests.ts): the console answers as "console", the meta tools as
 * "client"; the other side's late answer is refused with who answered, and
 * observers (the console) hear each answer without any event being stored.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ElicitRequest } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { EventSystem, type ObservedChange } from "../../src/session/event-system.js";
import { PendingRequests } from "../../src/session/pending-requests.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

const params: ElicitRequest["params"] = { message: "Name?", requestedSchema: { type: "object", properties: { name: { type: "string" } } } };

function setup() {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  let n = 0;
  const newId = () => `id-${String(++n).padStart(4, "0")}`;
  const events = new EventSystem("s1", { maxEvents: 100, warningThreshold: 0.8, maxTotal: 1000 }, store.events, clock, newId);
  const pending = new PendingRequests("s1", { timeoutMs: 60_000, maxPerSession: 10 }, store.pending, events, clock, newId);
  const heard: ObservedChange[] = [];
  events.observe((c) => heard.push(c));
  return { events, pending, heard, clock };
}

function refusal(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof GatewayError);
    return err;
  }
  assert.fail("expected a refusal");
}

test("answered in the console: the client's late answer is told so; observers hear it; no event is stored for it", async () => {
  const { events, pending, heard, clock } = setup();
  const answer = pending.add("elicitation", "srv", params);
  await flush();
  const [info] = pending.list("elicitation");
  assert.ok(info);
  await pending.respond("elicitation", info.requestId, { action: "accept", content: { name: "Ada" } }, "console");
  assert.deepEqual(await answer, { action: "accept", content: { name: "Ada" } });

  const late = refusal(() => pending.get("elicitation", info.requestId));
  assert.equal(late.code, ErrorCodes.UNKNOWN_REQUEST);
  assert.match(late.message, /already answered by a person in the web console \(accept\); the first answer wins/);
  assert.equal(pending.answeredBy(info.requestId), "console");
  assert.deepEqual(
    heard.map((c) => c.type),
    ["elicitation_request", "elicitation_answered"],
  );
  assert.deepEqual(heard[1]?.data, { requestId: info.requestId, by: "console", outcome: "accept" });
  await flush();
  assert.deepEqual(
    (await events.takeNew()).map((e) => e.type),
    ["elicitation_request"],
    "the answer is announced, not stored: the client's events are as before",
  );
  assert.equal(clock.pendingTimers, 0, "the request's timer is gone");
});

test("rejected by the client: the console's late answer is told so; an id nobody answered keeps the usual message", async () => {
  const { pending } = setup();
  const answer = pending.add("sampling", "srv", { messages: [], maxTokens: 10 });
  await flush();
  const [info] = pending.list("sampling");
  assert.ok(info);
  await pending.reject("sampling", info.requestId, "no thanks");
  await assert.rejects(answer, /no thanks/);
  assert.match(refusal(() => pending.get("sampling", info.requestId)).message, /already answered by this session's client \(rejected\)/);
  assert.match(refusal(() => pending.get("elicitation", info.requestId)).message, /no pending elicitation request/, "another kind: not this one");
  assert.match(refusal(() => pending.get("sampling", "nope")).message, /no pending sampling request 'nope' in this session/);
});
