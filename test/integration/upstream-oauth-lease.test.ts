/**
 * The refresh lease's heartbeat (issue 23, docs/adr/0027 §17): two replicas (two UpstreamOAuth, each on its own
 * connection to one real SQLite file) renew one person's grant at once through an authorization server
 * (oidc-provider) whose token endpoint the test holds far longer than the lease. The holder renews its lease, so the
 * other replica waits for its grant instead of refreshing with the same refresh token; a lease whose holder stopped
 * renewing (died) is taken over; a token endpoint that never answers ends the renewal at refreshTimeoutMs, the grant kept.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { systemClock, type Clock } from "../../src/clock.js";
import { GatewayError } from "../../src/errors.js";
import type { Store } from "../../src/store/contracts.js";
import { openStore } from "../../src/store/open.js";
import { parseKeys } from "../../src/upstream/auth/keyring.js";
import { UpstreamOAuth, type UpstreamAuthTarget } from "../../src/upstream/auth/upstream-oauth.js";
import { CredentialVault, Vault } from "../../src/upstream/auth/vault.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { startProtectedServer, type ProtectedServer } from "../fixtures/oauth-protected-server.js";
import { eventually } from "../helpers/async-extra.js";
import { followAuthorization, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";

const REDIRECT = "http://127.0.0.1:1/oauth/callback";
const ALICE = { issuer: "https://idp.example", subject: "alice" };
/** Short, so that a held token request outlasts it several times over. */
const LEASE_MS = 1_500;

let as: TestOidcProvider;
let upstream: ProtectedServer;
let dir: string;
const stores: Store[] = [];
let replicas: [UpstreamOAuth, UpstreamOAuth];

/** Token requests the test holds: each waits until released (or the test ends). */
const gate = {
  holding: false,
  held: [] as Array<{ at: number; release: () => void; drop: () => void }>,
  seen: 0,
};

function target(upstreamName: string): UpstreamAuthTarget {
  return { owner: ALICE, upstream: upstreamName, url: upstream.url, config: { type: "oauth", scopes: ["mcp:tools", "offline_access"] } };
}

before(async () => {
  as = await startOidcProvider({
    scopes: ["mcp:tools"],
    intercept: async (req, res) => {
      if (!gate.holding || req.method !== "POST" || !req.url?.startsWith("/token")) return;
      gate.seen++;
      // drop(): the provider never sees the request (the connection is cut and the gate never opens).
      await new Promise<void>((release) => gate.held.push({ at: Date.now(), release, drop: () => res.destroy() }));
    },
  });
  upstream = await startProtectedServer({ issuer: as.issuer, scopes: ["mcp:tools", "offline_access"] });
  dir = await mkdtemp(path.join(tmpdir(), "emceepee-lease-"));
  replicas = [await replica(60_000), await replica(60_000)];
});

const KEYS = randomBytes(32).toString("base64");

/** A replica: its own connection to the shared SQLite file, the same vault keys. */
async function replica(refreshTimeoutMs: number, clock: Clock = systemClock): Promise<UpstreamOAuth> {
  const store = await openStore({ kind: "sqlite", path: path.join(dir, "store.db") }, { clock });
  stores.push(store);
  const vault = new CredentialVault(new Vault(parseKeys(KEYS, "test")), store.credentials, () => clock.now());
  // Every use renews: the provider's access tokens live 600 s.
  return new UpstreamOAuth({
    vault,
    flows: store.oauthFlows,
    clock,
    redirectUrl: REDIRECT,
    refreshAheadMs: 700_000,
    leases: store.leases,
    refreshLeaseMs: LEASE_MS,
    refreshTimeoutMs,
  });
}

after(async () => {
  gate.holding = false;
  for (const h of gate.held) h.release();
  for (const s of stores) await s.close();
  await upstream?.close();
  await as?.close();
  await rm(dir, { recursive: true, force: true });
});

/** Alice consents once for `name`, through replica A; the grant is then in the shared store. */
async function grant(name: string, oauth: UpstreamOAuth = replicas[0]): Promise<void> {
  const err = await oauth.accessToken(target(name)).then(
    () => assert.fail("expected EMCP_CONSENT_REQUIRED"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof GatewayError && err.code === "EMCP_CONSENT_REQUIRED", String(err));
  const back = await followAuthorization(new URL(String(err.details?.["authorizationUrl"])), "alice", REDIRECT);
  assert.deepEqual(await oauth.complete(back.searchParams, ALICE, () => target(name)), { upstream: name });
}

function releaseAll(): void {
  gate.holding = false;
  for (const h of gate.held.splice(0)) h.release();
}

/** Cuts the held token requests: an abandoned refresh the provider then processed would redeem the refresh token (ADR 0027 §17, limits). */
function dropAll(): void {
  gate.holding = false;
  for (const h of gate.held.splice(0)) h.drop();
}

test("a refresh slower than the lease: the holder keeps renewing it, the other replica waits for its grant; one refresh serves both", async () => {
  await grant("slow");
  gate.seen = 0;
  gate.holding = true;
  const [a, b] = replicas;
  const both = Promise.all([a.accessToken(target("slow")), b.accessToken(target("slow"))]);
  const first = await eventually("the first refresh at the token endpoint", () => gate.held[0]);
  // Three lease times with the refresh held (an unrenewed lease would have lapsed twice), or a second refresh.
  await eventually(
    "three lease times pass, or a second refresh arrives",
    () => (gate.seen > 1 || Date.now() > first.at + 3 * LEASE_MS ? true : undefined),
    60_000,
  );
  assert.equal(gate.seen, 1, "the other replica did not refresh while the holder's refresh was running");
  releaseAll();
  const [tokenA, tokenB] = await both;
  assert.equal(tokenA, tokenB, "both replicas use the one refreshed grant");
  assert.equal(gate.seen, 1);
});

test("a lease whose holder stopped renewing (it died) lapses: the other replica takes it and refreshes", async () => {
  await grant("orphaned");
  const key = `oauth-refresh:${JSON.stringify([ALICE.issuer, ALICE.subject, "orphaned"])}`;
  // A replica took the lease and died: nobody renews it.
  assert.equal(await stores[0]!.leases.acquire(key, "a dead replica", Date.now(), LEASE_MS), true);
  const started = Date.now();
  const token = await replicas[1].accessToken(target("orphaned"));
  assert.ok(token.length > 0);
  assert.ok(Date.now() - started >= LEASE_MS - 100, "it waited for the dead replica's lease to lapse");
  assert.equal(await stores[0]!.leases.acquire(key, "next", Date.now(), LEASE_MS), true, "and gave it back after its refresh");
});

test("a token endpoint that never answers: the renewal ends at refreshTimeoutMs with EMCP_UPSTREAM_AUTH_FAILED, the grant kept, the lease given back", async () => {
  const store = stores[0]!;
  const oauth = await replica(2_000);
  await grant("hung", oauth);
  gate.holding = true;
  const err = await oauth.accessToken(target("hung")).then(
    () => assert.fail("expected EMCP_UPSTREAM_AUTH_FAILED"),
    (e: unknown) => e,
  );
  // Released, the abandoned request would rotate the refresh token at the provider, racing the call below.
  dropAll();
  assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
  assert.match(err.message, /did not answer within 2 s \(nothing stored was changed\)/);
  const key = `oauth-refresh:${JSON.stringify([ALICE.issuer, ALICE.subject, "hung"])}`;
  assert.equal(await store.leases.acquire(key, "next", Date.now(), LEASE_MS), true, "the lease was given back");
  await store.leases.release(key, "next");
  // The grant is still there: the next call refreshes with it, no consent asked.
  assert.ok((await oauth.accessToken(target("hung"))).length > 0);
});

test("no timer is left after a renewal, refreshed or timed out (the heartbeat and the bound on the injected clock)", async () => {
  const clock = new ManualClock(Date.now());
  const oauth = await replica(60_000, clock);
  await grant("timers", oauth);
  assert.ok((await oauth.accessToken(target("timers"))).length > 0, "refreshed");
  assert.equal(clock.pendingTimers, 0, "after a refresh");
  gate.holding = true;
  const failed = oauth.accessToken(target("timers")).then(
    () => assert.fail("expected EMCP_UPSTREAM_AUTH_FAILED"),
    (e: unknown) => e,
  );
  await eventually("the refresh held at the token endpoint", () => gate.held[0]);
  assert.equal(clock.pendingTimers, 2, "the heartbeat and the bound while it runs");
  clock.advance(60_000);
  const err = await failed;
  dropAll();
  assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
  await eventually("every timer cleared", () => (clock.pendingTimers === 0 ? true : undefined), 10_000);
});
