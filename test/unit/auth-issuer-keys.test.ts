/**
 * IssuerKeys (src/auth/issuer-keys.ts) against a loopback issuer whose
 * metadata can move its `jwks_uri`: the metadata is read again when the key
 * set is `maxAgeMs` old or on an unknown `kid` after the cooldown (not
 * before), and a failed reread keeps the last good key set.
 */
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWK } from "jose";
import { IssuerKeys, IssuerUnavailable } from "../../src/auth/issuer-keys.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const MAX_AGE = 600_000;
const COOLDOWN = 30_000;

describe("IssuerKeys: the issuer's metadata is read again", () => {
  let server: http.Server;
  let issuer: string;
  /** What the metadata names as jwks_uri (a path), or a status to fail with. */
  let jwksPath: string | number;
  const hits: string[] = [];
  const sets: Record<string, JWK[]> = {};
  let k1: CryptoKey;
  let k2: CryptoKey;

  before(async () => {
    server = http.createServer((rq, rs) => {
      hits.push(rq.url ?? "");
      if (rq.url === "/.well-known/openid-configuration") {
        if (typeof jwksPath === "number") rs.writeHead(jwksPath).end();
        else rs.end(JSON.stringify({ issuer, jwks_uri: `${issuer}${jwksPath}` }));
      } else if (rq.url && sets[rq.url]) rs.end(JSON.stringify({ keys: sets[rq.url] }));
      else rs.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const a = await generateKeyPair("ES256", { extractable: true });
    const b = await generateKeyPair("ES256", { extractable: true });
    k1 = a.privateKey;
    k2 = b.privateKey;
    sets["/jwks-a"] = [{ ...(await exportJWK(a.publicKey)), kid: "k1", alg: "ES256", use: "sig" }];
    sets["/jwks-b"] = [...sets["/jwks-a"], { ...(await exportJWK(b.publicKey)), kid: "k2", alg: "ES256", use: "sig" }];
  });
  after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  beforeEach(() => {
    jwksPath = "/jwks-a";
    hits.length = 0;
  });

  const discoveries = () => hits.filter((h) => h.startsWith("/.well-known/")).length;
  const sign = (key: CryptoKey, kid: string) => new SignJWT({ sub: "alice" }).setProtectedHeader({ alg: "ES256", kid }).setIssuer(issuer).sign(key);

  async function keysOf(clock: ManualClock) {
    const keys = new IssuerKeys({ clock, cooldownMs: COOLDOWN, maxAgeMs: MAX_AGE, retryAfterMs: 5_000, timeoutMs: 5_000 });
    const set = await keys.keysOf(issuer);
    assert.ok(!(set instanceof IssuerUnavailable), String((set as IssuerUnavailable).reason));
    assert.equal((await jwtVerify(await sign(k1, "k1"), set)).payload.sub, "alice");
    assert.equal(discoveries(), 1);
    return set;
  }

  test("when the key set is maxAgeMs old: a moved jwks_uri is used without a restart", async () => {
    const clock = new ManualClock();
    const set = await keysOf(clock);
    jwksPath = "/jwks-b";
    clock.advance(MAX_AGE - 1);
    assert.equal((await jwtVerify(await sign(k1, "k1"), set)).payload.sub, "alice");
    assert.equal(discoveries(), 1, "no reread before the max age");
    clock.advance(1);
    assert.equal((await jwtVerify(await sign(k1, "k1"), set)).payload.sub, "alice");
    assert.equal(discoveries(), 2, "read again at the max age, with a known kid");
    assert.ok(hits.includes("/jwks-b"), hits.join(" "));
    assert.equal((await jwtVerify(await sign(k2, "k2"), set)).payload.sub, "alice");
    assert.equal(discoveries(), 2);
  });

  test("on an unknown kid: read again after the cooldown, not before", async () => {
    const clock = new ManualClock();
    const set = await keysOf(clock);
    jwksPath = "/jwks-b";
    clock.advance(COOLDOWN - 1);
    await assert.rejects(jwtVerify(await sign(k2, "k2"), set), { code: "ERR_JWKS_NO_MATCHING_KEY" });
    assert.equal(discoveries(), 1, "no reread within the cooldown");
    clock.advance(1);
    assert.equal((await jwtVerify(await sign(k2, "k2"), set)).payload.sub, "alice");
    assert.equal(discoveries(), 2);
    // A kid that no set has: one reread per cooldown at most.
    await assert.rejects(jwtVerify(await sign(k2, "k9"), set), { code: "ERR_JWKS_NO_MATCHING_KEY" });
    assert.equal(discoveries(), 2);
  });

  test("a failed reread keeps the last good key set, and is not retried on every request", async () => {
    const clock = new ManualClock();
    const set = await keysOf(clock);
    jwksPath = 500;
    clock.advance(MAX_AGE);
    assert.equal((await jwtVerify(await sign(k1, "k1"), set)).payload.sub, "alice");
    const afterFailure = discoveries();
    assert.ok(afterFailure > 1, "the metadata was read again");
    assert.equal((await jwtVerify(await sign(k1, "k1"), set)).payload.sub, "alice");
    assert.equal(discoveries(), afterFailure, "no reread until the next max age");
    jwksPath = "/jwks-b";
    clock.advance(MAX_AGE);
    assert.equal((await jwtVerify(await sign(k2, "k2"), set)).payload.sub, "alice");
  });
});
