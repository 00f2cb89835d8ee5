/**
 * The console's Connections page and the inbox's consent link in a real
 * browser (issue 23): Chromium, logged in to the console as a person (OIDC at
 * oidc-provider), connects an OAuth-protected upstream (the provider's sign-in
 * and consent pages, the same-site hop back, the completion page), sees the
 * status and scopes, disconnects; then an agent's call that needs consent
 * waits as a task whose URL elicitation is a card in the person's inbox, and
 * following its link completes the task.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { BrowserContext, Page } from "playwright-core";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { browserUnavailable, openTestPage, type TestBrowser } from "../helpers/browser.js";
import { call } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleLogin, startIdentityStack, type IdentityStack, type TestOidcProvider } from "../helpers/oidc.js";

const skip = browserUnavailable();

describe("Connections page and the inbox's consent link in Chromium", { skip, timeout: 300_000 }, () => {
  let stack: IdentityStack;
  let idp: TestOidcProvider;
  let base: string;
  let tb: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  let agent: Client;
  const agents: Client[] = [];

  before(async () => {
    stack = await startIdentityStack();
    ({ idp, base } = stack);
    agent = (await loginAndConnect(`${base}/mcp`, "dana", new MemoryOAuthClient("http://127.0.0.1:65503/callback"))).client;
    ({ tb, context, page } = await openTestPage());
    // Dana's console login (headless OIDC), handed to the browser.
    const [name, value] = (await consoleLogin(base, "dana", idp.issuer)).split(/=(.*)/s) as [string, string];
    await context.addCookies([{ name, value, url: base, sameSite: "Strict" }]);
  });

  after(async () => {
    for (const a of [agent, ...agents]) await a?.close().catch(() => undefined);
    await context?.close();
    await tb?.close();
    await stack?.close();
  });

  /** At the provider: sign in as `user` (dev login form) and consent, until the browser is back at the gateway. */
  async function signInAtProvider(user: string): Promise<void> {
    for (let step = 0; step < 8; step++) {
      await page.waitForLoadState();
      const from = page.url();
      if (!from.startsWith(idp.issuer)) break;
      const login = page.locator("input[name=login]");
      if (await login.count()) {
        await login.fill(user);
        await page.locator("input[name=password]").fill("any");
      }
      await Promise.all([page.waitForURL((u) => u.href !== from, { waitUntil: "commit" }), page.locator("button[type=submit]").first().click()]);
    }
    await page.waitForURL((u) => u.href.startsWith(`${base}/console/oauth/complete`));
  }

  const row = () => page.locator("tr", { has: page.locator("code", { hasText: /^remote$/ }) });

  test("connect (the server's sign-in), status and scopes, disconnect", async () => {
    await page.goto(`${base}/console/connections`);
    assert.equal((await row().locator("td").nth(1).textContent())?.trim(), "not connected");
    await Promise.all([page.waitForURL((u) => u.href.startsWith(idp.issuer), { waitUntil: "commit" }), row().getByRole("button", { name: "Connect" }).click()]);
    await signInAtProvider("dana");
    assert.match((await page.textContent("main")) ?? (await page.textContent("body")) ?? "", /remote.*is connected/s);
    await page.goto(`${base}/console/connections`);
    assert.equal((await row().locator("td").nth(1).textContent())?.trim(), "connected");
    const scopes = (await row().locator("td").nth(2).textContent()) ?? "";
    assert.match(scopes, /mcp:tools/);
    // The grant works for dana's agent.
    const r = await call(agent, "execute_tool", { server: "remote", tool: "whoami", args: {} });
    assert.match(JSON.stringify(r.content), /dana/);
    await Promise.all([page.waitForURL(`${base}/console/connections`), row().getByRole("button", { name: "Disconnect" }).click()]);
    assert.equal((await row().locator("td").nth(1).textContent())?.trim(), "not connected");
  });

  test("a call that needs consent: the inbox card's link signs in, and the waiting task completes", async () => {
    // A new agent session (its own connection to remote, made now: dana has no grant since the disconnect).
    const fresh = (await loginAndConnect(`${base}/mcp`, "dana", new MemoryOAuthClient("http://127.0.0.1:65503/callback"))).client;
    agents.push(fresh);
    const reply = await call(fresh, "execute_tool", { server: "remote", tool: "whoami", args: {} });
    const taskId = (reply.structuredContent as { task_id?: string } | undefined)?.task_id;
    assert.ok(taskId, JSON.stringify(reply.content));
    await page.goto(`${base}/console/inbox`);
    const link = page.locator(`a[href^="${idp.issuer}"]`);
    // The card appears once the elicitation is stored; a reload shows it (the page may also update live).
    for (let i = 0; i < 300 && (await link.count()) === 0; i++) {
      await page.waitForTimeout(200);
      if (i % 10 === 9) await page.reload();
    }
    assert.equal(await link.count(), 1, "the consent link is in the inbox card");
    const href = await link.getAttribute("href");
    assert.ok(href);
    // Followed in the same tab (the card opens a new one; the flow is the same).
    await page.goto(href);
    await signInAtProvider("dana");
    const result = await call(fresh, "get_task_result", { task_id: taskId, timeout_ms: 60_000 });
    assert.match(JSON.stringify(result.content), /dana/);
  });
});
