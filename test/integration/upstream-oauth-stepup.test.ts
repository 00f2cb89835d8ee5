/**
 * Step-up authorization (src/upstream/auth/upstream-oauth.ts): an upstream
 * answering 403 `insufficient_scope` gets a new consent for the union of the
 * granted and the named scopes, the old grant serving meanwhile; a limit of
 * step-ups in a row, then a clear error. Real oidc-provider on loopback and
 * the protected MCP fixture with a tool that needs one more scope.
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

let as: TestOidcProvider;
let upstream: ProtectedServer;
let store: Store;
let oauth: UpstreamOAuth;

type Person = { issuer: string; subject: string };
const target = (owner: Person = ALICE): UpstreamAuthTarget => ({ owner, upstream: "remote", url: upstream.url, config: { type: "oauth" } });

/** Calls `tool` with alice's grant: its text, or the GatewayError the gateway's fetch threw. */
async function call(tool: string, owner: Person = ALICE): Promise<string | GatewayError> {
  const client = new Client({ name: "t", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: oauth.fetchFor(target(owner), (u, i) => fetch(u, i)) }));
  try {
    const r = await client.callTool({ name: tool, arguments: {} });
    return (r.content as Array<{ text: string }>)[0]!.text;
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  } finally {
    await client.close();
  }
}

function consentUrlOf(r: string | GatewayError): URL {
  assert.ok(r instanceof GatewayError && r.code === "EMCP_CONSENT_REQUIRED", String(r));
  return new URL(String(r.details?.authorizationUrl));
}

async function consentAndComplete(url: URL, owner: Person = ALICE): Promise<void> {
  const query = (await followAuthorization(url, owner.subject, REDIRECT)).searchParams;
  await oauth.complete(query, owner, () => target(owner));
}

before(async () => {
  as = await startOidcProvider({ scopes: ["mcp:tools", "mcp:admin"], accessTokenTTL: 300 });
  upstream = await startProtectedServer({ issuer: as.issuer, scopes: ["mcp:tools", "offline_access"], toolScopes: { admin: "mcp:admin", root: "mcp:root" } });
  const clock = new ManualClock(Date.now());
  store = await openStore({ kind: "memory" }, { clock });
  const vault = new CredentialVault(new Vault(parseKeys(randomBytes(32).toString("base64"), "test")), store.credentials, () => clock.now());
  oauth = new UpstreamOAuth({ vault, flows: store.oauthFlows, clock, redirectUrl: REDIRECT, maxStepUps: 2 });
});

after(async () => {
  await store.close();
  await upstream.close();
  await as.close();
});

describe("upstream OAuth step-up on insufficient_scope", () => {
  test("a tool needing one more scope: a new consent for the union of scopes; the old grant serves meanwhile; afterwards the tool works", async () => {
    const first = await oauth.accessToken(target()).then(
      () => assert.fail("expected EMCP_CONSENT_REQUIRED"),
      (e: unknown) => e as GatewayError,
    );
    await consentAndComplete(consentUrlOf(first));
    assert.equal(await call("whoami"), "alice");

    const stepUp = consentUrlOf(await call("admin"));
    assert.deepEqual(stepUp.searchParams.get("scope")?.split(" ").sort(), ["mcp:admin", "mcp:tools", "offline_access"], "the union of granted and required");
    assert.equal(await call("whoami"), "alice", "the current grant still serves other calls");
    await consentAndComplete(stepUp);
    assert.equal(await call("admin"), "granted");
    assert.equal(await call("whoami"), "alice");
  });

  test("step-ups in a row are limited: after maxStepUps that did not get their scopes a clear error; then a new one may start", async () => {
    const bob = { issuer: ALICE.issuer, subject: "bob" };
    const first = await oauth.accessToken(target(bob)).then(
      () => assert.fail("expected EMCP_CONSENT_REQUIRED"),
      (e: unknown) => e as GatewayError,
    );
    await consentAndComplete(consentUrlOf(first), bob);
    consentUrlOf(await call("admin", bob));
    consentUrlOf(await call("admin", bob));
    const err = await call("admin", bob);
    assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
    assert.match(err.message, /after 2 new authorizations in a row it still refuses with insufficient_scope \(now naming .*mcp:admin\)/);
    assert.equal(await call("whoami", bob), "bob", "the grant is intact");
    await consentAndComplete(consentUrlOf(await call("admin", bob)), bob);
    assert.equal(await call("admin", bob), "granted");
  });

  test("a scope the authorization server does not support: a clear error naming the server", async () => {
    const err = await call("root");
    assert.ok(err instanceof GatewayError && err.code === "EMCP_UPSTREAM_AUTH_FAILED", String(err));
    assert.match(err.message, /server remote/);
  });
});
