/**
 * The console's OpenID Connect login and roles (issue 22), with real parts:
 * oidc-provider on loopback (test/helpers/oidc.ts) as the one issuer of the
 * MCP endpoints' access tokens and the console's ID tokens, the SDK's OAuth
 * client for two people's MCP sessions (each with a pending elicitation of
 * server-everything), and Chromium going through the provider's own login and
 * consent pages. In process: the callback's failures (unknown state, a wrong
 * nonce) end on an error page and create nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { BrowserContext, Page } from "playwright-core";
import { principalHash } from "../../src/auth/principal.js";
import { createLogger, sessionHash } from "../../src/logging.js";
import { browserUnavailable, launchBrowser, type TestBrowser } from "../helpers/browser.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { loginHeadless, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { promote } from "../helpers/async-extra.js";

const SCOPE = "mcp:tools";
const MCP_REDIRECT = "http://127.0.0.1:65501/callback";
const CONSOLE_SECRET = "console-client-secret-0123456789";

/** An MCP session on /mcp owned by `user` (logged in through the provider headlessly); its session id. */
function connectAs(url: string, user: string): Promise<{ client: Client; sessionId: string }> {
  return loginAndConnect(url, user, new MemoryOAuthClient(MCP_REDIRECT));
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe("console login with OpenID Connect, and roles", { timeout: 600_000 }, () => {
  let idp: TestOidcProvider;
  let gw: TestGateway;
  let base: string;
  const lines: Record<string, unknown>[] = [];
  const clients: Client[] = [];
  const refs: Record<string, string> = {};

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
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
          redirect_uris: [`${base}/console/callback`],
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
    gw = await startGateway(
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
    assert.equal(res.headers.get("set-cookie"), null, "no console session");
    assert.match(await res.text(), /EMCP_CONSOLE_LOGIN_FAILED|unknown or expired/);
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
    const res = await fetch(callback, { redirect: "manual" });
    assert.equal(res.status, 400);
    assert.equal(res.headers.get("set-cookie"), null, "no console session");
    assert.match(await res.text(), /nonce/);
    const again = await fetch(callback, { redirect: "manual" });
    assert.equal(again.status, 400);
    assert.match(await again.text(), /unknown or expired/);
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
