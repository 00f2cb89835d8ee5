/**
 * The principal in telemetry (issue 22, src/observability/principal-telemetry.ts):
 * a gateway in process with OAuth on (a loopback issuer whose key set jose
 * reads; tokens signed with jose, RFC 9068 shaped), real SDK clients over
 * HTTP. Log lines written while a request is handled (from the HTTP
 * endpoint's to the MCP handlers', on child loggers too) carry the caller's
 * principal hash, and never its token, subject or e-mail unless
 * `auth.logSubject` is on; its server span carries `enduser.pseudo.id`; the
 * per-principal counter exists only with `metrics.principals` and labels at
 * most that many principals.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";
import { principalHash } from "../../src/auth/principal.js";
import { createLogger } from "../../src/logging.js";
import { call, startGateway, type TestGateway } from "../helpers/gateway.js";

type Line = Record<string, unknown>;

describe("the principal in logs, traces and metrics", () => {
  let idp: http.Server;
  let issuer: string;
  let key: CryptoKey;
  const jwks: JWK[] = [];
  const open: Array<{ close(): Promise<void> }> = [];

  before(async () => {
    idp = http.createServer((rq, rs) => {
      if (rq.url === "/.well-known/openid-configuration") rs.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
      else if (rq.url === "/jwks") rs.end(JSON.stringify({ keys: jwks }));
      else rs.writeHead(404).end();
    });
    await new Promise<void>((r) => idp.listen(0, "127.0.0.1", r));
    issuer = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
    const pair = await generateKeyPair("ES256", { extractable: true });
    key = pair.privateKey;
    jwks.push({ ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "ES256", use: "sig" });
  });
  after(async () => {
    for (const o of open.reverse()) await o.close().catch(() => undefined);
    await new Promise<void>((r) => (idp.closeAllConnections(), idp.close(() => r())));
  });

  /** A gateway with OAuth on, its log lines and spans. */
  async function gateway(extra: Record<string, unknown>): Promise<{ gw: TestGateway; lines: Line[]; spans: InMemorySpanExporter }> {
    const lines: Line[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Line);
        done();
      },
    });
    const spans = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
    const { auth, metrics } = extra as { auth?: Record<string, unknown>; metrics?: Record<string, unknown> };
    const gw = await startGateway(
      { mcpServers: {}, gateway: { logLevel: "debug", auth: { oauth: { issuers: [issuer] }, ...auth }, ...(metrics ? { metrics } : {}) } },
      { logger: createLogger("debug", sink), tracerProvider },
    );
    open.push(gw);
    return { gw, lines, spans };
  }

  async function token(gw: TestGateway, sub: string, claims: Record<string, unknown> = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ sub, aud: new URL(gw.url).origin, iat: now, exp: now + 600, ...claims })
      .setProtectedHeader({ alg: "ES256", kid: "k1", typ: "at+jwt" })
      .setIssuer(issuer)
      .sign(key);
  }

  async function connect(gw: TestGateway, bearer: string): Promise<Client> {
    const client = new Client({ name: "telemetry-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
    open.push(client);
    return client;
  }

  /** A tool call that logs beyond the access line: execute_tool on a server that does not exist (meta_tool_error at debug). */
  async function failingCall(client: Client): Promise<void> {
    const r = await call(client, "execute_tool", { server: "nowhere", tool: "x", args: {} });
    assert.equal(r.isError, true);
  }

  const serialized = (lines: Line[]) => lines.map((l) => JSON.stringify(l)).join("\n");

  test("log lines of a request carry its principal's hash, never the token, subject or e-mail; its span carries enduser.pseudo.id", async () => {
    const { gw, lines, spans } = await gateway({});
    const aliceToken = await token(gw, "alice-sub-7f3a", { email: "alice@example.com" });
    const bobToken = await token(gw, "bob-sub-91c2", { email: "bob@example.com" });
    const alice = await connect(gw, aliceToken);
    const bob = await connect(gw, bobToken);
    await failingCall(alice);
    await failingCall(bob);
    const aliceHash = principalHash(issuer, "alice-sub-7f3a");
    const bobHash = principalHash(issuer, "bob-sub-91c2");

    for (const [hash, who] of [
      [aliceHash, "alice"],
      [bobHash, "bob"],
    ] as const) {
      const errors = lines.filter((l) => l.msg === "meta_tool_error" && l.principalHash === hash);
      assert.equal(errors.length, 1, `${who}'s meta_tool_error line names its principal: ${serialized(lines)}`);
      const access = lines.filter((l) => l.msg === "tool_call" && l.principalHash === hash);
      assert.equal(access.length, 1, `${who}'s access line`);
      // The handler's line and the access line are the same session's, and only that principal's.
      assert.equal(errors[0]!.sessionHash, access[0]!.sessionHash);
      // Lines of the HTTP request before any MCP handler runs (initialize making the session) name it too.
      const created = lines.filter((l) => l.msg === "session_created" && l.principalHash === hash);
      assert.equal(created.length, 1, `${who}'s session_created line names its principal`);
      assert.equal(created[0]!.sessionHash, access[0]!.sessionHash);
    }
    const text = serialized(lines);
    for (const secret of [aliceToken, bobToken, "alice-sub-7f3a", "bob-sub-91c2", "alice@example.com", "bob@example.com"])
      assert.ok(!text.includes(secret), `no log line carries ${secret.slice(0, 20)}`);
    assert.ok(!text.includes("principalSubject") && !text.includes("principalEmail"));

    const calls = spans.getFinishedSpans().filter((s) => s.name === "tools/call execute_tool");
    assert.deepEqual(calls.map((s) => s.attributes["enduser.pseudo.id"]).sort(), [aliceHash, bobHash].sort());
    assert.ok(calls.every((s) => s.attributes["enduser.id"] === undefined));
    const spanText = JSON.stringify(spans.getFinishedSpans().map((s) => s.attributes));
    assert.ok(!spanText.includes("alice-sub-7f3a") && !spanText.includes(aliceToken));

    // No per-principal counter unless the operator asks for one.
    const metrics = await (await fetch(gw.url.replace(/\/mcp$/, "/metrics"), { headers: { authorization: `Bearer ${aliceToken}` } })).text();
    assert.ok(!metrics.includes("emceepee_principal_requests_total"), "no per-principal series by default");
  });

  test("auth.logSubject: log lines also carry the subject and e-mail claim; the span carries enduser.id", async () => {
    const { gw, lines, spans } = await gateway({ auth: { logSubject: true } });
    const alice = await connect(gw, await token(gw, "alice-sub-7f3a", { email: "alice@example.com" }));
    await failingCall(alice);
    const line = lines.find((l) => l.msg === "meta_tool_error");
    assert.ok(line, serialized(lines));
    assert.equal(line.principalHash, principalHash(issuer, "alice-sub-7f3a"));
    assert.equal(line.principalSubject, "alice-sub-7f3a");
    assert.equal(line.principalEmail, "alice@example.com");
    const span = spans.getFinishedSpans().find((s) => s.name === "tools/call execute_tool");
    assert.equal(span?.attributes["enduser.id"], "alice-sub-7f3a");
  });

  test("metrics.principals: requests are counted per principal hash, at most that many principals, the rest as other", async () => {
    const { gw } = await gateway({ metrics: { principals: 1 } });
    const aliceToken = await token(gw, "alice-sub-7f3a");
    const alice = await connect(gw, aliceToken);
    const bob = await connect(gw, await token(gw, "bob-sub-91c2"));
    const carol = await connect(gw, await token(gw, "carol-sub-0d4e"));
    await failingCall(alice);
    await failingCall(alice);
    await failingCall(bob);
    await failingCall(carol);
    const text = await (await fetch(gw.url.replace(/\/mcp$/, "/metrics"), { headers: { authorization: `Bearer ${aliceToken}` } })).text();
    const series = text.split("\n").filter((l) => l.startsWith("emceepee_principal_requests_total{") && l.includes('mcp_method_name="tools/call"'));
    const aliceHash = principalHash(issuer, "alice-sub-7f3a");
    assert.deepEqual(series.sort(), [
      `emceepee_principal_requests_total{principal_hash="${aliceHash}",mcp_method_name="tools/call"} 2`,
      `emceepee_principal_requests_total{principal_hash="other",mcp_method_name="tools/call"} 2`,
    ]);
    assert.ok(!text.includes("bob-sub") && !text.includes("alice-sub"));
  });
});
