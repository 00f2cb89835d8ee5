/**
 * The console's OpenID Connect login and roles (issue 22), with real parts:
 * oidc-provider on loopback (test/helpers/oidc.ts) as the one issuer of the
 * MCP endpoints' access tokens and the console's ID tokens, the SDK's OAuth
 * client for two people's MCP sessions (each with a pending elicitation of
 * server-everything, in process: test/helpers/in-process.ts), and Chromium going through the provider's own login and
 * consent pages. In process: the callback's failures (unknown state, a wrong
 * nonce) end on an error page and create nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { BrowserContext, Page } from "playwright-core";
import { principalHash } from "../../src/auth/principal.js";
import { createLogger, sessionHash } from "../../src/logging.js";
import { browserUnavailable, launchBrowser, type TestBrowser } from "../helpers/browser.js";
import { call, startGateway, type TestGateway } from "../helpers/gateway.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import { freePort, startEverythingHttp } from "../helpers/core-extra.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import {
  consoleCallbackLink,
  consoleLogin,
  consoleSessionCookieOf,
  loginHeadless,
  startConsoleLogin,
  startOidcProvider,
  type TestOidcProvider,
} from "../helpers/oidc.js";
import { promote } from "../helpers/async-extra.js";

const SCOPE = "mcp:tools";
const MCP_REDIRECT = "http://127.0.0.1:65501/callback";
const CONSOLE_SECRET = "console-client-secret-0123456789";
/** A gateway behind TLS offload: its public URL is https, it is served over http on loopback. */
const TLS_PUBLIC_URL = "https://console.example.test";
const TLS_TOKEN = "console-oidc-static-token-0123456789";

/** An MCP session on /mcp owned by `user` (logged in through the provider headlessly); its session id. */
function connectAs(url: string, user: string): Promise<{ client: Client; sessionId: string }> {
  return loginAndConnect(url, user, new MemoryOAuthClient(MCP_REDIRECT));
}

describe("console login with OpenID Connect, and roles", { timeout: 600_000 }, () => {
  let idp: TestOidcProvider;
  let gw: TestGateway;
  let base: string;
  /** A second gateway's port (the login-start limit test), registered at the provider now. */
  let floodPort: number;
  const lines: Record<string, unknown>[] = [];
  const clients: Client[] = [];
  const refs: Record<string, string> = {};

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    floodPort = await freePort();
    idp = await startOidcProvider({
      scopes: [SCOPE],
      accountClaims: (id) => ({ roles: id === "root" ? ["ops"] : id === "vera" ? ["readonly"] : [] }),
      clients: [
        {
          client_id: "mcp-client",
          redirect_uris: [MCP_REDIRECT],
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
        {
          client_id: "console",
          client_secret: CONSOLE_SECRET,
          redirect_uris: [`${base}/console/callback`, `${TLS_PUBLIC_URL}/console/callback`, `http://127.0.0.1:${floodPort}/console/callback`],
          token_endpoint_auth_method: "client_secret_post",
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
      ],
    });
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    gw = await startInProcessGateway(
      {
        gateway: {
          port,
          logLevel: "info",
          auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
          console: {
            oidc: { clientId: "console", clientSecret: CONSOLE_SECRET, scopes: ["openid", "roles"], roles: { admin: ["ops"], viewer: ["readonly"] } },
          },
        },
      },
      { logger: createLogger("info", sink) },
    );
    for (const user of ["alice", "bob"]) {
      const { client, sessionId } = await connectAs(`${base}/mcp`, user);
      clients.push(client);
      refs[user] = sessionHash(sessionId);
      await promote(client, "everything", "trigger-elicitation-request", {}, 1_000);
    }
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.close();
    await idp?.close();
  });

  test("a callback with a state the console never started is a clear error page and sets no cookie", async () => {
    const res = await fetch(`${base}/console/callback?state=not-one-of-ours&code=whatever`, { redirect: "manual" });
    assert.equal(res.status, 400);
    assert.equal(consoleSessionCookieOf(res), undefined, "no console session");
    assert.match(await res.text(), /EMCP_CONSOLE_LOGIN_FAILED|unknown or expired/);
  });

  test("the login's state is bound to the browser that started it: the binding cookie is HttpOnly, SameSite=Lax, only for the callback", async () => {
    const started = await startConsoleLogin(base);
    assert.match(started.setCookie, /^emceepee_login=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Lax; Path=\/console\/callback; Max-Age=600$/);
    assert.doesNotMatch(started.setCookie, /Secure/, "served over http (no https public URL)");
  });

  test("login CSRF: an attacker's callback link (their own code and state) is refused in a browser that did not start that login", async () => {
    const victim = await startConsoleLogin(base);
    for (const cookie of [undefined, victim.cookie]) {
      const attacker = await startConsoleLogin(base);
      const code = await loginHeadless(attacker.authorize, "mallory", `${base}/console/callback`);
      const res = await fetch(consoleCallbackLink(base, code, attacker.state, idp.issuer), {
        redirect: "manual",
        headers: cookie === undefined ? {} : { cookie },
      });
      assert.equal(res.status, 400, `victim cookie: ${String(cookie)}`);
      assert.equal(consoleSessionCookieOf(res), undefined, "the victim is not logged in as the attacker");
      const text = await res.text();
      assert.match(text, /EMCP_CONSOLE_LOGIN_FAILED/);
      assert.match(text, /not started in this browser/);
      assert.ok(
        lines.some((l) => l.msg === "console_login_failed" && l.code === "EMCP_CONSOLE_LOGIN_FAILED" && /not started in this browser/.test(String(l.err))),
        "the refusal is logged",
      );
    }
    assert.ok(!lines.some((l) => l.msg === "console_login" && l.principalHash === principalHash(idp.issuer, "mallory")), "no login as the attacker");
  });

  test("the browser that started the login completes it once: new session cookie (Strict), binding cookie cleared; the same callback again is refused", async () => {
    const mine = await startConsoleLogin(base);
    const code = await loginHeadless(mine.authorize, "alice", `${base}/console/callback`);
    const link = consoleCallbackLink(base, code, mine.state, idp.issuer);
    const res = await fetch(link, { redirect: "manual", headers: { cookie: mine.cookie } });
    assert.equal(res.status, 200, await res.clone().text());
    assert.match(consoleSessionCookieOf(res) ?? "", /^emceepee_console=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/console; Max-Age=\d+$/);
    assert.ok(
      res.headers.getSetCookie().some((c) => /^emceepee_login=; HttpOnly; SameSite=Lax; Path=\/console\/callback; Max-Age=0$/.test(c)),
      "binding cookie cleared",
    );
    const replay = await fetch(link, { redirect: "manual", headers: { cookie: mine.cookie } });
    assert.equal(replay.status, 400);
    assert.equal(consoleSessionCookieOf(replay), undefined);
    assert.match(await replay.text(), /unknown or expired/);
  });

  test("an ID token with another nonce than the login's is refused: error page, no cookie, and the state cannot be used again", async () => {
    const start = await fetch(`${base}/console/login`, { redirect: "manual" });
    assert.equal(start.status, 303, "without a static token, /console/login goes straight to the provider");
    const authorize = new URL(start.headers.get("location")!);
    assert.equal(authorize.origin, idp.issuer);
    assert.equal(authorize.searchParams.get("code_challenge_method"), "S256");
    const state = authorize.searchParams.get("state")!;
    authorize.searchParams.set("nonce", "a-nonce-the-console-never-made");
    const code = await loginHeadless(authorize, "alice", `${base}/console/callback`);
    const callback = `${base}/console/callback?${new URLSearchParams({ code, state, iss: idp.issuer }).toString()}`;
    const cookie = start.headers.getSetCookie()[0]!.split(";")[0]!;
    const res = await fetch(callback, { redirect: "manual", headers: { cookie } });
    assert.equal(res.status, 400);
    assert.equal(consoleSessionCookieOf(res), undefined, "no console session");
    assert.match(await res.text(), /nonce/);
    const again = await fetch(callback, { redirect: "manual", headers: { cookie } });
    assert.equal(again.status, 400);
    assert.match(await again.text(), /unknown or expired/);
  });

  test("behind TLS offload (an https gateway.http.publicUrl) every console cookie is Secure: binding, session, static-token login, logout", async () => {
    const port = await freePort();
    const tlsBase = `http://127.0.0.1:${port}`;
    const tls = await startGateway({
      gateway: {
        port,
        token: TLS_TOKEN,
        http: { publicUrl: TLS_PUBLIC_URL },
        auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
        console: { oidc: { clientId: "console", clientSecret: CONSOLE_SECRET, scopes: ["openid", "roles"] } },
      },
    });
    try {
      const started = await startConsoleLogin(tlsBase, "?oidc=1");
      assert.match(started.setCookie, /; Secure(;|$)/, started.setCookie);
      assert.equal(started.authorize.searchParams.get("redirect_uri"), `${TLS_PUBLIC_URL}/console/callback`);
      const code = await loginHeadless(started.authorize, "alice", `${TLS_PUBLIC_URL}/console/callback`);
      const done = await fetch(consoleCallbackLink(tlsBase, code, started.state, idp.issuer), { redirect: "manual", headers: { cookie: started.cookie } });
      assert.equal(done.status, 200, await done.clone().text());
      const set = done.headers.getSetCookie();
      assert.equal(set.length, 2);
      for (const c of set) assert.match(c, /; Secure(;|$)/, c);
      const login = await fetch(`${tlsBase}/console/login`, {
        method: "POST",
        redirect: "manual",
        headers: { Origin: tlsBase, "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: TLS_TOKEN, next: "/console" }),
      });
      assert.equal(login.status, 303);
      assert.match(login.headers.get("set-cookie") ?? "", /^emceepee_console=[0-9a-f]{64}; HttpOnly; SameSite=Strict; Path=\/console; Secure$/);
      const logout = await fetch(`${tlsBase}/console/logout`, {
        method: "POST",
        redirect: "manual",
        headers: { Origin: tlsBase, Authorization: `Bearer ${TLS_TOKEN}` },
      });
      assert.equal(logout.status, 303);
      assert.match(logout.headers.get("set-cookie") ?? "", /^emceepee_console=; .*; Secure; Max-Age=0$/);
      // The static-token login over plain http (the main gateway has no https public URL) sets no Secure: see the binding cookie test.
    } finally {
      await tls.close();
    }
  });

  /** A console session of `user` (through the provider's login headlessly): its Cookie header. */
  const consoleCookie = (user: string): Promise<string> => consoleLogin(base, user, idp.issuer);

  test("a runtime server is shown to its adding principal and admins only: overview and tasks filter; the child process count to admins only", async (t) => {
    const remote = await startEverythingHttp();
    t.after(() => remote.close());
    const added = await call(clients[1]!, "add_server", { name: "bobs-runtime-up", url: remote.url });
    assert.notEqual(added.isError, true, JSON.stringify(added));
    t.after(() => call(clients[1]!, "remove_server", { name: "bobs-runtime-up" }).catch(() => undefined));
    const read = async (cookie: string, path: string): Promise<string> => {
      const res = await fetch(`${base}${path}`, { headers: { cookie } });
      assert.equal(res.status, 200, path);
      return res.text();
    };
    const alice = await consoleCookie("alice");
    const bob = await consoleCookie("bob");
    const root = await consoleCookie("root");
    for (const path of ["/console", "/console/tasks"]) {
      const seen = await read(alice, path);
      assert.match(seen, /everything/, `${path}: config-file servers are everyone's`);
      assert.doesNotMatch(seen, /bobs-runtime-up/, `${path}: alice must not see bob's runtime server`);
      assert.match(await read(bob, path), /bobs-runtime-up/, `${path}: bob sees his own`);
      assert.match(await read(root, path), /bobs-runtime-up/, `${path}: an admin sees every server`);
    }
    assert.doesNotMatch(await read(alice, "/console"), /child process/, "the gateway-wide process count is not a person's to see");
    assert.match(await read(root, "/console"), /\d+ stdio child process/);
  });

  test("one address cannot push out others' started logins: beyond maxLoginStartsPerAddress its starts get 429 (Retry-After), store nothing, and a login started elsewhere still completes", async () => {
    const floodBase = `http://127.0.0.1:${floodPort}`;
    const flood = await startGateway({
      gateway: {
        port: floodPort,
        auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
        console: { oidc: { clientId: "console", clientSecret: CONSOLE_SECRET, maxPendingLogins: 3, maxLoginStartsPerAddress: 2 } },
      },
    });
    try {
      // The person's login, from 127.0.0.1; then another loopback address (127.0.0.2) starts many.
      const mine = await startConsoleLogin(floodBase);
      const fromOther = (): Promise<{ status: number; retryAfter: string | undefined; setCookie: string | string[] | undefined; body: string }> =>
        new Promise((resolve, reject) => {
          const req = http.get(`${floodBase}/console/login`, { localAddress: "127.0.0.2" }, (res) => {
            let body = "";
            res.on("data", (c: Buffer) => (body += c.toString("utf8")));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"], setCookie: res.headers["set-cookie"], body }));
          });
          req.on("error", reject);
        });
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push(await fromOther());
      assert.deepEqual(
        answers.map((a) => a.status),
        [303, 303, 429, 429, 429, 429],
      );
      const refused = answers[2]!;
      assert.match(refused.retryAfter ?? "", /^\d+$/);
      assert.ok(Number(refused.retryAfter) >= 1);
      assert.equal(refused.setCookie, undefined, "no binding cookie: no login was started");
      assert.match(refused.body, /Too many logins started from this address/);
      assert.match(refused.body, /maxLoginStartsPerAddress/);
      // Two of the other address's starts and the person's own fit in maxPendingLogins (3): the person's login still completes.
      const code = await loginHeadless(mine.authorize, "alice", `${floodBase}/console/callback`);
      const done = await fetch(consoleCallbackLink(floodBase, code, mine.state, idp.issuer), { redirect: "manual", headers: { cookie: mine.cookie } });
      assert.equal(done.status, 200, await done.clone().text());
      assert.ok(consoleSessionCookieOf(done), "logged in");
    } finally {
      await flood.close();
    }
  });

  describe("in Chromium", { skip: browserUnavailable() }, () => {
    let browser: TestBrowser;
    const contexts: BrowserContext[] = [];
    before(async () => {
      browser = await launchBrowser();
    });
    after(async () => {
      for (const c of contexts) await c.close().catch(() => {});
      await browser?.close();
    });

    /** A fresh browser for `user`: /console/inbox → the provider's login and consent pages → back at the inbox. */
    async function logIn(user: string): Promise<Page> {
      const context = await browser.browser.newContext();
      contexts.push(context);
      const page = await context.newPage();
      await page.goto(`${base}/console/inbox`, { waitUntil: "commit" });
      for (let step = 0; step < 6 && !page.url().startsWith(`${base}/console/inbox`); step++) {
        await page.waitForSelector("input[name=login], button[type=submit]", { timeout: 60_000 });
        if (page.url().startsWith(`${base}/console/inbox`)) break;
        if ((await page.locator("input[name=login]").count()) > 0) {
          await page.fill("input[name=login]", user);
          await page.fill("input[name=password]", "any");
        }
        const here = page.url();
        await Promise.all([page.waitForURL((u) => u.href !== here, { timeout: 60_000, waitUntil: "commit" }), page.click("button[type=submit]")]);
      }
      await page.waitForURL(`${base}/console/inbox`, { timeout: 60_000 });
      await page.locator("main").waitFor();
      return page;
    }

    const shownSessions = async (page: Page): Promise<string[]> =>
      (await page.locator("article.request input[name=session]").evaluateAll((els) => els.map((e) => (e as unknown as { value: string }).value))).sort();

    test("an admin (roles claim 'ops') sees both people's sessions", async () => {
      const page = await logIn("root");
      assert.deepEqual(await shownSessions(page), [refs.alice!, refs.bob!].sort());
      const cookie = (await page.context().cookies()).find((c) => c.name === "emceepee_console");
      assert.equal(cookie?.httpOnly, true);
      assert.equal(cookie?.sameSite, "Strict");
      assert.ok(lines.some((l) => l.msg === "console_login" && l.principalHash === principalHash(idp.issuer, "root") && l.role === "admin"));
    });

    test("a viewer sees only their own (none) and may not answer: 403", async () => {
      const page = await logIn("vera");
      assert.deepEqual(await shownSessions(page), []);
      const status = await page.evaluate(
        async ([session]) =>
          (
            await fetch("/console/inbox/req-anything", {
              method: "POST",
              body: new URLSearchParams({ session: session!, kind: "elicitation", action: "decline" }),
            })
          ).status,
        [refs.bob],
      );
      assert.equal(status, 403);
    });

    test("a person sees only their own session's elicitation and answers it; the answer is logged with their principal hash", async () => {
      const page = await logIn("alice");
      assert.deepEqual(await shownSessions(page), [refs.alice]);
      const item = page.locator("article.request");
      const requestId = (await item.getAttribute("data-key"))!;
      await item.getByRole("button", { name: "Decline" }).click();
      await page.waitForURL(/\/console\/inbox\?answered=/);
      assert.equal(await page.locator("article.request").count(), 0);
      const line = lines.find((l) => l.msg === "console_action" && l.requestId === requestId);
      assert.equal(line?.principalHash, principalHash(idp.issuer, "alice"));
      assert.equal(line?.outcome, "answered");
      // Bob's is still pending: an admin still sees it.
      const admin = await logIn("root");
      assert.deepEqual(await shownSessions(admin), [refs.bob]);
    });
  });
});
