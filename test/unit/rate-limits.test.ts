/**
 * Rate limits (gateway.rateLimits, docs/adr/0023): the token-bucket arithmetic
 * and the limiter's choice of buckets, its refusal and its log line, on a
 * memory store with a manual clock (the store backends' own cases are in
 * test/store/contract-rate-limits.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { makePrincipal } from "../../src/auth/principal.js";
import { rateLimitSchema } from "../../src/config/rate-limits.js";
import { gatewaySettingsSchema } from "../../src/config/schema.js";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../../src/errors.js";
import { RateLimiter } from "../../src/governance/rate-limits.js";
import { createLogger } from "../../src/logging.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { idleUntil, msUntilToken, refilled, takeAll } from "../../src/store/token-bucket.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const alice = makePrincipal({ issuer: "https://idp.example", subject: "alice", scopes: [], claims: {} });
const bob = makePrincipal({ issuer: "https://idp.example", subject: "bob", scopes: [], claims: {} });

function limiter(limits: unknown[]) {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const settings = limits.map((l) => rateLimitSchema.parse(l));
  const rl = new RateLimiter(settings, { clock, logger: createLogger("info", sink), store: () => store });
  const scopes: string[] = [];
  rl.onLimited = (scope) => scopes.push(scope);
  return { rl, clock, lines, scopes };
}

async function refusal(p: Promise<void>): Promise<GatewayError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof GatewayError);
    return err;
  }
  assert.fail("the call was not refused");
}

test("bucket arithmetic: refill by elapsed time up to capacity, the wait for one token, when a bucket is full again", () => {
  const spec = { key: "k", capacity: 4, refillPerSecond: 2 };
  assert.equal(refilled(undefined, spec, 0), 4);
  assert.equal(refilled({ tokens: 0, at: 1000 }, spec, 1500), 1);
  assert.equal(refilled({ tokens: 0, at: 1000 }, spec, 100_000), 4);
  assert.equal(refilled({ tokens: 1, at: 1000 }, spec, 500), 1, "a clock behind refills nothing");
  assert.equal(msUntilToken(0, spec), 500);
  assert.equal(msUntilToken(0.5, spec), 250);
  assert.equal(idleUntil(0, spec, 1000), 3000);
  const r = takeAll(
    [
      { tokens: 3, at: 0 },
      { tokens: 0.25, at: 0 },
    ],
    [spec, { ...spec, key: "j" }],
    0,
  );
  assert.deepEqual({ ok: r.ok, refused: r.refused, retryAfterMs: r.retryAfterMs, next: r.next }, { ok: false, refused: 1, retryAfterMs: 375, next: [] });
});

test("config: exactly one refill rate; off by default", () => {
  assert.throws(() => rateLimitSchema.parse({ scope: "global", capacity: 1 }), /exactly one of refillPerSecond or refillPerMinute/);
  assert.throws(() => rateLimitSchema.parse({ scope: "global", capacity: 1, refillPerSecond: 1, refillPerMinute: 60 }), /exactly one/);
  assert.throws(() => rateLimitSchema.parse({ scope: "nobody", capacity: 1, refillPerSecond: 1 }));
  assert.deepEqual(gatewaySettingsSchema.parse({}).rateLimits, []);
});

test("a principal+tool limit throttles one caller's tool while another caller and other tools continue; refills with the clock", async () => {
  const { rl, clock, lines, scopes } = limiter([{ name: "search-per-user", scope: "principal+tool", tool: "search", capacity: 2, refillPerMinute: 6 }]);
  const call = (principal: typeof alice | undefined, tool = "search") => rl.take({ principal, server: "web", tool });
  await call(alice);
  await call(alice);
  const err = await refusal(call(alice));
  assert.equal(err.code, ErrorCodes.RATE_LIMITED);
  assert.deepEqual(err.details, { retryAfterSeconds: 10, retry_after_ms: 10_000, limit: "search-per-user", scope: "principal+tool" });
  assert.match(err.message, /'search-per-user'.*retry after 10 s/);
  const rpc = toJsonRpcError(err);
  assert.equal((rpc.data as { retryAfterSeconds: number }).retryAfterSeconds, 10);
  // Others go on: another principal, another tool, no principal at all.
  await call(bob);
  await call(alice, "fetch");
  await call(undefined);
  assert.deepEqual(scopes, ["principal+tool"]);
  const logged = lines.find((l) => l.msg === "rate_limited");
  assert.equal(logged?.principalHash, alice.hash);
  assert.ok(!JSON.stringify(logged).includes("alice"), "the log names the principal's hash, never who");
  clock.advance(9_999);
  await refusal(call(alice));
  clock.advance(1);
  await call(alice);
});

test("every matching limit must have a token; a refusal takes from none of them", async () => {
  const { rl } = limiter([
    { name: "all", scope: "global", capacity: 3, refillPerSecond: 0.001 },
    { name: "slow-server", scope: "server", server: "slow*", capacity: 1, refillPerSecond: 0.001 },
    { name: "only-bob", scope: "principal", principal: { subject: "b*" }, capacity: 100, refillPerSecond: 1 },
  ]);
  await rl.take({ principal: alice, server: "slow-one", tool: "t" });
  const err = await refusal(rl.take({ principal: alice, server: "slow-one", tool: "t" }));
  assert.equal(err.details?.limit, "slow-server");
  // The refused call took nothing from "all": two more calls elsewhere pass, then "all" refuses.
  await rl.take({ principal: alice, server: "fast", tool: "t" });
  await rl.take({ principal: bob, server: "fast", tool: "t" });
  assert.equal((await refusal(rl.take({ principal: bob, server: "fast", tool: "t" }))).details?.limit, "all");
  assert.equal(rl.bucketsOf({ principal: alice, server: "fast", tool: "t" }).length, 1, "only-bob does not count alice's calls");
  assert.equal(rl.bucketsOf({ principal: undefined, server: "fast", tool: "t" }).length, 1, "nor calls without a principal");
});
