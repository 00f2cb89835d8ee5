/**
 * The console's cookies and the login binding (issue 22): Set-Cookie
 * attributes with and without https, a callback refused without the browser's
 * binding cookie (the started login is used up either way), and the
 * cluster's "for whom" header refusing what names no one.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { gatewaySettingsSchema } from "../../src/config/schema.js";
import { decodeScope, encodeScope } from "../../src/console/cluster.js";
import {
  bindingCookie,
  bindingHash,
  clearBindingCookie,
  cookieOptions,
  loginCookie,
  logoutCookie,
  newLoginBinding,
  sessionCookie,
} from "../../src/console/cookies.js";
import { ConsoleOidc } from "../../src/console/oidc.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";

test("every console cookie is HttpOnly; Secure only when served over https; the binding cookie is Lax and only for the callback", () => {
  for (const secure of [false, true]) {
    const o = { secure };
    const all = [loginCookie("t".repeat(16), o), logoutCookie(o), sessionCookie("id", 60_000, o), bindingCookie("b", 600_000, o), clearBindingCookie(o)];
    for (const c of all) {
      assert.match(c, /; HttpOnly;/);
      assert.equal(/; Secure(;|$)/.test(c), secure, c);
    }
    for (const c of all.slice(0, 3)) assert.match(c, /; SameSite=Strict; Path=\/console(;|$)/);
    for (const c of all.slice(3)) assert.match(c, /; SameSite=Lax; Path=\/console\/callback(;|$)/);
  }
  assert.match(bindingCookie("b", 600_000, { secure: false }), /Max-Age=600$/);
  assert.match(clearBindingCookie({ secure: false }), /^emceepee_login=; .*Max-Age=0$/);
  assert.notEqual(newLoginBinding(), newLoginBinding());
  assert.match(newLoginBinding(), /^[A-Za-z0-9_-]{43}$/);
});

test("cookie options from gateway.http.publicUrl: Secure for https, paths under the public URL's path", () => {
  assert.deepEqual(cookieOptions(undefined), { secure: false });
  assert.deepEqual(cookieOptions("http://gw.example"), { secure: false, prefix: "" });
  assert.deepEqual(cookieOptions("https://gw.example/"), { secure: true, prefix: "" });
  const under = cookieOptions("https://example.com/gateway/");
  assert.deepEqual(under, { secure: true, prefix: "/gateway" });
  assert.match(sessionCookie("id", 60_000, under), /; Path=\/gateway\/console; Secure;/);
  assert.match(bindingCookie("b", 60_000, under), /; Path=\/gateway\/console\/callback; Secure;/);
});

test("a callback without the binding cookie of its login (missing, or another's) is EMCP_CONSOLE_LOGIN_FAILED, and the login is used up", async () => {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const settings = gatewaySettingsSchema.parse({ console: { oidc: { clientId: "console", issuer: "https://login.example.com" } } }).console.oidc;
  const oidc = new ConsoleOidc(settings, undefined, clock, () => store.logins);
  const mine = newLoginBinding();
  const started = (state: string) => ({
    state,
    verifier: "v",
    nonce: "n",
    bindingHash: bindingHash(mine),
    redirectUri: "https://gw.example/console/callback",
    next: "/console",
    createdAt: clock.now(),
    expiresAt: clock.now() + 600_000,
  });
  for (const [state, cookie] of [
    ["s1", undefined],
    ["s2", `emceepee_login=${newLoginBinding()}`],
    ["s3", "emceepee_login="],
    ["s4", `other=${mine}`],
  ] as const) {
    await store.logins.put(started(state), 10);
    const err = await oidc.finish(new URL(`https://gw.example/console/callback?state=${state}&code=c`), cookie).then(
      () => assert.fail("finished"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof GatewayError && err.code === ErrorCodes.CONSOLE_LOGIN_FAILED, String(err));
    assert.match(err.message, /not started in this browser/);
    assert.equal(await store.logins.take(state, clock.now()), undefined, "taken: the state cannot be tried again");
  }
  await store.close();
});

test("the cluster's 'for whom' header: all or a principal round-trips; nothing, junk, or neither all nor a principal is refused", () => {
  const p = { issuer: "https://login.example.com", subject: "alice" };
  assert.deepEqual(decodeScope(encodeScope({ all: false, principal: p })), { all: false, principal: p });
  assert.deepEqual(decodeScope(encodeScope({ all: true, principal: p })), { all: true, principal: p });
  assert.deepEqual(decodeScope(encodeScope({ all: true })), { all: true });
  for (const bad of [undefined, "", "all", "%%%", ["x"], encodeScope({ all: false }), Buffer.from('{"all":"yes"}').toString("base64url")]) {
    assert.equal(decodeScope(bad), undefined, String(bad));
  }
  assert.equal(decodeScope(Buffer.from(JSON.stringify({ all: false, issuer: "i", subject: "" })).toString("base64url")), undefined);
});
