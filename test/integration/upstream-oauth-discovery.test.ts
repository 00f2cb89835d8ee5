/**
 * Discovery from the upstream's 401 (MCP authorization spec; the conformance
 * suite's auth/metadata-var3 and auth/scope-from-www-authenticate): a person
 * without a grant gets an authorization started from what the upstream's
 * WWW-Authenticate names, its Protected Resource Metadata URL (here at a
 * custom path, not at a well-known one) and its scope (ahead of the
 * resource's scopes_supported, SEP-835); after consent the call carries
 * their token. oidc-provider on loopback is the authorization server.
 */
import { after, before, test } from "node:test";
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
import { systemClock } from "../../src/clock.js";
import { startProtectedServer, type ProtectedServer } from "../fixtures/oauth-protected-server.js";
import { followAuthorization, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";

const REDIRECT = "http://127.0.0.1:1/oauth/callback";
const ALICE = { issuer: "https://idp.example", subject: "alice" };

let as: TestOidcProvider;
let upstream: ProtectedServer;
let store: Store;
let oauth: UpstreamOAuth;
let vault: CredentialVault;

before(async () => {
  as = await startOidcProvider({ scopes: ["mcp:tools", "mcp:admin"] });
  upstream = await startProtectedServer({
    issuer: as.issuer,
    scopes: ["mcp:tools", "mcp:admin"],
    prmPath: "/custom/metadata/location.json",
    challengeScope: "mcp:tools",
  });
  store = await openStore({ kind: "memory" }, { clock: systemClock });
  vault = new CredentialVault(new Vault(parseKeys(randomBytes(32).toString("base64"), "test")), store.credentials, () => Date.now());
  oauth = new UpstreamOAuth({ vault, flows: store.oauthFlows, clock: systemClock, redirectUrl: REDIRECT });
});

after(async () => {
  await store?.close();
  await upstream?.close();
  await as?.close();
});

test("the authorization starts from the 401's resource_metadata (a custom path) and scope; after consent the call carries the person's token", async () => {
  const target: UpstreamAuthTarget = { owner: ALICE, upstream: "remote", url: upstream.url, config: { type: "oauth" } };
  const client = new Client({ name: "t", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: oauth.fetchFor(target, (u, i) => fetch(u, i)) });
  const err = await client.connect(transport).then(
    () => assert.fail("expected EMCP_CONSENT_REQUIRED"),
    (e: unknown) => e,
  );
  await client.close();
  assert.ok(err instanceof GatewayError && err.code === "EMCP_CONSENT_REQUIRED", String(err));
  const url = new URL(String(err.details?.["authorizationUrl"]));
  assert.equal(url.origin, as.issuer, "the authorization server of the metadata the 401 pointed at");
  assert.equal(url.searchParams.get("scope"), "mcp:tools", "the 401's scope, not every scope the resource supports");
  assert.equal(url.searchParams.get("resource"), upstream.url);
  const back = await followAuthorization(url, "alice", REDIRECT);
  assert.deepEqual(await oauth.complete(back.searchParams, ALICE, () => target), { upstream: "remote" });
  const again = new Client({ name: "t", version: "1" });
  await again.connect(new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: oauth.fetchFor(target, (u, i) => fetch(u, i)) }));
  try {
    const r = await again.callTool({ name: "whoami", arguments: {} });
    assert.equal((r.content as Array<{ text: string }>)[0]!.text, "alice");
  } finally {
    await again.close();
  }
});

test("a callback completed on another replica (its own discovery state) finds the custom-path metadata the flow was started from", async () => {
  const target: UpstreamAuthTarget = { owner: ALICE, upstream: "remote-other", url: upstream.url, config: { type: "oauth" } };
  const client = new Client({ name: "t", version: "1" });
  const err = await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: oauth.fetchFor(target, (u, i) => fetch(u, i)) })).then(
    () => assert.fail("expected EMCP_CONSENT_REQUIRED"),
    (e: unknown) => e,
  );
  await client.close();
  assert.ok(err instanceof GatewayError && err.code === "EMCP_CONSENT_REQUIRED", String(err));
  const back = await followAuthorization(new URL(String(err.details?.["authorizationUrl"])), "alice", REDIRECT);
  // Replica 2: the same store and vault, nothing discovered in this process.
  const replica2 = new UpstreamOAuth({ vault, flows: store.oauthFlows, clock: systemClock, redirectUrl: REDIRECT });
  assert.deepEqual(await replica2.complete(back.searchParams, ALICE, () => target), { upstream: "remote-other" });
  const again = new Client({ name: "t", version: "1" });
  await again.connect(new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: replica2.fetchFor(target, (u, i) => fetch(u, i)) }));
  try {
    const r = await again.callTool({ name: "whoami", arguments: {} });
    assert.equal((r.content as Array<{ text: string }>)[0]!.text, "alice");
  } finally {
    await again.close();
  }
});

test("the upstream moves to another authorization server (SEP-2352): the refused token leads to discovery again, a new registration there, and a new consent; the old server's client is never sent to the new one", async () => {
  const as2 = await startOidcProvider({ scopes: ["mcp:tools", "mcp:admin"] });
  const moved = await startProtectedServer({ issuer: as.issuer, scopes: ["mcp:tools"] });
  const target: UpstreamAuthTarget = { owner: ALICE, upstream: "moving", url: moved.url, config: { type: "oauth" } };
  const connect = async (): Promise<unknown> => {
    const client = new Client({ name: "t", version: "1" });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(moved.url), { fetch: oauth.fetchFor(target, (u, i) => fetch(u, i)) }));
      const r = await client.callTool({ name: "whoami", arguments: {} });
      return (r.content as Array<{ text: string }>)[0]!.text;
    } catch (e) {
      return e;
    } finally {
      await client.close();
    }
  };
  const consentAt = async (err: unknown, issuer: string): Promise<URL> => {
    assert.ok(err instanceof GatewayError && err.code === "EMCP_CONSENT_REQUIRED", String(err));
    const url = new URL(String(err.details?.["authorizationUrl"]));
    assert.equal(url.origin, issuer);
    const back = await followAuthorization(url, "alice", REDIRECT);
    await oauth.complete(back.searchParams, ALICE, () => target);
    return url;
  };
  try {
    const first = await consentAt(await connect(), as.issuer);
    assert.equal(await connect(), "alice");
    moved.moveTo(as2.issuer);
    const second = await consentAt(await connect(), as2.issuer);
    assert.notEqual(second.searchParams.get("client_id"), first.searchParams.get("client_id"), "registered again at the new server");
    assert.equal(await connect(), "alice");
  } finally {
    await moved.close();
    await as2.close();
  }
});
