/**
 * Token exchange (RFC 8693) per upstream (issue 23, docs/adr/0027 §16) through a real gateway: oidc-provider on
 * loopback issues the people's inbound tokens (audience: the gateway) and, with a token-exchange grant registered for
 * the gateway's own client, exchanges them for tokens of the protected MCP upstream (audience: its URL), which checks
 * issuer and audience and answers the subject. Each person's calls carry their own exchanged token (own and shared
 * connections), never the inbound one; an exchanged token is reused until shortly before it expires, then exchanged
 * again; a 401 from the upstream exchanges once more; the provider's refusal and a static-token caller get
 * EMCP_UPSTREAM_AUTH_FAILED naming the server and the fix; no token is ever logged; concurrent calls make one exchange and
 * the cache is bounded; bad config is refused at load.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createRemoteJWKSet, decodeJwt, jwtVerify } from "jose";
import { errors, type KoaContextWithOIDC } from "oidc-provider";
import { parseConfig } from "../../src/config/load.js";
import { createLogger } from "../../src/logging.js";
import { systemClock } from "../../src/clock.js";
import { ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT, TokenExchanges, type ExchangeTarget } from "../../src/upstream/auth/token-exchange.js";
import { startProtectedServer, type ProtectedServer } from "../fixtures/oauth-protected-server.js";
import { freePort } from "../helpers/core-extra.js";
import { call, startGateway, type TestGateway } from "../helpers/gateway.js";
import { loginAndConnect, MemoryOAuthClient } from "../helpers/oauth-client.js";
import { IDENTITY_SCOPE, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { eventually } from "../helpers/async-extra.js";

const CLIENT_ID = "gateway-exchange";
const CLIENT_SECRET = "exchange-client-secret-0123456789";
const STATIC = "static-gateway-token-0123456789abcdef";
const REDIRECT = "http://127.0.0.1:65504/callback";
/** Exchanged tokens live 40 s and are renewed 34 s ahead: reused for about 6 s. */
const TTL_S = 40;
const AHEAD_MS = 34_000;

let idp: TestOidcProvider;
let upstream: ProtectedServer;
let gw: TestGateway;
let dir: string;
const clients: Record<string, Client> = {};
const inbound: Record<string, string> = {};
const logText: string[] = [];
/** Every exchange the provider answered: whose token, for which resource. */
const exchanges: Array<{ subject: string; resource: string; scope: string | undefined }> = [];
/** The next exchange issues a token for another audience (the upstream answers 401). */
let wrongAudienceOnce = false;

const exchangesOf = (subject: string, resource = upstream.url) => exchanges.filter((e) => e.subject === subject && e.resource === resource).length;

/** Registers RFC 8693 at the provider for the gateway's client: the subject token must be one of its own access tokens for the gateway. */
function registerTokenExchange(gatewayResource: string): void {
  const jwks = createRemoteJWKSet(new URL(`${idp.issuer}/jwks`));
  const handler = async (ctx: KoaContextWithOIDC) => {
    const p = ctx.oidc.params as Record<string, string | undefined>;
    if (p.subject_token_type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest("subject_token_type must be an access token");
    let sub: string;
    try {
      sub = (await jwtVerify(p.subject_token ?? "", jwks, { issuer: idp.issuer, audience: gatewayResource })).payload.sub!;
    } catch {
      throw new errors.InvalidGrant("the subject token is not an access token of this provider for the gateway");
    }
    const resource = p.resource ?? "";
    if (resource !== upstream.url) throw new errors.InvalidTarget(`no exchange for ${resource}`);
    exchanges.push({ subject: sub, resource, scope: p.scope });
    const audience = wrongAudienceOnce ? "https://elsewhere.example/mcp" : resource;
    wrongAudienceOnce = false;
    const at = new idp.provider.AccessToken({
      accountId: sub,
      client: ctx.oidc.client,
      scope: IDENTITY_SCOPE,
      gty: "token-exchange",
      expiresIn: TTL_S,
      resourceServer: {
        audience,
        scope: IDENTITY_SCOPE,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: "ES256" } },
        identifier: () => resource,
      },
    });
    ctx.body = { access_token: await at.save(), issued_token_type: ACCESS_TOKEN_TYPE, token_type: "Bearer", expires_in: TTL_S, scope: IDENTITY_SCOPE };
  };
  const params = ["subject_token", "subject_token_type", "requested_token_type", "audience", "resource", "scope", "actor_token", "actor_token_type"];
  idp.provider.registerGrantType(TOKEN_EXCHANGE_GRANT, handler, params, ["audience", "resource"]);
}

const exchangeAuth = (o: Record<string, unknown> = {}) => ({
  type: "token_exchange",
  issuer: idp.issuer,
  clientId: CLIENT_ID,
  clientSecret: CLIENT_SECRET,
  scopes: [IDENTITY_SCOPE],
  ...o,
});

/** execute_tool whoami on `server`: the subject the upstream saw, or the error text. */
async function whoami(client: Client, server: string): Promise<{ subject?: string; error?: string }> {
  const r = await call(client, "execute_tool", { server, tool: "whoami", args: {} });
  const text = (r.content as Array<{ text?: string }>).map((c) => c.text ?? "");
  // The first block is the tool's answer; an events block may follow.
  return r.isError ? { error: text.join("\n") } : { subject: text[0] ?? "" };
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "token-exchange-"));
  const secretFile = path.join(dir, "client-secret");
  writeFileSync(secretFile, `${CLIENT_SECRET}\n`);
  idp = await startOidcProvider({
    scopes: [IDENTITY_SCOPE],
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        grant_types: [TOKEN_EXCHANGE_GRANT],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
  });
  upstream = await startProtectedServer({ issuer: idp.issuer, scopes: [IDENTITY_SCOPE] });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  registerTokenExchange(`${base}/mcp`);
  gw = await startGateway(
    {
      mcpServers: {
        tx: { url: upstream.url, auth: exchangeAuth(), sharing: "session" },
        "tx-shared": { url: upstream.url, auth: exchangeAuth({ clientSecret: undefined, clientSecretFile: secretFile }), sharing: "shared" },
        "tx-retry": { url: upstream.url, auth: exchangeAuth({ clientAuth: "client_secret_post", tokenEndpoint: `${idp.issuer}/token`, issuer: undefined }) },
        "tx-refused": { url: upstream.url, auth: exchangeAuth({ resource: "https://not-allowed.example/mcp" }) },
      },
      gateway: {
        port,
        token: STATIC,
        auth: { oauth: { issuers: [idp.issuer], scopes: [IDENTITY_SCOPE] } },
        vault: { refreshAheadMs: AHEAD_MS },
        logLevel: "debug",
      },
    },
    { logger: createLogger("debug", new Writable({ write: (chunk: Buffer, _e, done) => (logText.push(chunk.toString("utf8")), done()) })) },
  );
  for (const user of ["alice", "bob"]) {
    const oauth = new MemoryOAuthClient(REDIRECT);
    clients[user] = (await loginAndConnect(`${base}/mcp`, user, oauth)).client;
    inbound[user] = oauth.saved!.access_token;
  }
});

after(async () => {
  for (const c of Object.values(clients)) await c.close().catch(() => undefined);
  await gw?.close();
  await upstream?.close();
  await idp?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("token exchange (RFC 8693) per upstream", { timeout: 180_000 }, () => {
  test("each person's calls carry their own exchanged token, on own and shared connections; the inbound token never reaches the upstream", async () => {
    for (const server of ["tx", "tx-shared"]) {
      assert.deepEqual(await whoami(clients.alice!, server), { subject: "alice" }, server);
      assert.deepEqual(await whoami(clients.bob!, server), { subject: "bob" }, server);
      assert.deepEqual(await whoami(clients.alice!, server), { subject: "alice" }, server);
    }
    assert.ok(exchangesOf("alice") >= 1 && exchangesOf("bob") >= 1, JSON.stringify(exchanges));
    assert.ok(
      exchanges.every((e) => e.scope === IDENTITY_SCOPE),
      "the configured scope is asked for",
    );
    // The upstream accepted only tokens for its own audience, and refused nothing: no inbound token (audience: the gateway) came.
    assert.equal(upstream.refused, 0);
    for (const token of upstream.tokens) {
      assert.equal(decodeJwt(token).aud, upstream.url);
      assert.ok(!Object.values(inbound).includes(token));
    }
    assert.deepEqual(new Set(upstream.seen.map((s) => s.subject)), new Set(["alice", "bob"]));
  });

  test("an exchanged token is reused until shortly before it expires, then exchanged again", async () => {
    const first = await whoami(clients.alice!, "tx");
    const before = exchangesOf("alice");
    assert.deepEqual(await whoami(clients.alice!, "tx"), first);
    assert.deepEqual(await whoami(clients.alice!, "tx"), first);
    // Within the reuse window the calls above exchanged nothing more (the window is ~6 s; a slow call may cross it once).
    assert.ok(exchangesOf("alice") <= before + 1, `exchanges: ${exchangesOf("alice")} after ${before}`);
    const now = exchangesOf("alice");
    await eventually(
      "a new exchange once the cached token is due",
      async () => {
        assert.deepEqual(await whoami(clients.alice!, "tx"), { subject: "alice" });
        return exchangesOf("alice") > now ? true : undefined;
      },
      60_000,
      500,
    );
    assert.equal(upstream.refused, 0, "the token was renewed ahead of its expiry, never refused");
  });

  test("a 401 from the upstream drops the exchanged token and exchanges once more (token endpoint named, client_secret_post)", async () => {
    const refused = upstream.refused;
    const before = exchangesOf("bob");
    wrongAudienceOnce = true;
    assert.deepEqual(await whoami(clients.bob!, "tx-retry"), { subject: "bob" });
    assert.equal(upstream.refused, refused + 1, "the token for another audience was refused once");
    assert.equal(exchangesOf("bob"), before + 2);
  });

  test("the identity provider's refusal is EMCP_UPSTREAM_AUTH_FAILED naming the server and what to fix, without any token", async () => {
    const r = await whoami(clients.alice!, "tx-refused");
    assert.match(r.error ?? "", /EMCP_UPSTREAM_AUTH_FAILED/);
    assert.match(r.error ?? "", /tx-refused/);
    assert.match(r.error ?? "", /invalid_target/);
    assert.match(r.error ?? "", /auth\.resource/);
    for (const token of [...Object.values(inbound), ...upstream.tokens]) assert.ok(!r.error!.includes(token));
  });

  test("a caller with the static gateway token gets a clear error, and nothing is exchanged", async () => {
    const client = new Client({ name: "static", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: { authorization: `Bearer ${STATIC}` } } }));
    try {
      const count = exchanges.length;
      const r = await whoami(client, "tx");
      assert.match(r.error ?? "", /EMCP_UPSTREAM_AUTH_FAILED[\s\S]*static gateway token[\s\S]*gateway\.auth\.oauth/);
      assert.equal(exchanges.length, count);
    } finally {
      await client.close().catch(() => undefined);
    }
  });

  test("no log line holds an inbound or exchanged token, or the client secret", () => {
    const text = logText.join("");
    assert.match(text, /upstream_token_exchanged/);
    for (const secret of [...Object.values(inbound), ...upstream.tokens, CLIENT_SECRET]) assert.ok(!text.includes(secret));
  });

  test("concurrent calls of one person make one exchange; the cache keeps at most maxCached tokens, least recently used out", async () => {
    const cache = new TokenExchanges({ clock: systemClock, logger: createLogger("silent"), refreshAheadMs: AHEAD_MS, maxCached: 1 });
    const config = { issuer: idp.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, resource: upstream.url };
    const target = (subject: string): ExchangeTarget => ({ server: "direct", config, owner: { issuer: idp.issuer, subject } });
    const count = exchanges.length;
    const tokens = await Promise.all([1, 2, 3].map(() => cache.token(target("alice"), () => inbound.alice)));
    assert.equal(new Set(tokens).size, 1);
    assert.equal(exchanges.length, count + 1, "one exchange for three concurrent calls");
    assert.equal(await cache.token(target("alice"), () => inbound.alice), tokens[0], "reused");
    assert.equal(exchanges.length, count + 1);
    await cache.token(target("bob"), () => inbound.bob);
    assert.equal(cache.size, 1, "bounded");
    assert.notEqual(await cache.token(target("alice"), () => inbound.alice), tokens[0], "alice's token was pushed out: exchanged again");
    assert.equal(exchanges.length, count + 3);
  });

  test("one person's two inbound tokens (two clients) never share an exchanged token", async () => {
    const cache = new TokenExchanges({ clock: systemClock, logger: createLogger("silent"), refreshAheadMs: AHEAD_MS });
    const config = { issuer: idp.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, resource: upstream.url };
    const target: ExchangeTarget = { server: "direct", config, owner: { issuer: idp.issuer, subject: "alice" } };
    const oauth = new MemoryOAuthClient(REDIRECT);
    const second = await loginAndConnect(gw.url, "alice", oauth);
    await second.client.close();
    const other = oauth.saved!.access_token;
    assert.notEqual(other, inbound.alice);
    const count = exchanges.length;
    const first = await cache.token(target, () => inbound.alice);
    assert.notEqual(await cache.token(target, () => other), first, "the other client's token is its own exchange");
    assert.equal(exchanges.length, count + 2);
    assert.equal(await cache.token(target, () => inbound.alice), first, "each is reused for its own inbound token");
  });

  test("bad token_exchange config is refused at load, naming what to write", () => {
    const load = (auth: Record<string, unknown>, more: Record<string, unknown> = {}) =>
      parseConfig({ mcpServers: { x: { url: "http://127.0.0.1:1/mcp", auth: { type: "token_exchange", ...auth }, ...more } } });
    const ok = { issuer: "https://idp.example.com", clientId: "gw", clientSecret: "s" };
    assert.doesNotThrow(() => load(ok));
    assert.throws(() => load({ ...ok, clientId: undefined }), /token_exchange needs "clientId"/);
    assert.throws(() => load({ ...ok, tokenEndpoint: "https://idp.example.com/token" }), /exactly one of "issuer"/);
    assert.throws(() => load({ ...ok, clientSecretFile: "/x" }), /exactly one of "clientSecret"/);
    assert.throws(() => load(ok, { secrets: { key: { header: "X-Api-Key" } } }), /cannot be combined with per-user secrets/);
    assert.throws(() => load(ok, { headers: { Authorization: "Bearer x" } }), /cannot be combined with a static "Authorization" header/);
    assert.throws(
      () => parseConfig({ mcpServers: { x: { url: "http://127.0.0.1:1/mcp", auth: { type: "oauth", audience: "a" } } } }),
      /audience is for "type": "token_exchange"/,
    );
  });
});
