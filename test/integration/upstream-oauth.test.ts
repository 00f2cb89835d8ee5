/**
 * The OAuth client for remote upstreams (src/upstream/auth/), in process
 * against real parts: oidc-provider on loopback as the authorization server
 * (dynamic registration, PKCE, resource indicators, refresh tokens), an MCP
 * server fixture that is its resource server, the SDK client on the
 * gateway's fetch. The test plays the person by following the authorization
 * URL headlessly (oidc-provider's dev login and consent pages).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { GatewayError } from "../../src/errors.js";
import type { Store } from "../../src/store/contracts.js";
import { openStore } from "../../src/store/open.js";
import { parseKeys } from "../../src/upstream/auth/keyring.js";
import { UpstreamOAuth, type UpstreamAuthTarget } from "../../src/upstream/auth/upstream-oauth.js";
import { CredentialVault, Vault } from "../../src/upstream/auth/vault.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { startProtectedServer, type ProtectedServer } from "../fixtures/oauth-protected-server.js";
import { followAuthorization, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";

const REDIRECT = "http://127.0.0.1:1/oauth/callback";
const ALICE = { issuer: "https://idp.example", subject: "alice" };
const BOB = { issuer: "https://idp.example", subject: "bob" };

let as: TestOidcProvider;
let upstream: ProtectedServer;
let store: Store;
let clock: ManualClock;
let oauth: UpstreamOAuth;
let vault: CredentialVault;
const TOKENS = { ...ALICE, upstream: "remote", slot: "oauth" };

function target(owner: { issuer: string; subject: string }): UpstreamAuthTarget {
  return { owner, upstream: "remote", url: upstream.url, config: { type: "oauth", scopes: ["mcp:tools", "offline_access"] } };
}

/** The CONSENT_REQUIRED error of a principal without a grant, and its authorization URL. */
async function consentUrl(owner: { issuer: string; subject: string }): Promise<URL> {
  const err = await oauth.accessToken(target(owner)).then(
    () => assert.fail("expected EMCP_CONSENT_REQUIRED"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof GatewayError && err.code === "EMCP_CONSENT_REQUIRED", String(err));
  return new URL(String(err.details?.authorizationUrl));
}

/** The person `user` consents at the authorization server; returns the callback query. */
async function consent(owner: { issuer: string; subject: string }, user = owner.subject): Promise<URLSearchParams> {
  return (await followAuthorization(await consentUrl(owner), user, REDIRECT)).searchParams;
}

async function whoami(owner: { issuer: string; subject: string }): Promise<string> {
  const client = new Client({ name: "t", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: oauth.fetchFor(target(owner), (u, i) => fetch(u, i)) }));
  try {
    const r = await client.callTool({ name: "whoami", arguments: {} });
    return (r.content as Array<{ text: string }>)[0]!.text;
  } finally {
    await client.close();
  }
}

async function refused(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  const err = await p.then(
    () => assert.fail("expected a refusal"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
  assert.match(err.message, pattern);
}

before(async () => {
  as = await startOidcProvider({ scopes: ["mcp:tools"], accessTokenTTL: 300 });
  upstream = await startProtectedServer({ issuer: as.issuer, scopes: ["mcp:tools", "offline_access"] });
  clock = new ManualClock(Date.now());
  store = await openStore({ kind: "memory" }, { clock });
  vault = new CredentialVault(new Vault(parseKeys(randomBytes(32).toString("base64"), "test")), store.credentials, () => clock.now());
  oauth = new UpstreamOAuth({ vault, flows: store.oauthFlows, clock, redirectUrl: REDIRECT, refreshAheadMs: 60_000 });
});

after(async () => {
  await store.close();
  await upstream.close();
  await as.close();
});

describe("upstream OAuth client", () => {
  test("without a grant: CONSENT_REQUIRED with an authorization URL (PKCE S256, resource, state); after consent the call carries the person's own token", async () => {
    const url = await consentUrl(ALICE);
    assert.equal(url.origin, as.issuer);
    assert.equal(url.searchParams.get("code_challenge_method"), "S256");
    assert.equal(url.searchParams.get("resource"), upstream.url);
    assert.ok((url.searchParams.get("state") ?? "").length >= 32);
    const query = (await followAuthorization(url, "alice", REDIRECT)).searchParams;
    assert.equal(query.get("iss"), as.issuer, "the provider sends iss (RFC 9207)");
    assert.deepEqual(await oauth.complete(query, ALICE, () => target(ALICE)), { upstream: "remote" });
    assert.equal(await whoami(ALICE), "alice");
    const stored = await store.credentials.listByPrincipal(ALICE.issuer, ALICE.subject);
    assert.deepEqual(
      stored.map((r) => r.slot),
      ["oauth"],
    );
    assert.ok(stored[0]!.info?.scopes?.includes("mcp:tools"));
  });

  test("cross-principal: bob has no grant though alice has one; after his own consent each call carries its own principal's token", async () => {
    await consentUrl(BOB);
    await oauth.complete(await consent(BOB), BOB, () => target(BOB));
    const before = upstream.seen.length;
    assert.equal(await whoami(BOB), "bob");
    assert.equal(await whoami(ALICE), "alice");
    const subjects = new Set(upstream.seen.slice(before).map((s) => s.subject));
    assert.deepEqual([...subjects].sort(), ["alice", "bob"]);
  });

  test("a replayed callback, another person's callback, a wrong iss and an expired state are refused and store nothing", async () => {
    const carol = { issuer: ALICE.issuer, subject: "carol" };
    const query = await consent(carol);
    await refused(
      oauth.complete(query, BOB, () => target(BOB)),
      /another person.*still waiting/,
    );
    assert.deepEqual(await oauth.complete(query, carol, () => target(carol)), { upstream: "remote" }, "bob's attempt left carol's flow intact");
    await refused(
      oauth.complete(query, carol, () => target(carol)),
      /unknown, already used or expired state/,
    );
    assert.equal(await oauth.disconnect({ owner: carol, upstream: "remote" }), true);
    const again = await consent(carol);
    again.set("iss", "https://evil.example");
    await refused(
      oauth.complete(again, carol, () => target(carol)),
      /RFC 9207/,
    );
    const late = await consent(carol);
    clock.advance(11 * 60_000);
    await refused(
      oauth.complete(late, carol, () => target(carol)),
      /expired state/,
    );
    assert.deepEqual(await store.credentials.listByPrincipal(carol.issuer, carol.subject), []);
  });

  test("RFC 9207 as decided at the flow's start: a callback without iss is refused on another replica even when the server's metadata cannot be fetched there", async () => {
    const meta = (await (await fetch(`${as.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    assert.equal(meta["authorization_response_iss_parameter_supported"], true, "the provider advertises iss");
    const dave = { issuer: ALICE.issuer, subject: "dave" };
    const query = await consent(dave);
    query.delete("iss");
    // Another replica, where the authorization server's metadata cannot be fetched (a blip) until the code exchange's own discovery starts.
    let exchanging = false;
    const replica = new UpstreamOAuth({
      vault,
      flows: store.oauthFlows,
      clock,
      redirectUrl: REDIRECT,
      fetch: (url, init) => {
        if (String(url).includes("oauth-protected-resource")) exchanging = true;
        else if (!exchanging && String(url).startsWith(as.issuer)) return Promise.reject(new TypeError("fetch failed"));
        return fetch(url, init);
      },
    });
    await refused(
      replica.complete(query, dave, () => target(dave)),
      /names issuer \(none\).*RFC 9207/,
    );
    assert.deepEqual(await store.credentials.listByPrincipal(dave.issuer, dave.subject), []);
  });

  test("the callback's error and error_description are shown bounded, without control characters, quoted", async () => {
    const erin = { issuer: ALICE.issuer, subject: "erin" };
    const url = await consentUrl(erin);
    const query = new URLSearchParams({
      state: url.searchParams.get("state")!,
      error: "access_denied\u001b[31m\nFORGED LOG LINE",
      error_description: `no\r\n2026-01-01 INFO forged <script>x</script>${"A".repeat(5000)}`,
    });
    const err = await oauth
      .complete(query, erin, () => target(erin))
      .then(
        () => assert.fail("expected a refusal"),
        (e: unknown) => e,
      );
    assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
    assert.ok(err.message.length < 600, `bounded (${err.message.length} characters)`);
    assert.ok(![...err.message].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f), "no control characters");
    assert.match(err.message, /answered "access_denied\[31mFORGED LOG LINE": "no2026-01-01 INFO forged <script>x<\/script>A+…"/);
  });

  test("refresh ahead of expiry: a token within refreshAheadMs of expiring is replaced by the refresh token's new one", async () => {
    const first = await oauth.accessToken(target(ALICE));
    assert.equal(await oauth.accessToken(target(ALICE)), first, "not yet due");
    clock.advance(300_000 - 30_000);
    const second = await oauth.accessToken(target(ALICE));
    assert.notEqual(second, first);
    assert.equal(await whoami(ALICE), "alice");
  });

  test("on a 401 the token is refreshed once and the call retried", async () => {
    const tokens = await vault.get<Record<string, unknown>>(TOKENS);
    await vault.put(TOKENS, { ...tokens, access_token: "revoked-or-garbled" });
    const refusedBefore = upstream.refused;
    assert.equal(await whoami(ALICE), "alice");
    assert.ok(upstream.refused > refusedBefore, "the upstream refused the old token first");
    assert.notEqual((await vault.get<{ access_token: string }>(TOKENS))?.access_token, "revoked-or-garbled");
  });

  test("a refresh the authorization server refuses (revoked grant): the grant is forgotten and the person is asked again", async () => {
    const tokens = await vault.get<Record<string, unknown>>(TOKENS);
    await vault.put(TOKENS, { ...tokens, refresh_token: "revoked-refresh-token", expires_at: clock.now() });
    await consentUrl(ALICE);
    assert.equal(await store.credentials.get(TOKENS), undefined);
    await oauth.complete(await consent(ALICE), ALICE, () => target(ALICE));
    assert.equal(await whoami(ALICE), "alice");
  });

  test("an authorization server that does not advertise PKCE S256 is refused before anything is sent to it", async () => {
    const { startFakeAuthorizationServer } = await import("../fixtures/oauth-protected-server.js");
    const fake = await startFakeAuthorizationServer({});
    const other = await startProtectedServer({ issuer: fake.issuer });
    try {
      const err = await oauth.accessToken({ owner: ALICE, upstream: "no-s256", url: other.url, config: { type: "oauth" } }).then(
        () => assert.fail("expected a refusal"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
      assert.match(err.message, /PKCE S256/);
      assert.deepEqual(
        fake.paths.filter((p) => !p.startsWith("/.well-known/")),
        [],
        "no registration or authorization request",
      );
    } finally {
      await other.close();
      await fake.close();
    }
  });

  test("client identity: a Client ID Metadata Document where the server advertises it (no registration), else dynamic registration, kept per authorization server", async () => {
    const { startFakeAuthorizationServer } = await import("../fixtures/oauth-protected-server.js");
    const doc = "https://gw.example/oauth/client-metadata.json";
    const withCimd = new UpstreamOAuth({ vault, flows: store.oauthFlows, clock, redirectUrl: REDIRECT, clientMetadataUrl: doc });
    const cimd = await startFakeAuthorizationServer({ codeChallengeMethods: ["S256"], clientIdMetadataDocuments: true });
    const plain = await startFakeAuthorizationServer({ codeChallengeMethods: ["S256"] });
    const cimdServer = await startProtectedServer({ issuer: cimd.issuer });
    const plainServer = await startProtectedServer({ issuer: plain.issuer });
    try {
      const err = await withCimd.accessToken({ owner: ALICE, upstream: "cimd", url: cimdServer.url, config: { type: "oauth" } }).then(
        () => assert.fail("expected EMCP_CONSENT_REQUIRED"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof GatewayError && err.code === "EMCP_CONSENT_REQUIRED", String(err));
      assert.equal(new URL(String(err.details?.authorizationUrl)).searchParams.get("client_id"), doc);
      assert.ok(!cimd.paths.includes("/register"), "no registration where the document is accepted");
      assert.equal(
        (await store.credentials.get({ issuer: "", subject: "", upstream: "cimd", slot: `client:${cimd.issuer}` }))?.upstream,
        "cimd",
        "kept per authorization server",
      );
      await refused(withCimd.accessToken({ owner: ALICE, upstream: "plain", url: plainServer.url, config: { type: "oauth" } }), /./);
      assert.ok(plain.paths.includes("/register"), "dynamic registration where the server does not advertise documents");
    } finally {
      await cimdServer.close();
      await plainServer.close();
      await cimd.close();
      await plain.close();
    }
  });

  test("metadata whose issuer differs from where it was found is refused (RFC 8414 exact match)", async () => {
    const { startFakeAuthorizationServer } = await import("../fixtures/oauth-protected-server.js");
    const fake = await startFakeAuthorizationServer({ codeChallengeMethods: ["S256"], issuer: "https://elsewhere.example" });
    const other = await startProtectedServer({ issuer: fake.issuer });
    try {
      const err = await oauth.accessToken({ owner: ALICE, upstream: "moved", url: other.url, config: { type: "oauth" } }).then(
        () => assert.fail("expected a refusal"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
      assert.match(err.message, /names issuer https:\/\/elsewhere\.example/);
    } finally {
      await other.close();
      await fake.close();
    }
  });
});
