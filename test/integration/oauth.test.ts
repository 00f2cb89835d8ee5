/**
 * The gateway as an OAuth 2.1 resource server (MCP authorization spec
 * 2025-11-25), with real parts only: a real OpenID provider (oidc-provider on
 * loopback, test/helpers/oidc.ts) issuing JWT access tokens for the face a
 * client names, the SDK's own OAuth client (discovery 401 → PRM → AS
 * metadata → dynamic or pre-registered client → code + PKCE, the provider's
 * login and consent pages driven headlessly), and a real SDK MCP server over
 * Streamable HTTP as the upstream, which records every header it is sent.
 * The provider's own ID token is refused as an access token (typ at+jwt).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { principalHash } from "../../src/auth/principal.js";
import { createLogger } from "../../src/logging.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { loginHeadless, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";

const SCOPE = "mcp:tools";
const STATIC_TOKEN = "static-machine-token-0123456789";
const REDIRECT = "http://127.0.0.1:65500/callback";
/** A public client registered at the provider in advance (no dynamic registration). */
const PRE_REGISTERED = {
  client_id: "pre-registered",
  redirect_uris: [REDIRECT],
  token_endpoint_auth_method: "none",
  grant_types: ["authorization_code"],
  response_types: ["code"],
};

/** A real MCP server over Streamable HTTP (stateless) that records the headers of every request it gets. */
async function startRecordingUpstream(): Promise<{ url: string; headers: http.IncomingHttpHeaders[]; close(): Promise<void> }> {
  const headers: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    headers.push(req.headers);
    const mcp = new McpServer({ name: "recorder", version: "1.0.0" });
    mcp.registerTool("whoami", { description: "says hello" }, () => ({ content: [{ type: "text", text: "hello from upstream" }] }));
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.on("close", () => void transport.close());
    void mcp.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    headers,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

describe("OAuth resource server", { timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let upstream: Awaited<ReturnType<typeof startRecordingUpstream>>;
  let gw: TestGateway;
  let base: string;
  const lines: Record<string, unknown>[] = [];
  const clients: Client[] = [];

  before(async () => {
    idp = await startOidcProvider({
      scopes: [SCOPE],
      clients: [PRE_REGISTERED],
    });
    upstream = await startRecordingUpstream();
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    gw = await startGateway(
      {
        mcpServers: { up: { url: upstream.url } },
        // The pre-registered client's id is an accepted audience, as for a server without resource indicators: then an ID token for that client carries a matching `aud`.
        gateway: { logLevel: "info", token: STATIC_TOKEN, auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE], audiences: [PRE_REGISTERED.client_id] } } },
      },
      { logger: createLogger("info", sink) },
    );
    base = new URL(gw.url).origin;
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.close();
    await upstream?.close();
    await idp?.close();
  });

  test("without a token every face answers 401 naming its Protected Resource Metadata, which names the face and the issuer", async () => {
    for (const face of ["/mcp", "/all/mcp", "/servers/up/mcp"]) {
      const res = await fetch(`${base}${face}`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } },
        }),
      });
      assert.equal(res.status, 401, face);
      const challenge = res.headers.get("www-authenticate") ?? "";
      const prm = `${base}/.well-known/oauth-protected-resource${face}`;
      assert.match(challenge, /^Bearer /);
      assert.ok(challenge.includes(`resource_metadata="${prm}"`), challenge);
      assert.ok(challenge.includes(`scope="${SCOPE}"`), challenge);
      const meta = (await (await fetch(prm)).json()) as Record<string, unknown>;
      assert.deepEqual(meta, {
        resource: `${base}${face}`,
        authorization_servers: [idp.issuer],
        scopes_supported: [SCOPE],
        bearer_methods_supported: ["header"],
        resource_name: "emceepee MCP gateway",
      });
    }
    const root = (await (await fetch(`${base}/.well-known/oauth-protected-resource`)).json()) as Record<string, unknown>;
    assert.equal(root.resource, base, "the root form describes the gateway as a whole");
    assert.equal((await fetch(`${base}/.well-known/oauth-protected-resource/nowhere/mcp`)).status, 404);
  });

  test("an SDK client discovers the provider, registers, logs in (code + PKCE) and calls a tool on /mcp; the upstream never sees its token", async () => {
    const oauth = new MemoryOAuthClient(REDIRECT);
    const client = (await loginAndConnect(`${base}/mcp`, "alice", oauth)).client;
    clients.push(client);
    assert.ok(oauth.info?.client_id, "dynamic client registration ran");
    const token = oauth.saved?.access_token ?? "";
    assert.equal(token.split(".").length, 3, "the provider issued a JWT access token");
    const result = (await client.callTool({ name: "execute_tool", arguments: { server: "up", tool: "whoami", args: {} } })) as CallToolResult;
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.match(JSON.stringify(result.content), /hello from upstream/);
    assert.ok(upstream.headers.length > 0, "the upstream was called");
    for (const h of upstream.headers) {
      assert.equal(h.authorization, undefined, "no Authorization header reaches the upstream");
      assert.ok(!JSON.stringify(h).includes(token), "the client's token is nowhere in the upstream's headers");
    }
    const line = lines.find((l) => l.msg === "tool_call" && l.tool === "execute_tool");
    assert.equal(line?.principalHash, principalHash(idp.issuer, "alice"), "the access log names the principal's hash");
    assert.ok(!JSON.stringify(lines).includes(token), "the token is never logged");
  });

  test("a pre-registered client logs in for /servers/up/mcp; its token is bound to that face (RFC 8707) and refused on /mcp", async () => {
    const oauth = new MemoryOAuthClient(REDIRECT, { client_id: "pre-registered" });
    const client = (await loginAndConnect(`${base}/servers/up/mcp`, "bob", oauth)).client;
    clients.push(client);
    const result = (await client.callTool({ name: "whoami", arguments: {} })) as CallToolResult;
    assert.match(JSON.stringify(result.content), /hello from upstream/);
    const elsewhere = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${oauth.saved!.access_token}`, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(elsewhere.status, 401);
    assert.match(elsewhere.headers.get("www-authenticate") ?? "", /error="invalid_token".*audience/);
    for (const h of upstream.headers) assert.equal(h.authorization, undefined);
  });

  test("a session belongs to its principal: another principal's requests with its id, or attaching to it, get the 404 of an unknown session", async () => {
    const alice = (await loginAndConnect(`${base}/mcp`, "alice", new MemoryOAuthClient(REDIRECT))).client;
    const bobAuth = new MemoryOAuthClient(REDIRECT);
    const bob = (await loginAndConnect(`${base}/mcp`, "bob", bobAuth)).client;
    clients.push(alice, bob);
    const sid = (alice.transport as StreamableHTTPClientTransport).sessionId!;
    const unknown = randomUUID();
    const post = (token: string, headers: Record<string, string>, body: unknown, query = "") =>
      fetch(`${base}/mcp${query}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2025-11-25",
          ...headers,
        },
        body: JSON.stringify(body),
      });
    const list = { jsonrpc: "2.0", id: 7, method: "tools/list" };
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } },
    };
    for (const token of [bobAuth.saved!.access_token, STATIC_TOKEN]) {
      const foreign = await post(token, { "mcp-session-id": sid }, list);
      const none = await post(token, { "mcp-session-id": unknown }, list);
      assert.equal(foreign.status, 404);
      assert.equal(none.status, 404);
      assert.equal((await foreign.text()).replace(sid, "<id>"), (await none.text()).replace(unknown, "<id>"), "indistinguishable from an unknown session");
      const attach = await post(token, {}, init, `?session=${sid}`);
      const attachNone = await post(token, {}, init, `?session=${unknown}`);
      assert.equal(attach.status, 404);
      assert.equal((await attach.text()).replace(sid, "<id>"), (await attachNone.text()).replace(unknown, "<id>"));
    }
    // Alice's own session still works, with her token.
    const own = (await alice.callTool({ name: "list_servers", arguments: {} })) as CallToolResult;
    assert.notEqual(own.isError, true);
  });

  test("the static token works beside OAuth (the operator principal)", async () => {
    const client = new Client({ name: "machine", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${STATIC_TOKEN}` } } }));
    clients.push(client);
    const result = (await client.callTool({ name: "list_servers", arguments: {} })) as CallToolResult;
    assert.notEqual(result.isError, true);
    const line = lines.findLast((l) => l.msg === "tool_call" && l.tool === "list_servers");
    assert.equal(line?.principalHash, principalHash("urn:emceepee:static-token", "operator"));
  });

  test("the provider's ID token is not an access token: 401 invalid_token naming its typ, though signed by the issuer for an accepted audience", async () => {
    // OpenID Connect code flow + PKCE for the pre-registered client, scope openid: the provider returns an ID token (aud = the client's id).
    const verifier = randomBytes(32).toString("base64url");
    const auth = new URL(`${idp.issuer}/auth`);
    for (const [k, v] of Object.entries({
      client_id: PRE_REGISTERED.client_id,
      redirect_uri: REDIRECT,
      response_type: "code",
      scope: "openid",
      nonce: randomBytes(8).toString("hex"),
      code_challenge: createHash("sha256").update(verifier).digest("base64url"),
      code_challenge_method: "S256",
    }))
      auth.searchParams.set(k, v);
    const code = await loginHeadless(auth, "dave", REDIRECT);
    const res = await fetch(`${idp.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code,
        redirect_uri: REDIRECT,
        client_id: PRE_REGISTERED.client_id,
        code_verifier: verifier,
      }),
    });
    const tokens = (await res.json()) as { id_token?: string };
    assert.equal(res.status, 200, JSON.stringify(tokens));
    const idToken = tokens.id_token ?? "";
    const header = JSON.parse(Buffer.from(idToken.split(".")[0]!, "base64url").toString("utf8")) as { typ?: string };
    const claims = JSON.parse(Buffer.from(idToken.split(".")[1]!, "base64url").toString("utf8")) as { aud?: unknown; sub?: string };
    assert.equal(claims.aud, PRE_REGISTERED.client_id, "an ID token for the client, whose id is an accepted audience here");
    assert.equal(claims.sub, "dave");
    assert.notEqual(header.typ?.toLowerCase(), "at+jwt");

    const answer = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${idToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } },
      }),
    });
    assert.equal(answer.status, 401, await answer.clone().text());
    assert.match(answer.headers.get("www-authenticate") ?? "", /error="invalid_token".*typ header.*at\+jwt/);
  });
});

describe("OAuth resource server: opaque tokens by introspection (RFC 7662)", { timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let gw: TestGateway;
  const lines: Record<string, unknown>[] = [];
  const clients: Client[] = [];
  const GATEWAY_CLIENT = { client_id: "emceepee-gateway", client_secret: "gateway-client-secret-0123456789", redirect_uris: ["http://127.0.0.1:65501/unused"] };

  before(async () => {
    idp = await startOidcProvider({
      scopes: [SCOPE],
      format: () => "opaque",
      clients: [PRE_REGISTERED, GATEWAY_CLIENT],
    });
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    gw = await startGateway(
      {
        mcpServers: {},
        gateway: {
          logLevel: "info",
          auth: {
            oauth: {
              issuers: [idp.issuer],
              scopes: [SCOPE],
              introspection: { endpoint: `${idp.issuer}/token/introspection`, clientId: GATEWAY_CLIENT.client_id, clientSecret: GATEWAY_CLIENT.client_secret },
            },
          },
        },
      },
      { logger: createLogger("info", sink) },
    );
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.close();
    await idp?.close();
  });

  test("an opaque token is introspected with the gateway's credentials and names its principal; a made-up one is refused", async () => {
    const base = new URL(gw.url).origin;
    const oauth = new MemoryOAuthClient(REDIRECT, { client_id: "pre-registered" });
    const client = (await loginAndConnect(`${base}/mcp`, "carol", oauth)).client;
    clients.push(client);
    assert.notEqual(oauth.saved!.access_token.split(".").length, 3, "the provider issued an opaque token");
    const result = (await client.callTool({ name: "list_servers", arguments: {} })) as CallToolResult;
    assert.notEqual(result.isError, true, JSON.stringify(result));
    const line = lines.findLast((l) => l.msg === "tool_call" && l.tool === "list_servers");
    assert.equal(line?.principalHash, principalHash(idp.issuer, "carol"));
    const forged = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: { authorization: "Bearer made-up-opaque-token", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(forged.status, 401);
    assert.match(forged.headers.get("www-authenticate") ?? "", /error="invalid_token", error_description="[^"]*not active/);
  });
});

describe("OAuth resource server: a session's owner is stored with it", { timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let dir: string;

  before(async () => {
    idp = await startOidcProvider({ scopes: [SCOPE] });
    dir = mkdtempSync(path.join(tmpdir(), "emceepee-oauth-"));
  });
  after(async () => {
    await idp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("after a restart (SQLite store) the session still answers its principal only; another's gets the 404 of an unknown session", async () => {
    const config = (port: number) => ({
      mcpServers: {},
      gateway: { port, store: { kind: "sqlite", path: path.join(dir, "state.db") }, auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } } },
    });
    let gw = await startGateway(config(0));
    const port = Number(new URL(gw.url).port);
    const url = `http://127.0.0.1:${port}/mcp`;
    const aliceAuth = new MemoryOAuthClient(REDIRECT);
    const alice = (await loginAndConnect(url, "alice", aliceAuth)).client;
    const bobAuth = new MemoryOAuthClient(REDIRECT);
    const bob = (await loginAndConnect(url, "bob", bobAuth)).client;
    const sid = (alice.transport as StreamableHTTPClientTransport).sessionId!;
    await bob.close();
    await gw.close();
    gw = await startGateway(config(port));
    try {
      const list = (token: string, id: string) =>
        fetch(url, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "mcp-protocol-version": "2025-11-25",
            "mcp-session-id": id,
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
        });
      const foreign = await list(bobAuth.saved!.access_token, sid);
      const unknown = randomUUID();
      const none = await list(bobAuth.saved!.access_token, unknown);
      assert.equal(foreign.status, 404);
      assert.equal((await foreign.text()).replace(sid, "<id>"), (await none.text()).replace(unknown, "<id>"));
      const own = await list(aliceAuth.saved!.access_token, sid);
      assert.equal(own.status, 200, await own.clone().text());
      assert.match(await own.text(), /list_servers/);
    } finally {
      await alice.close().catch(() => {});
      await gw.close();
    }
  });
});
