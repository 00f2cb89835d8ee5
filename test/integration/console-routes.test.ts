/**
 * The console's route table (src/console/router.ts, index.ts) over real HTTP:
 * a path not in the table is the console's 404 page, a path in it asked with
 * another method is 405 with an Allow header, both behind the token; the
 * login and logout cookies are set in one place (cookies.ts). And the table's
 * `auth` column agrees with what the HTTP guards demand.
 */
import assert from "node:assert/strict";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { after, before, describe, test } from "node:test";
import { parseConfig } from "../../src/config/load.js";
import { CONSOLE_COOKIE, consoleCookieValue, loginCookieMatches } from "../../src/console/cookies.js";
import { createConsole } from "../../src/console/index.js";
import { checkRequest } from "../../src/http/guards.js";
import { createGateway } from "../../src/server/gateway.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";

const TOKEN = "console-routes-token-0123456789";

describe("console routes over HTTP", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let base: string;
  let origin: string;

  before(async () => {
    gw = await startGateway({ mcpServers: {}, gateway: { token: TOKEN } });
    base = gw.url.replace(/\/mcp$/, "");
    origin = new URL(base).origin;
  });
  after(() => gw?.close());

  const ask = (method: string, path: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, { method, redirect: "manual", headers: { authorization: `Bearer ${TOKEN}`, origin, ...headers } });

  test("a path not in the table is the console's 404 page (GET and HEAD), with the inbox badge's page around it", async () => {
    for (const path of ["/console/nope", "/console/tasks/t1/extra", "/console/assets/other.css", "/console/inbox/r1/x"]) {
      const res = await ask("GET", path);
      assert.equal(res.status, 404, path);
      assert.match(res.headers.get("content-type") ?? "", /text\/html/);
      assert.match(await res.text(), /No console page at <code>/);
    }
    assert.equal((await ask("HEAD", "/console/nope")).status, 404);
    assert.equal((await ask("POST", "/console/nope")).status, 404, "an unknown path is 404 whatever the method");
  });

  test("a path in the table asked with another method is 405 and names the allowed ones in Allow", async () => {
    const cases: Array<[string, string, string]> = [
      ["DELETE", "/console", "GET, HEAD"],
      ["POST", "/console/tasks", "GET, HEAD"],
      ["GET", "/console/logout", "POST"],
      ["GET", "/console/tasks/t1/cancel", "POST"],
      ["POST", "/console/tasks/t1", "GET, HEAD"],
      ["PUT", "/console/inbox/r1", "POST, GET, HEAD"],
      ["PUT", "/console/login", "GET, HEAD, POST"],
      ["POST", "/console/events", "GET, HEAD"],
      ["POST", "/console/assets/console.css", "GET, HEAD"],
    ];
    for (const [method, path, allow] of cases) {
      const res = await ask(method, path);
      assert.equal(res.status, 405, `${method} ${path}`);
      assert.equal(res.headers.get("allow"), allow, `${method} ${path}`);
      assert.match(await res.text(), new RegExp(`${method} is not allowed on ${path.replace(/[.]/g, "\\.")}`));
    }
  });

  test("404 and 405 are behind the token: without it a browser goes to the login page, anything else gets 401", async () => {
    const browser = await fetch(`${base}/console/nope`, { redirect: "manual", headers: { accept: "text/html" } });
    assert.equal(browser.status, 303);
    assert.equal(browser.headers.get("location"), "/console/login?next=%2Fconsole%2Fnope");
    assert.equal((await fetch(`${base}/console/logout`)).status, 401, "a GET of a POST route");
  });

  test("the login cookie: set on log-in (HttpOnly, SameSite=Strict, Path=/console; a hash, not the token), accepted, cleared on log-out", async () => {
    const body = new URLSearchParams({ token: TOKEN, next: "/console/tasks" }).toString();
    const login = await fetch(`${base}/console/login`, {
      method: "POST",
      redirect: "manual",
      headers: { origin, "content-type": "application/x-www-form-urlencoded" },
      body,
    });
    assert.equal(login.status, 303);
    assert.equal(login.headers.get("location"), "/console/tasks");
    const set = login.headers.get("set-cookie") ?? "";
    assert.equal(set, `${CONSOLE_COOKIE}=${consoleCookieValue(TOKEN)}; HttpOnly; SameSite=Strict; Path=/console`);
    assert.doesNotMatch(set, new RegExp(TOKEN));
    const cookie = set.split(";")[0]!;
    const page = await fetch(`${base}/console/tasks`, { headers: { cookie } });
    assert.equal(page.status, 200);
    const logout = await fetch(`${base}/console/logout`, { method: "POST", redirect: "manual", headers: { cookie, origin } });
    assert.equal(logout.status, 303);
    assert.equal(logout.headers.get("set-cookie"), `${CONSOLE_COOKIE}=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0`);
  });
});

test("the table's auth column is what the guards demand: `none` passes without a token, `token` does not", async () => {
  const gateway = createGateway(parseConfig({ mcpServers: {}, gateway: { port: 0, logLevel: "silent", token: TOKEN } }));
  const web = createConsole({ context: gateway.context, childProcesses: () => 0 });
  const guard = { allowedHosts: [], allowedOrigins: [], token: TOKEN, consoleCredential: loginCookieMatches };
  const host = "127.0.0.1:8808";
  const req = (method: string, url: string, headers: IncomingHttpHeaders = {}) =>
    ({ method, url, headers: { host, origin: `http://${host}`, ...headers } }) as unknown as IncomingMessage;
  const kinds = new Set<string>();
  for (const route of web.routes) {
    kinds.add(route.auth);
    const path = route.path.replace(/:\w+/g, "x").replace(/\*$/, "version");
    const method = route.method === "*" ? "GET" : route.method;
    const failure = checkRequest(req(method, path), guard);
    if (route.auth === "none") assert.equal(failure, undefined, `${route.method} ${route.path} needs no token`);
    else assert.equal(failure?.status, 401, `${route.method} ${route.path} needs the token first`);
    if (route.auth !== "none") assert.equal(checkRequest(req(method, path, { cookie: `${CONSOLE_COOKIE}=${consoleCookieValue(TOKEN)}` }), guard), undefined);
  }
  assert.deepEqual([...kinds].sort(), ["none", "replica", "token"]);
  await gateway.close();
});
