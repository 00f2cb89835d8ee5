/** Contract cases for CredentialStore (the vault's sealed credentials) and OAuthFlowStore (started upstream OAuth flows); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { CredentialRecord, OAuthFlowRecord } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

function cred(subject: string, upstream: string, patch: Partial<CredentialRecord> = {}): CredentialRecord {
  return {
    issuer: "https://idp.example",
    subject,
    upstream,
    slot: "oauth",
    keyId: "k1",
    sealed: `sealed-${subject}-${upstream}`,
    info: { scopes: ["read"], expiresAt: 5000, authIssuer: "https://as.example" },
    updatedAt: 1000,
    ...patch,
  };
}

function flow(state: string, createdAt = 1000, ttlMs = 600_000): OAuthFlowRecord {
  return {
    state,
    issuer: "https://idp.example",
    subject: "alice",
    upstream: "remote",
    authIssuer: "https://as.example",
    clientId: "client-1",
    verifierSealed: `v-${state}`,
    keyId: "k1",
    redirectUri: "https://gw.example/oauth/callback",
    resource: "https://remote.example/mcp",
    scopes: ["read"],
    createdAt,
    expiresAt: createdAt + ttlMs,
  };
}

export function credentialContract(factory: StoreFactory): void {
  describe("vault credentials", () => {
    test("put, get, replace and delete per (principal, upstream, slot); other principals do not see it", () =>
      withStore(factory, async ({ store }) => {
        const a = cred("alice", "gh");
        await store.credentials.put(a);
        assert.deepEqual(await store.credentials.get(a), a);
        assert.equal(await store.credentials.get({ ...a, subject: "bob" }), undefined);
        assert.equal(await store.credentials.get({ ...a, slot: "secret:token" }), undefined);
        const replaced = { ...a, sealed: "other", keyId: "k2", updatedAt: 2000 };
        await store.credentials.put(replaced);
        assert.deepEqual(await store.credentials.get(a), replaced);
        assert.equal(await store.credentials.delete(a), true);
        assert.equal(await store.credentials.delete(a), false);
        assert.equal(await store.credentials.get(a), undefined);
      }));

    test("subjects that look like separators do not meet: ('a:b', 'c') is not ('a', 'b:c')", () =>
      withStore(factory, async ({ store }) => {
        await store.credentials.put(cred("a:b", "c"));
        assert.equal(await store.credentials.get({ issuer: "https://idp.example", subject: "a", upstream: "b:c", slot: "oauth" }), undefined);
        assert.deepEqual(await store.credentials.listByPrincipal("https://idp.example", "a"), []);
      }));

    test("listByPrincipal: the principal's own, by upstream then slot", () =>
      withStore(factory, async ({ store }) => {
        await store.credentials.put(cred("alice", "zeta"));
        await store.credentials.put(cred("alice", "alpha", { slot: "secret:key" }));
        await store.credentials.put(cred("alice", "alpha"));
        await store.credentials.put(cred("bob", "alpha"));
        const list = await store.credentials.listByPrincipal("https://idp.example", "alice");
        assert.deepEqual(
          list.map((r) => [r.upstream, r.slot]),
          [
            ["alpha", "oauth"],
            ["alpha", "secret:key"],
            ["zeta", "oauth"],
          ],
        );
      }));

    test("listNotSealedWith: what a rotation must re-seal, bounded by limit", () =>
      withStore(factory, async ({ store }) => {
        await store.credentials.put(cred("alice", "a", { keyId: "old" }));
        await store.credentials.put(cred("bob", "a", { keyId: "old" }));
        await store.credentials.put(cred("carol", "a", { keyId: "new" }));
        const stale = await store.credentials.listNotSealedWith("new", 10);
        assert.deepEqual(stale.map((r) => r.subject).sort(), ["alice", "bob"]);
        assert.equal((await store.credentials.listNotSealedWith("new", 1)).length, 1);
        assert.deepEqual(await store.credentials.listNotSealedWith("nothing-else", 0), []);
      }));

    test("replaceIf: replaces only while the stored value is still the one read; a fresher one (or none) is kept", () =>
      withStore(factory, async ({ store }) => {
        const read = cred("alice", "gh", { keyId: "old" });
        await store.credentials.put(read);
        const fresher = { ...read, sealed: "fresher", keyId: "new", updatedAt: 2000 };
        await store.credentials.put(fresher);
        const resealed = { ...read, sealed: "resealed-stale", keyId: "new", updatedAt: 3000 };
        assert.equal(await store.credentials.replaceIf(resealed, read.sealed), false);
        assert.deepEqual(await store.credentials.get(read), fresher);
        const resealedFresh = { ...fresher, sealed: "resealed", updatedAt: 3000 };
        assert.equal(await store.credentials.replaceIf(resealedFresh, fresher.sealed), true);
        assert.deepEqual(await store.credentials.get(read), resealedFresh);
        assert.equal(await store.credentials.replaceIf(cred("bob", "gh"), "anything"), false, "nothing stored: nothing replaced");
        assert.equal(await store.credentials.get(cred("bob", "gh")), undefined);
      }));
  });

  describe("started OAuth flows", () => {
    test("take returns a flow once: a replayed callback finds nothing", () =>
      withStore(factory, async ({ store }) => {
        const f = flow("S1");
        await store.oauthFlows.put(f, 10);
        assert.equal(await store.oauthFlows.count(), 1);
        assert.deepEqual(await store.oauthFlows.take("S1", 2000), f);
        assert.equal(await store.oauthFlows.take("S1", 2000), undefined);
        assert.equal(await store.oauthFlows.count(), 0);
      }));

    test("peek reads a flow without taking it; not an expired one", () =>
      withStore(factory, async ({ store }) => {
        const f = flow("S1", 1000, 1000);
        await store.oauthFlows.put(f, 10);
        assert.deepEqual(await store.oauthFlows.peek("S1", 1500), f);
        assert.deepEqual(await store.oauthFlows.peek("S1", 1500), f);
        assert.equal(await store.oauthFlows.peek("S1", 2000), undefined, "expiresAt 2000 ≤ now 2000");
        assert.equal(await store.oauthFlows.peek("unknown", 1500), undefined);
        assert.deepEqual(await store.oauthFlows.take("S1", 1500), f);
        assert.equal(await store.oauthFlows.peek("S1", 1500), undefined);
      }));

    test("concurrent takes of one flow: exactly one gets it", () =>
      withStore(factory, async ({ store }) => {
        await store.oauthFlows.put(flow("S1"), 10);
        const got = await Promise.all(Array.from({ length: 8 }, () => store.oauthFlows.take("S1", 2000)));
        assert.equal(got.filter((g) => g !== undefined).length, 1);
      }));

    test("expired flows are not returned; deleteExpired; bounded with the first to expire making room", () =>
      withStore(factory, async ({ store }) => {
        await store.oauthFlows.put(flow("old", 1000, 1000), 10);
        await store.oauthFlows.put(flow("new", 1000, 5000), 10);
        assert.equal(await store.oauthFlows.take("old", 2000), undefined, "expiresAt 2000 ≤ now 2000");
        assert.equal(await store.oauthFlows.deleteExpired(10_000), 1);
        await store.oauthFlows.put(flow("a", 1000), 2);
        await store.oauthFlows.put(flow("b", 1001), 2);
        await store.oauthFlows.put(flow("c", 1002), 2);
        assert.equal(await store.oauthFlows.count(), 2);
        assert.equal(await store.oauthFlows.take("a", 1500), undefined, "a expired first, so it made room");
        assert.equal((await store.oauthFlows.take("c", 1500))?.state, "c");
      }));

    test("flows and console logins are separate: the same state in both is two records", () =>
      withStore(factory, async ({ store }) => {
        await store.oauthFlows.put(flow("same"), 10);
        assert.equal(await store.logins.take("same", 2000), undefined);
        assert.equal(await store.logins.count(), 0);
        assert.equal((await store.oauthFlows.take("same", 2000))?.state, "same");
      }));
  });
}
