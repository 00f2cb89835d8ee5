/**
 * The console's part of the HTTP guards (src/http/guards.ts, given the
 * console's cookie check, src/console/cookies.ts): under /console the token
 * may come from the login cookie (a hash of it), the login page
 * needs none, a browser without it is sent there, and every console POST
 * needs an Origin of this very host. Elsewhere nothing changes: the cookie
 * is no token for /mcp.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { CONSOLE_COOKIE, consoleCookieValue, loginCookieMatches } from "../../src/console/cookies.js";
import { checkRequest, type GuardOptions } from "../../src/http/guards.js";

const TOKEN = "0123456789abcdef-secret";
const O: GuardOptions = { allowedHosts: [], allowedOrigins: ["https://app.example.com"], token: TOKEN, consoleCredential: loginCookieMatches };
const HOST = "127.0.0.1:8808";
const COOKIE = `other=1; ${CONSOLE_COOKIE}=${consoleCookieValue(TOKEN)}`;

function req(method: string, url: string, headers: IncomingHttpHeaders = {}): IncomingMessage {
  return { method, url, headers: { host: HOST, ...headers } } as unknown as IncomingMessage;
}

test("the cookie holds a hash of the token, not the token", () => {
  assert.doesNotMatch(consoleCookieValue(TOKEN), new RegExp(TOKEN));
  assert.notEqual(consoleCookieValue(TOKEN), consoleCookieValue(`${TOKEN}x`));
});

test("console pages: bearer or cookie; browsers without either go to the login page, others get 401", () => {
  assert.equal(checkRequest(req("GET", "/console", { authorization: `Bearer ${TOKEN}` }), O), undefined);
  assert.equal(checkRequest(req("GET", "/console/tasks?x=1", { cookie: COOKIE }), O), undefined);
  const browser = checkRequest(req("GET", "/console/inbox", { accept: "text/html,*/*" }), O);
  assert.equal(browser?.status, 303);
  assert.equal(browser?.headers?.Location, "/console/login?next=%2Fconsole%2Finbox");
  assert.equal(checkRequest(req("GET", "/console/events", { accept: "text/event-stream" }), O)?.status, 401);
  assert.equal(checkRequest(req("GET", "/console", { cookie: `${CONSOLE_COOKIE}=${consoleCookieValue("wrong-token-wrong-token")}` }), O)?.status, 401);
  assert.equal(checkRequest(req("GET", "/console/login"), O), undefined, "the login page needs no token");
  assert.equal(checkRequest(req("GET", "/consolex"), O)?.status, 401, "only /console and below are the console's");
});

test("the cookie is no token outside the console", () => {
  assert.equal(checkRequest(req("POST", "/mcp", { cookie: COOKIE }), O)?.status, 401);
});

test("console POSTs need an Origin of this host (the login form's too), whatever the token", () => {
  const post = (headers: IncomingHttpHeaders, url = "/console/inbox/r1") => checkRequest(req("POST", url, { cookie: COOKIE, ...headers }), O);
  assert.equal(post({ origin: `http://${HOST}` }), undefined);
  assert.equal(post({})?.status, 403, "no Origin");
  assert.equal(post({ origin: "null" })?.status, 403, "an opaque origin");
  assert.equal(post({ origin: "http://localhost:8808" })?.status, 403, "another host, although loopback");
  assert.equal(post({ origin: "https://app.example.com" })?.status, 403, "an origin allowed for MCP clients is no console page");
  assert.equal(post({}, "/console/login")?.status, 403);
  assert.equal(post({ origin: `http://${HOST}` }, "/console/login"), undefined);
});
