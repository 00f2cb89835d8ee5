/**
 * The console's history pages (issue 28) in a real browser: playwright-core
 * driving Debian's Chromium against one real gateway (token set, the real
 * server-everything over stdio), agents as real SDK clients on the meta face.
 * Activity (live, filters, no-JavaScript use), Upstreams (check, connections,
 * per-tool numbers and SVG), tasks of ended sessions, inbox cards (who asks,
 * why, where the answer went), the styled login page and phone-width tables.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { BrowserContext, Page } from "playwright-core";
import { eventually, promote } from "../helpers/async-extra.js";
import { browserUnavailable, openTestPage, type TestBrowser } from "../helpers/browser.js";
import { call, startGateway, waitConnected, type TestGateway } from "../helpers/gateway.js";

const skip = browserUnavailable();
const TOKEN = "console-history-token-0123456789";

describe("console history in a real browser", { skip, timeout: 600_000 }, () => {
  let gw: TestGateway;
  let base: string;
  let tb: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  const clients = new Set<{ client: Client; transport: StreamableHTTPClientTransport }>();

  /** A new meta-face session with the token, its upstream connected. */
  async function agent(name = "history-agent"): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const client = new Client({ name, version: "2.1.0" });
    const transport = new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
    await client.connect(transport);
    const a = { client, transport };
    clients.add(a);
    await waitConnected(client, "everything", 60_000);
    return a;
  }

  async function end(a: { client: Client; transport: StreamableHTTPClientTransport }): Promise<void> {
    if (!clients.delete(a)) return;
    await a.transport.terminateSession().catch(() => undefined);
    await a.client.close();
  }

  before(async () => {
    gw = await startGateway({ gateway: { token: TOKEN, activity: { flushMs: 20 } } });
    base = gw.url.replace(/\/mcp$/, "");
    ({ tb, context, page } = await openTestPage());
  });

  after(async () => {
    for (const a of [...clients]) await end(a);
    await context?.close();
    await tb?.close();
    await gw?.close();
  });

  test("the login page is styled before anyone logs in (the stylesheet needs no token, the script does); the token logs in", async () => {
    const css = await fetch(`${base}/console/assets/console.css`);
    assert.equal(css.status, 200);
    assert.match(css.headers.get("content-type") ?? "", /^text\/css/);
    assert.equal((await fetch(`${base}/console/assets/console.js`)).status, 401, "the script still needs the token");
    await page.goto(`${base}/console/activity`);
    assert.match(page.url(), /\/console\/login\?next=/);
    const form = page.locator("form.login");
    assert.equal(
      await form.evaluate((el) => el.ownerDocument.defaultView!.getComputedStyle(el).borderTopLeftRadius),
      "8px",
      "the login form is styled by console.css",
    );
    await page.getByLabel("Gateway token").fill(TOKEN);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.waitForURL(/\/console\/activity$/);
  });

  test("a tool call appears on the Activity page live (no reload), with outcome, server, tool and duration; filters and the session link narrow it", async () => {
    const a = await agent();
    await page.goto(`${base}/console/activity`);
    await page.waitForSelector("html[data-live='on']");
    await page.evaluate("window.loadedOnce = 'yes'");
    const r = await call(a.client, "execute_tool", { server: "everything", tool: "echo", args: { message: "history-probe" } });
    assert.notEqual(r.isError, true);
    const row = page.locator("#activity tr", { hasText: "echo" }).filter({ hasText: "tool call" }).first();
    await row.waitFor();
    assert.equal(await page.evaluate<string | undefined>("window.loadedOnce"), "yes", "the page updated without a reload");
    assert.match((await row.textContent()) ?? "", /ok/);
    assert.match((await row.locator("td[data-label='Duration']").textContent()) ?? "", /\d+ ms|\d+s/);
    assert.match((await row.locator("td[data-label='Server']").textContent()) ?? "", /everything/);
    // The session link filters by that session; a kind filter leaves only that kind.
    await row.locator("td[data-label='Session'] a").click();
    await page.waitForURL(/session=/);
    assert.ok((await page.locator("#activity tbody tr").count()) >= 1);
    await page.goto(`${base}/console/activity?kind=server_connected`);
    const kinds = await page.locator("#activity td[data-label='Kind']").allTextContents();
    assert.ok(kinds.length >= 1, "the agent's connection was recorded");
    assert.ok(
      kinds.every((k) => k.trim() === "server connected"),
      `only connections: ${kinds.join(",")}`,
    );
    await page.goto(`${base}/console/activity?kind=tool_call&outcome=error`);
    assert.equal(await page.locator("#activity tbody tr", { hasText: "history-probe" }).count(), 0);
  });

  test("without JavaScript the Activity filter form works and pages go Older/Newest", async () => {
    const a = await agent();
    for (let i = 0; i < 55; i++) await call(a.client, "execute_tool", { server: "everything", tool: "echo", args: { message: `n${i}` } });
    const noJs = await tb.browser.newContext({ javaScriptEnabled: false });
    try {
      await noJs.addCookies(await context.cookies());
      const p = await noJs.newPage();
      await eventually("55 calls recorded", async () => {
        await p.goto(`${base}/console/activity?kind=tool_call`);
        return (await p.locator("a[rel='next']").count()) > 0 ? true : undefined;
      });
      await p.selectOption("#filter-server", "everything");
      await p.getByRole("button", { name: "Filter" }).click();
      await p.waitForURL(/server=everything/);
      assert.equal(await p.locator("#activity tbody tr").count(), 50, "a page holds 50");
      await p.locator("a[rel='next']").click();
      await p.waitForURL(/before=/);
      assert.ok((await p.locator("#activity tbody tr").count()) >= 1, "the older page has the rest");
      assert.equal(await p.locator("#activity[data-live]").count(), 0, "a later page does not follow live changes");
      assert.equal(await p.getByRole("link", { name: "Newest" }).count(), 1);
    } finally {
      await noJs.close();
    }
  });

  test("Upstreams: the start-up check, each session's connection, the stdio stderr tail, per-tool calls and latency with inline SVG charts", async () => {
    const results = await gw.gateway.checkUpstreams();
    assert.equal(results[0]?.ok, true);
    const a = await agent();
    await call(a.client, "execute_tool", { server: "everything", tool: "echo", args: { message: "u" } });
    await eventually("the call recorded", async () => ((await gw.gateway.context.store.activity.count()) > 0 ? true : undefined));
    await page.goto(`${base}/console/upstreams`);
    const card = page.locator("article#upstream-everything");
    await card.waitFor();
    assert.match((await card.locator("dl").textContent()) ?? "", /ok\s*\(\d+ tools\)/);
    assert.ok((await card.locator("table", { hasText: "Connections" }).locator("tbody tr").count()) >= 1);
    const echo = card.locator("table", { hasText: "Tools, last 24 h" }).locator("tr", { hasText: "echo" });
    assert.ok(Number(await echo.locator("td[data-label='Calls']").textContent()) >= 1);
    assert.match((await echo.locator("td[data-label='Error rate']").textContent()) ?? "", /0\.0 %/);
    assert.ok((await card.locator("svg.chart rect").count()) >= 24, "the hourly chart");
    // server-everything says it is starting on stderr: the tail is shown (bounded).
    assert.match((await card.locator("pre.stderr").textContent()) ?? "", /Starting/);
  });

  test("a task stays browsable after its session ended; a working task shows a progress bar", async () => {
    const a = await agent();
    const p = await promote(a.client, "everything", "trigger-long-running-operation", { duration: 3, steps: 3 }, 100);
    await page.goto(`${base}/console/tasks`);
    await eventually("a progress bar", async () => {
      await page.goto(`${base}/console/tasks`);
      return (await page.locator(`tr:has(a[href$='${p.taskId}']) progress`).count()) > 0 ? true : undefined;
    });
    await eventually("the task completed", async () => {
      const r = await call(a.client, "get_task", { task_id: p.taskId });
      return /completed/.test(JSON.stringify(r.structuredContent ?? r.content)) ? true : undefined;
    });
    await end(a);
    await eventually("listed among ended sessions' tasks", async () => {
      await page.goto(`${base}/console/tasks`);
      return (await page.locator(`#task-history a[href$='${p.taskId}']`).count()) > 0 ? true : undefined;
    });
    await page.locator(`#task-history a[href$='${p.taskId}']`).click();
    await page.waitForURL(new RegExp(`/console/tasks/${p.taskId}$`));
    const text = (await page.locator("main").textContent()) ?? "";
    assert.match(text, /has ended/);
    assert.match(text, /completed/);
    assert.match(text, /trigger-long-running-operation/);
  });

  test("an inbox card says who asks, why and when it expires; after the answer, where it went; the activity names the console", async () => {
    const a = await agent("card-agent");
    const p = await promote(a.client, "everything", "trigger-elicitation-request", {}, 1_000);
    await page.goto(`${base}/console/inbox`);
    const card = page.locator("article.request", { hasText: "Please provide inputs" });
    await card.waitFor();
    const meta = (await card.locator(".meta").textContent()) ?? "";
    assert.match(meta, /client card-agent 2\.1\.0/);
    assert.match(meta, /expires in \d+(m|s)/);
    const cause = (await card.locator(".cause").textContent()) ?? "";
    assert.match(cause, /everything\.trigger-elicitation-request/);
    assert.ok(cause.includes(p.taskId), "the cause links the task");
    await card.getByRole("button", { name: "Decline" }).click();
    await page.waitForURL(/answered=/);
    assert.match((await page.locator(".notice").textContent()) ?? "", /\(decline\): sent to everything \(session [0-9a-f]+\)/);
    await eventually("the answer recorded", async () => {
      await page.goto(`${base}/console/activity?kind=elicitation&outcome=answered`);
      return (await page.locator("#activity tr", { hasText: "a person in the console" }).count()) > 0 ? true : undefined;
    });
    await page.goto(`${base}/console/activity?kind=console_action`);
    assert.ok((await page.locator("#activity tr", { hasText: "answer" }).count()) >= 1);
  });

  test("on a phone's width the tables become labelled cards", async () => {
    const phone = await context.newPage();
    try {
      await phone.setViewportSize({ width: 375, height: 740 });
      await phone.goto(`${base}/console/activity`);
      const cell = phone.locator("#activity td[data-label='Kind']").first();
      await cell.waitFor();
      // Wait for the card layout itself: a cell read before the stylesheet applies, or one the page's refresh replaced,
      // computes display '' (CI, loaded machine). A layout that never becomes cards still fails here.
      await phone.waitForFunction(
        `(() => { const el = document.querySelector("#activity td[data-label='Kind']"); return el !== null && getComputedStyle(el).display === "block"; })()`,
        undefined,
        { timeout: 60_000 },
      );
      assert.match(await cell.evaluate((el) => el.ownerDocument.defaultView!.getComputedStyle(el, "::before").content), /Kind/);
      const width = Number(await phone.evaluate("document.documentElement.scrollWidth"));
      assert.ok(width <= 375, `no sideways scrolling (${width}px)`);
    } finally {
      await phone.close();
    }
  });
});
