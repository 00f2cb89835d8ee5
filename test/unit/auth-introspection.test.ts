/**
 * Opaque tokens by RFC 7662 introspection (src/auth/introspection.ts) against
 * a loopback introspection endpoint that counts its calls: an active answer
 * must name this resource (unless requireAudience is off), a token without
 * `sub` is the principal `client:<client_id>`, answers are cached (active up
 * to cacheMs, inactive for the short negativeCacheMs) and concurrent checks
 * of one token make one call, and made-up tokens do not push real ones out
 * of the cache.
 */
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import http, { type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { Authenticator, type AuthOutcome } from "../../src/auth/authenticator.js";
import { principalHash, type Principal } from "../../src/auth/principal.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const GW = "https://gw.example.com";
const ISSUER = "https://login.example.com";
const CLIENT = { id: "emceepee-gateway", secret: "gateway-secret-0123456789" };

function bearer(token: string): IncomingMessage {
  return { headers: { host: "localhost:8808", authorization: `Bearer ${token}` } } as unknown as IncomingMessage;
}

function principal(o: AuthOutcome): Principal {
  assert.ok("principal" in o, JSON.stringify(o));
  return o.principal;
}

function refusal(o: AuthOutcome): string {
  assert.ok(!("principal" in o), "refused");
  assert.equal(o.status, 401);
  return o.message;
}

describe("Authenticator: opaque tokens by introspection", () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
  const exp = () => Math.floor(clock.now() / 1000) + 3600;
  /** What the endpoint answers per token (absent: inactive). */
  const answers = new Map<string, Record<string, unknown>>();
  /** Calls per token, and every token the endpoint was asked about, in order. */
  const calls = new Map<string, number>();
  let server: http.Server;
  let endpoint: string;

  before(async () => {
    server = http.createServer((rq, rs) => {
      let body = "";
      rq.on("data", (c: Buffer) => (body += c.toString("utf8")));
      rq.on("end", () => {
        const basic = `Basic ${Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString("base64")}`;
        if (rq.headers.authorization !== basic) return void rs.writeHead(401).end();
        const token = new URLSearchParams(body).get("token") ?? "";
        calls.set(token, (calls.get(token) ?? 0) + 1);
        const answer = answers.get(token);
        rs.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer ? { active: true, ...answer } : { active: false }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/introspect`;
  });
  after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  beforeEach(() => {
    answers.clear();
    calls.clear();
  });

  function make(o: { requireAudience?: boolean; cacheMs?: number; negativeCacheMs?: number; cacheMaxEntries?: number } = {}): Authenticator {
    return new Authenticator({
      oauth: {
        issuers: [ISSUER],
        scopes: [],
        audiences: [],
        clockSkewMs: 30_000,
        jwtType: "at+jwt",
        introspection: {
          endpoint,
          clientId: CLIENT.id,
          clientSecret: CLIENT.secret,
          cacheMs: o.cacheMs ?? 60_000,
          negativeCacheMs: o.negativeCacheMs ?? 5_000,
          requireAudience: o.requireAudience ?? true,
          cacheMaxEntries: o.cacheMaxEntries ?? 100,
        },
      },
      urls: { publicUrl: GW, trustForwardedHeaders: false },
      isFace: (p) => p === "/mcp",
      clock,
    });
  }

  test("an active answer must name this resource in aud (string or array); without aud it is refused unless requireAudience is off", async () => {
    const auth = make();
    answers.set("no-aud", { sub: "alice", iss: ISSUER, exp: exp() });
    answers.set("other-aud", { sub: "alice", iss: ISSUER, exp: exp(), aud: "https://other.example.com/mcp" });
    answers.set("this-aud", { sub: "alice", iss: ISSUER, exp: exp(), aud: `${GW}/mcp` });
    answers.set("array-aud", { sub: "alice", iss: ISSUER, exp: exp(), aud: ["https://other.example.com", GW] });
    assert.match(refusal(await auth.authenticate(bearer("no-aud"), "/mcp")), /names no audience \(aud\).*requireAudience: false/);
    assert.match(refusal(await auth.authenticate(bearer("other-aud"), "/mcp")), /audience is not this resource/);
    assert.equal(principal(await auth.authenticate(bearer("this-aud"), "/mcp")).subject, "alice");
    assert.equal(principal(await auth.authenticate(bearer("array-aud"), "/mcp")).subject, "alice");
    // The outcome carries the verified token itself (server.ts keeps it beside the principal; no second header parse).
    const outcome = await auth.authenticate(bearer("this-aud"), "/mcp");
    assert.equal("token" in outcome ? outcome.token : undefined, "this-aud");
    assert.equal(JSON.stringify(principal(outcome)).includes("this-aud"), false, "the principal object does not hold the token");

    const lenient = make({ requireAudience: false });
    assert.equal(principal(await lenient.authenticate(bearer("no-aud"), "/mcp")).subject, "alice");
    assert.match(refusal(await lenient.authenticate(bearer("other-aud"), "/mcp")), /audience is not this resource/);
  });

  test("a token without sub is the client's own principal, client:<client_id>, never the user whose subject is that id", async () => {
    const auth = make();
    answers.set("machine", { client_id: "alice", iss: ISSUER, exp: exp(), aud: GW });
    answers.set("person", { sub: "alice", iss: ISSUER, exp: exp(), aud: GW });
    answers.set("spoof", { sub: "client:alice", iss: ISSUER, exp: exp(), aud: GW });
    answers.set("nobody", { iss: ISSUER, exp: exp(), aud: GW });
    const machine = principal(await auth.authenticate(bearer("machine"), "/mcp"));
    const person = principal(await auth.authenticate(bearer("person"), "/mcp"));
    assert.equal(machine.subject, "client:alice");
    assert.equal(machine.clientId, "alice");
    assert.equal(person.subject, "alice");
    assert.notEqual(machine.hash, person.hash);
    assert.equal(machine.hash, principalHash(ISSUER, "client:alice"));
    assert.match(refusal(await auth.authenticate(bearer("spoof"), "/mcp")), /its subject "client:alice" starts with "client:"/);
    assert.match(refusal(await auth.authenticate(bearer("nobody"), "/mcp")), /names no sub and no client_id/);
  });

  test("an active answer is reused until cacheMs (never past exp); then the server is asked again", async () => {
    const auth = make({ cacheMs: 60_000 });
    answers.set("t1", { sub: "alice", iss: ISSUER, exp: exp(), aud: GW });
    for (let i = 0; i < 3; i++) principal(await auth.authenticate(bearer("t1"), "/mcp"));
    assert.equal(calls.get("t1"), 1);
    clock.advance(59_000);
    principal(await auth.authenticate(bearer("t1"), "/mcp"));
    assert.equal(calls.get("t1"), 1);
    clock.advance(2_000);
    principal(await auth.authenticate(bearer("t1"), "/mcp"));
    assert.equal(calls.get("t1"), 2);

    // A token that expires within cacheMs is asked about again once it has expired: the server's word, not ours, decides.
    answers.set("short", { sub: "alice", iss: ISSUER, exp: Math.floor(clock.now() / 1000) + 10, aud: GW });
    principal(await auth.authenticate(bearer("short"), "/mcp"));
    clock.advance(11_000);
    answers.delete("short");
    assert.match(refusal(await auth.authenticate(bearer("short"), "/mcp")), /not active/);
    assert.equal(calls.get("short"), 2);
  });

  test("concurrent checks of one token share one introspection call", async () => {
    const auth = make();
    answers.set("busy", { sub: "alice", iss: ISSUER, exp: exp(), aud: GW });
    const outcomes = await Promise.all(Array.from({ length: 8 }, () => auth.authenticate(bearer("busy"), "/mcp")));
    for (const o of outcomes) assert.equal(principal(o).subject, "alice");
    assert.equal(calls.get("busy"), 1);
    // Inactive tokens too.
    const refused = await Promise.all(Array.from({ length: 8 }, () => auth.authenticate(bearer("made-up"), "/mcp")));
    for (const o of refused) assert.match(refusal(o), /not active/);
    assert.equal(calls.get("made-up"), 1);
  });

  test("an inactive answer is cached briefly (negativeCacheMs), so a token that becomes active is accepted soon after", async () => {
    const auth = make({ cacheMs: 60_000, negativeCacheMs: 5_000 });
    assert.match(refusal(await auth.authenticate(bearer("late"), "/mcp")), /not active/);
    assert.match(refusal(await auth.authenticate(bearer("late"), "/mcp")), /not active/);
    assert.equal(calls.get("late"), 1);
    answers.set("late", { sub: "alice", iss: ISSUER, exp: exp(), aud: GW });
    clock.advance(5_001);
    assert.equal(principal(await auth.authenticate(bearer("late"), "/mcp")).subject, "alice");
    assert.equal(calls.get("late"), 2);
  });

  test("made-up tokens do not push a real token's answer out of the cache (the two kinds are bounded apart)", async () => {
    const auth = make({ cacheMaxEntries: 2 });
    answers.set("real", { sub: "alice", iss: ISSUER, exp: exp(), aud: GW });
    principal(await auth.authenticate(bearer("real"), "/mcp"));
    for (let i = 0; i < 5; i++) refusal(await auth.authenticate(bearer(`made-up-${i}`), "/mcp"));
    principal(await auth.authenticate(bearer("real"), "/mcp"));
    assert.equal(calls.get("real"), 1, "the real token's answer is still cached");
    // Each kind keeps at most cacheMaxEntries: the oldest made-up token was dropped, the newest is still cached.
    refusal(await auth.authenticate(bearer("made-up-0"), "/mcp"));
    refusal(await auth.authenticate(bearer("made-up-4"), "/mcp"));
    assert.equal(calls.get("made-up-0"), 2);
    assert.equal(calls.get("made-up-4"), 1);
  });
});
