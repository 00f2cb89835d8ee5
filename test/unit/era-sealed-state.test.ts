/**
 * Bridge 1's sealed requestState (src/upstream/modern/sealed-state.ts): what
 * the gateway seals opens only for the same upstream, principal, method and
 * arguments, unchanged, before its expiry, on any holder of the same secret;
 * opened once, it is refused by every sealer marking uses in the same store.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { RequestStateSealer, type StateBinding } from "../../src/upstream/modern/sealed-state.js";
import { GatewayError } from "../../src/errors.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { createMemoryStore } from "../../src/store/memory/index.js";

const binding: StateBinding = { upstream: "modern", principal: "alice", method: "tools/call", params: { name: "deploy", arguments: { env: "prod", n: 1 } } };
const refusedWith = (fn: () => unknown, words: RegExp) =>
  assert.throws(
    fn,
    (err: unknown) =>
      err instanceof GatewayError && err.code === "EMCP_BAD_REQUEST_STATE" && /Invalid or expired requestState/.test(err.message) && words.test(err.message),
  );

test("a sealed state opens for the same call on another replica, whatever the key order or _meta of the retry", () => {
  const secret = randomBytes(32);
  const sealed = new RequestStateSealer(secret).seal(binding, "upstream-state-1");
  assert.ok(!sealed.includes("upstream-state-1"), "the upstream's state is not readable by the client");
  const retry = { ...binding, params: { arguments: { n: 1, env: "prod" }, name: "deploy", _meta: { x: 1 }, inputResponses: { a: {} }, requestState: sealed } };
  assert.equal(new RequestStateSealer(secret).open(sealed, retry), "upstream-state-1");
  assert.equal(new RequestStateSealer(secret).open(new RequestStateSealer(secret).seal(binding, undefined), binding), undefined);
});

test("a changed, foreign, replayed-elsewhere or expired state is refused", () => {
  const clock = new ManualClock();
  const sealer = new RequestStateSealer(randomBytes(32), { ttlMs: 60_000, clock });
  const sealed = sealer.seal(binding, "s");
  const body = Buffer.from(sealed.slice("emcp1.".length), "base64url");
  body[20] = body[20]! ^ 1;
  refusedWith(() => sealer.open(`emcp1.${body.toString("base64url")}`, binding), /integrity/);
  refusedWith(() => sealer.open("s", binding), /not issued by this gateway/);
  refusedWith(() => new RequestStateSealer(randomBytes(32)).open(sealed, binding), /integrity/);
  refusedWith(() => sealer.open(sealed, { ...binding, principal: "mallory" }), /another call/);
  refusedWith(() => sealer.open(sealed, { ...binding, upstream: "other" }), /another call/);
  refusedWith(() => sealer.open(sealed, { ...binding, params: { name: "deploy", arguments: { env: "dev", n: 1 } } }), /another call/);
  assert.equal(sealer.open(sealed, binding), "s");
  clock.advance(60_001);
  refusedWith(() => sealer.open(sealed, binding), /expired/);
});

test("a state opened once is refused the second time, by any sealer sharing the store, and a parked handle is not an upstream state", async () => {
  const secret = randomBytes(32);
  const used = createMemoryStore(new ManualClock()).singleUse;
  const sealer = new RequestStateSealer(secret, { used });
  const sealed = sealer.seal(binding, "s");
  assert.equal(await sealer.openOnce(sealed, binding), "s");
  await assert.rejects(sealer.openOnce(sealed, binding), /used already/);
  await assert.rejects(new RequestStateSealer(secret, { used }).openOnce(sealed, binding), /used already/, "another replica on the same store");
  await assert.rejects(new RequestStateSealer(secret).openOnce(sealer.seal(binding, "t"), binding), /without a store/);
  const parked = sealer.seal(binding, "handle-1", "parked");
  assert.equal(RequestStateSealer.kindOf(parked), "parked");
  assert.equal(RequestStateSealer.kindOf(sealed), "upstream");
  assert.equal(sealer.open(parked, binding), "handle-1");
  // The kind is authenticated: relabelling a parked handle as an upstream state fails.
  refusedWith(() => sealer.open(`emcp1.${parked.slice("emcp1p.".length)}`, binding), /integrity/);
});
