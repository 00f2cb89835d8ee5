import { test, describe } from "node:test";
import assert from "node:assert/strict";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { checkRequest, type GuardOptions } from "../../src/http/guards.js";

function req(headers: IncomingHttpHeaders): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

const OPEN: GuardOptions = { allowedHosts: [], allowedOrigins: [] };
const TOKEN = "0123456789abcdef-secret";
const WITH_TOKEN: GuardOptions = { ...OPEN, token: TOKEN };

describe("checkRequest: Host", () => {
  test("loopback hosts are accepted with and without a port", () => {
    for (const host of ["localhost", "localhost:8808", "127.0.0.1", "127.0.0.1:8808", "[::1]", "[::1]:8808", "LOCALHOST:8808"]) {
      assert.equal(checkRequest(req({ host }), OPEN), undefined, host);
    }
  });

  test("foreign or missing hosts are rejected with 403 and a hint", () => {
    for (const host of ["evil.example.com", "evil.example.com:8808", "localhost.evil.com", "127.0.0.1.nip.io:8808", "0.0.0.0:8808", "192.168.1.10:8808"]) {
      const f = checkRequest(req({ host }), OPEN);
      assert.equal(f?.status, 403, host);
      assert.match(f?.message ?? "", /gateway\.allowedHosts/);
      assert.ok(f?.message.includes(host));
    }
    assert.equal(checkRequest(req({}), OPEN)?.status, 403);
  });

  test("allowedHosts are honoured by name (any port) or exact host:port, case-insensitively", () => {
    const o: GuardOptions = { allowedHosts: ["gateway.internal", "box:9000"], allowedOrigins: [] };
    assert.equal(checkRequest(req({ host: "gateway.internal" }), o), undefined);
    assert.equal(checkRequest(req({ host: "gateway.internal:8808" }), o), undefined);
    assert.equal(checkRequest(req({ host: "GATEWAY.internal:8808" }), o), undefined);
    assert.equal(checkRequest(req({ host: "box:9000" }), o), undefined);
    assert.equal(checkRequest(req({ host: "other.internal" }), o)?.status, 403);
    // Loopback still works.
    assert.equal(checkRequest(req({ host: "localhost:1" }), o), undefined);
  });
});

describe("checkRequest: Origin", () => {
  test("no Origin (non-browser clients) is fine", () => {
    assert.equal(checkRequest(req({ host: "localhost" }), OPEN), undefined);
  });

  test("loopback origins are accepted", () => {
    for (const origin of ["http://localhost:3000", "http://127.0.0.1", "https://localhost", "http://[::1]:5173"]) {
      assert.equal(checkRequest(req({ host: "localhost:8808", origin }), OPEN), undefined, origin);
    }
  });

  test("foreign origins are rejected with 403 and a hint", () => {
    for (const origin of ["https://evil.example.com", "http://localhost.evil.com", "null", "file://localhost/x", "not a url"]) {
      const f = checkRequest(req({ host: "localhost:8808", origin }), OPEN);
      assert.equal(f?.status, 403, origin);
      assert.match(f?.message ?? "", /gateway\.allowedOrigins/);
    }
  });

  test("allowedOrigins are honoured exactly", () => {
    const o: GuardOptions = { allowedHosts: [], allowedOrigins: ["https://app.example.com"] };
    assert.equal(checkRequest(req({ host: "localhost", origin: "https://app.example.com" }), o), undefined);
    assert.equal(checkRequest(req({ host: "localhost", origin: "https://app.example.com:444" }), o)?.status, 403);
    assert.equal(checkRequest(req({ host: "localhost", origin: "https://evil.example.com" }), o)?.status, 403);
  });

  test("the Host check runs first", () => {
    const f = checkRequest(req({ host: "evil.com", origin: "http://localhost" }), OPEN);
    assert.match(f?.message ?? "", /Host/);
  });
});

describe("checkRequest: bearer token", () => {
  test("no token configured: no Authorization needed", () => {
    assert.equal(checkRequest(req({ host: "localhost" }), OPEN), undefined);
    assert.equal(checkRequest(req({ host: "localhost", authorization: "Bearer whatever" }), OPEN), undefined);
  });

  test("token configured: a missing Authorization header is 401 with WWW-Authenticate", () => {
    const f = checkRequest(req({ host: "localhost" }), WITH_TOKEN);
    assert.ok(f);
    assert.equal(f.status, 401);
    assert.match(f.headers?.["WWW-Authenticate"] ?? "", /^Bearer realm=/);
    assert.match(f.message, /bearer token/);
    assert.ok(!f.message.includes(TOKEN), "the message must not leak the token");
  });

  test("a wrong token or scheme is rejected", () => {
    for (const authorization of ["Bearer wrong", `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${TOKEN}`, TOKEN, "Bearer "]) {
      assert.equal(checkRequest(req({ host: "localhost", authorization }), WITH_TOKEN)?.status, 401, authorization);
    }
  });

  test("the right token is accepted (scheme case-insensitive, surrounding spaces ignored)", () => {
    assert.equal(checkRequest(req({ host: "localhost", authorization: `Bearer ${TOKEN}` }), WITH_TOKEN), undefined);
    assert.equal(checkRequest(req({ host: "localhost", authorization: `bearer ${TOKEN}` }), WITH_TOKEN), undefined);
    assert.equal(checkRequest(req({ host: "localhost", authorization: `Bearer   ${TOKEN}  ` }), WITH_TOKEN), undefined);
  });

  test("Host and Origin are checked before the token (403 beats 401)", () => {
    assert.equal(checkRequest(req({ host: "evil.com", authorization: `Bearer ${TOKEN}` }), WITH_TOKEN)?.status, 403);
    assert.equal(checkRequest(req({ host: "localhost", origin: "https://evil.com" }), WITH_TOKEN)?.status, 403);
  });
});

describe("checkRequest: with OAuth on", () => {
  const OAUTH: GuardOptions = { ...OPEN, oauth: true };
  test("bearer tokens outside /console are left to the Authenticator (src/auth); Host and Origin are still checked", () => {
    assert.equal(checkRequest(req({ host: "localhost" }), OAUTH), undefined);
    assert.equal(checkRequest(req({ host: "localhost", authorization: "Bearer anything" }), { ...OAUTH, token: TOKEN }), undefined);
    assert.equal(checkRequest(req({ host: "evil.com" }), OAUTH)?.status, 403);
  });

  test("the console without a static token is closed (403), not open", () => {
    const console = { ...req({ host: "localhost" }), url: "/console", method: "GET" } as IncomingMessage;
    const f = checkRequest(console, OAUTH);
    assert.equal(f?.status, 403);
    assert.match(f?.message ?? "", /the console needs a login: set gateway\.console\.oidc .* or gateway\.token/);
    assert.equal(checkRequest(console, { ...OAUTH, token: TOKEN })?.status, 401, "with a static token: its usual login");
  });
});
