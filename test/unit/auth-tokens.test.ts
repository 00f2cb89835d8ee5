/**
 * Access-token edge cases against the Authenticator (src/auth/), with tokens
 * signed by jose and the issuer's metadata and key set served over loopback
 * HTTP (so jose's remote key set, its cache and its refetch on an unknown
 * `kid` run for real): expired, not yet valid, wrong audience, wrong issuer,
 * unknown key then rotated in, `none` and HMAC algorithms, an ID token or
 * other non-`at+jwt` type (and, with `jwtType: "any"`, one carrying `nonce`),
 * a `client:` subject, a missing scope (403), no token (401 naming the
 * metadata), the static token, an issuer that cannot be reached (503).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http, { type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type CryptoKey, type JWK } from "jose";
import { Authenticator, type AuthOutcome } from "../../src/auth/authenticator.js";
import { OPERATOR, principalHash } from "../../src/auth/principal.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const GW = "https://gw.example.com";
const STATIC = "static-token-0123456789";

function req(headers: IncomingHttpHeaders = {}): IncomingMessage {
  return { headers: { host: "localhost:8808", ...headers } } as unknown as IncomingMessage;
}

function failure(o: AuthOutcome): { status: number; message: string; headers: Record<string, string> } {
  assert.ok(!("principal" in o), "refused");
  return o;
}

describe("Authenticator: access tokens", () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
  const now = () => Math.floor(clock.now() / 1000);
  let server: http.Server;
  let issuer: string;
  const published: JWK[] = [];
  let k1: CryptoKey;
  let k2: CryptoKey;
  let k2Public: CryptoKey;
  let auth: Authenticator;
  let anyType: Authenticator;

  before(async () => {
    server = http.createServer((rq, rs) => {
      if (rq.url === "/.well-known/openid-configuration") rs.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
      else if (rq.url === "/jwks") rs.end(JSON.stringify({ keys: published }));
      else rs.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const a = await generateKeyPair("ES256", { extractable: true });
    const b = await generateKeyPair("ES256", { extractable: true });
    k1 = a.privateKey;
    k2 = b.privateKey;
    k2Public = b.publicKey;
    published.push({ ...(await exportJWK(a.publicKey)), kid: "k1", alg: "ES256", use: "sig" });
    const make = (jwtType: "at+jwt" | "any") =>
      new Authenticator({
        token: STATIC,
        oauth: {
          issuers: [issuer, "http://127.0.0.1:9"],
          scopes: ["mcp:tools"],
          audiences: ["api://emceepee"],
          clockSkewMs: 30_000,
          jwtType,
          introspection: { cacheMs: 0, negativeCacheMs: 0, requireAudience: true, cacheMaxEntries: 1 },
        },
        urls: { publicUrl: GW, trustForwardedHeaders: false },
        isFace: (p) => p === "/mcp",
        clock,
        keys: { cooldownMs: 0, retryAfterMs: 60_000, timeoutMs: 2_000 },
      });
    auth = make("at+jwt");
    anyType = make("any");
  });
  after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));

  async function sign(
    claims: Record<string, unknown> = {},
    o: { key?: CryptoKey; kid?: string; iss?: string; typ?: string | undefined } = {},
  ): Promise<string> {
    const typ = "typ" in o ? o.typ : "at+jwt";
    return new SignJWT({ scope: "mcp:tools other", sub: "alice", aud: `${GW}/mcp`, iat: now(), exp: now() + 300, ...claims })
      .setProtectedHeader({ alg: "ES256", kid: o.kid ?? "k1", ...(typ !== undefined ? { typ } : {}) })
      .setIssuer(o.iss ?? issuer)
      .sign(o.key ?? k1);
  }
  const bearer = (t: string) => req({ authorization: `Bearer ${t}` });

  test("a valid token gives its principal (issuer, subject, scopes, claims, hash)", async () => {
    const o = await auth.authenticate(bearer(await sign()), "/mcp");
    assert.ok("principal" in o);
    assert.equal(o.principal.issuer, issuer);
    assert.equal(o.principal.subject, "alice");
    assert.deepEqual(o.principal.scopes, ["mcp:tools", "other"]);
    assert.equal(o.principal.claims.sub, "alice");
    assert.equal(o.principal.hash, principalHash(issuer, "alice"));
    assert.match(o.principal.hash, /^[0-9a-f]{16}$/);
  });

  test("no token: 401 naming the face's metadata and the scope", async () => {
    const f = failure(await auth.authenticate(req(), "/mcp"));
    assert.equal(f.status, 401);
    assert.equal(f.headers["WWW-Authenticate"], `Bearer scope="mcp:tools", resource_metadata="${GW}/.well-known/oauth-protected-resource/mcp"`);
    const other = failure(await auth.authenticate(req(), "/metrics"));
    assert.match(other.headers["WWW-Authenticate"]!, /resource_metadata="https:\/\/gw\.example\.com\/\.well-known\/oauth-protected-resource"$/);
  });

  test("expired beyond the clock skew: 401 invalid_token; within it: accepted", async () => {
    const f = failure(await auth.authenticate(bearer(await sign({ exp: now() - 60 })), "/mcp"));
    assert.equal(f.status, 401);
    assert.match(f.headers["WWW-Authenticate"]!, /error="invalid_token", error_description="[^"]*expired/);
    assert.ok("principal" in (await auth.authenticate(bearer(await sign({ exp: now() - 10 })), "/mcp")));
  });

  test("not valid yet (nbf) beyond the skew: 401", async () => {
    const f = failure(await auth.authenticate(bearer(await sign({ nbf: now() + 120 })), "/mcp"));
    assert.equal(f.status, 401);
    assert.match(f.message, /not valid yet/);
  });

  test("audience: another resource is refused; the gateway's base URL and configured audiences are accepted", async () => {
    const f = failure(await auth.authenticate(bearer(await sign({ aud: `${GW}/all/mcp` })), "/mcp"));
    assert.equal(f.status, 401);
    assert.match(f.message, /audience is not this resource/);
    assert.equal(failure(await auth.authenticate(bearer(await sign({ aud: "https://other.example.com/mcp" })), "/mcp")).status, 401);
    assert.ok("principal" in (await auth.authenticate(bearer(await sign({ aud: GW })), "/mcp")));
    assert.ok("principal" in (await auth.authenticate(bearer(await sign({ aud: ["x", "api://emceepee"] })), "/mcp")));
  });

  test("wrong issuer: 401, and no key set is fetched for it", async () => {
    const f = failure(await auth.authenticate(bearer(await sign({}, { iss: "https://evil.example.com" })), "/mcp"));
    assert.equal(f.status, 401);
    assert.match(f.message, /issuer "https:\/\/evil.example.com" is not one of gateway.auth.oauth.issuers/);
  });

  test("unknown kid: 401; once the issuer publishes the rotated key, the key set is refetched and the token accepted", async () => {
    const token = await sign({}, { key: k2, kid: "k2" });
    const f = failure(await auth.authenticate(bearer(token), "/mcp"));
    assert.equal(f.status, 401);
    assert.match(f.message, /unknown kid/);
    published.push({ ...(await exportJWK(k2Public)), kid: "k2", alg: "ES256", use: "sig" });
    const o = await auth.authenticate(bearer(token), "/mcp");
    assert.ok("principal" in o, JSON.stringify(o));
  });

  test("alg none and HMAC tokens are refused", async () => {
    const none = new UnsecuredJWT({ sub: "alice", scope: "mcp:tools", aud: `${GW}/mcp`, exp: now() + 300 }).setIssuer(issuer).encode();
    const f = failure(await auth.authenticate(bearer(none), "/mcp"));
    assert.equal(f.status, 401);
    assert.match(f.message, /algorithm "none" is not accepted/);
    const hs = await new SignJWT({ sub: "alice", scope: "mcp:tools", aud: `${GW}/mcp`, exp: now() + 300 })
      .setProtectedHeader({ alg: "HS256", kid: "k1" })
      .setIssuer(issuer)
      .sign(new TextEncoder().encode("a-shared-secret-someone-guessed!"));
    assert.match(failure(await auth.authenticate(bearer(hs), "/mcp")).message, /algorithm "HS256" is not accepted/);
  });

  test("typ: only at+jwt (or application/at+jwt) is an access token; an ID token (typ JWT or none) is refused", async () => {
    assert.ok("principal" in (await auth.authenticate(bearer(await sign({}, { typ: "application/at+JWT" })), "/mcp")));
    for (const typ of ["JWT", undefined]) {
      // An ID token as a provider signs it: the same issuer and key, aimed at this resource, with a nonce.
      const idToken = await sign({ nonce: "n-0S6_WzA2Mj", auth_time: now() }, { typ });
      const f = failure(await auth.authenticate(bearer(idToken), "/mcp"));
      assert.equal(f.status, 401);
      assert.ok(f.message.includes(`its type (typ header) is ${typ === undefined ? "null" : '"JWT"'}, not "at+jwt"`), f.message);
      assert.match(f.message, /gateway\.auth\.oauth\.jwtType: "any"/);
      assert.match(f.headers["WWW-Authenticate"]!, /error="invalid_token"/);
    }
  });

  test('jwtType "any": a token without typ is accepted, but not one that carries an ID token\'s claims (nonce, at_hash, c_hash)', async () => {
    const o = await anyType.authenticate(bearer(await sign({}, { typ: undefined })), "/mcp");
    assert.ok("principal" in o, JSON.stringify(o));
    assert.ok("principal" in (await anyType.authenticate(bearer(await sign({}, { typ: "JWT" })), "/mcp")));
    for (const claim of ["nonce", "at_hash", "c_hash"]) {
      const f = failure(await anyType.authenticate(bearer(await sign({ [claim]: "x" }, { typ: "JWT" })), "/mcp"));
      assert.equal(f.status, 401);
      assert.match(f.message, new RegExp(`it carries ${claim}, as an OpenID ID token does`));
    }
  });

  test('a subject starting with "client:" is refused (that namespace is for tokens without a user)', async () => {
    const f = failure(await auth.authenticate(bearer(await sign({ sub: "client:ci-bot" })), "/mcp"));
    assert.equal(f.status, 401);
    assert.match(f.message, /its subject "client:ci-bot" starts with "client:"/);
  });

  test("a valid token without a required scope: 403 insufficient_scope naming it", async () => {
    const f = failure(await auth.authenticate(bearer(await sign({ scope: "other" })), "/mcp"));
    assert.equal(f.status, 403);
    assert.equal(
      f.headers["WWW-Authenticate"],
      `Bearer error="insufficient_scope", error_description="missing scope(s): mcp:tools", scope="mcp:tools", resource_metadata="${GW}/.well-known/oauth-protected-resource/mcp"`,
    );
  });

  test("the static token is the operator; an opaque token without introspection is refused", async () => {
    const o = await auth.authenticate(bearer(STATIC), "/mcp");
    assert.ok("principal" in o);
    assert.equal(o.principal, OPERATOR);
    assert.match(failure(await auth.authenticate(bearer("opaque-token-value"), "/mcp")).message, /not a JWT, and no introspection endpoint/);
  });

  test("an issuer whose metadata cannot be read: 503 naming it, and it is not asked again at once", async () => {
    const token = await sign({}, { iss: "http://127.0.0.1:9" });
    const f = failure(await auth.authenticate(bearer(token), "/mcp"));
    assert.equal(f.status, 503);
    assert.match(f.message, /http:\/\/127\.0\.0\.1:9 could not be discovered/);
    assert.equal(f.headers["Retry-After"], "5");
    assert.equal(failure(await auth.authenticate(bearer(token), "/mcp")).status, 503);
  });
});
