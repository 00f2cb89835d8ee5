/**
 * The web console (issue 14, docs/adr/0012-console.md) in a real browser:
 * playwright-core driving Debian's Chromium against a real gateway over HTTP
 * with server-everything's own code in process (test/helpers/in-process.ts), and agent sessions as real SDK clients on
 * the meta face (no elicitation or sampling capability: their requests wait
 * in the gateway's pending queue). One browser and one page for the file.
 *
 * UPDATE_SCREENSHOTS=1 saves docs/images/console-{overview,task,inbox}.png.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { BrowserContext, Page } from "playwright-core";
import { ClientPool, EventLedger, activityEvents, allText, awaitActivity, eventually, getTask, payloadText, promote } from "../helpers/async-extra.js";
import { pollTask, startTask } from "../helpers/tasks.js";
import { browserUnavailable, launchBrowser, openTestPage, type TestBrowser } from "../helpers/browser.js";
import { ROOT, call, startGateway, type TestGateway } from "../helpers/gateway.js";
import { startInProcessGateway } from "../helpers/in-process.js";

const skip = browserUnavailable();
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === "1";
const TOKEN = "console-test-token-0123456789";

/** What server-everything's trigger-elicitation-request returns after its "Raw result:" line. */
function rawResult(text: string): unknown {
  const i = text.indexOf("Raw result:");
  assert.ok(i >= 0, `no raw result in: ${text}`);
  return JSON.parse(text.slice(i + "Raw result:".length));
}

async function taskResultText(client: Client, taskId: string): Promise<string> {
  const r = await call(client, "get_task_result", { task_id: taskId, timeout_ms: 30_000 });
  assert.notEqual(r.isError, true, allText(r));
  return payloadText(r);
}

async function screenshot(page: Page, name: string): Promise<void> {
  if (SCREENSHOTS) await page.screenshot({ path: path.join(ROOT, "docs/images", `console-${name}.png`), fullPage: true });
}

describe("web console in a real browser", { skip, timeout: 600_000 }, () => {
  let gw: TestGateway;
  let base: string;
  let tb: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  const pool = new ClientPool(() => gw);

  before(async () => {
    gw = await startInProcessGateway();
    base = gw.url.replace(/\/mcp$/, "");
    ({ tb, context, page } = await openTestPage());
  });

  after(async () => {
    await pool.closeAll();
    await context?.close();
    await tb?.close();
    await gw?.close();
  });

  /** Opens the inbox and waits until its live stream is connected; marks the document to prove later that it was not reloaded. */
  async function openLiveInbox(): Promise<void> {
    await page.goto(`${base}/console/inbox`);
    await page.waitForSelector("html[data-live='on']");
    await page.evaluate("window.loadedOnce = 'yes'");
  }

  async function notReloaded(): Promise<void> {
    assert.equal(await page.evaluate<string | undefined>("window.loadedOnce"), "yes", "the inbox updated without a reload");
  }

  test("a form elicitation appears in the inbox without reload; the generated form's answer completes the task with exactly that content, await_activity wakes", async (t) => {
    const agent = await pool.open(t);
    await openLiveInbox();
    const ledger = new EventLedger();
    const p = await promote(agent, "everything", "trigger-elicitation-request", {}, 1_000, {}, ledger);
    const item = page.locator("article.request", { hasText: "Please provide inputs for the following fields:" });
    await item.waitFor();
    await notReloaded();
    const requestId = (await item.getAttribute("data-key"))!;
    await screenshot(page, "inbox");
    if (SCREENSHOTS) {
      // The overview while the task waits for the person (a second tab: the inbox keeps its form).
      const overviewTab = await context.newPage();
      await overviewTab.goto(`${base}/console`);
      await screenshot(overviewTab, "overview");
      await overviewTab.close();
    }

    // The form is generated from requestedSchema: labels, types, bounds, enums, defaults.
    const form = item.locator("form");
    const name = form.getByLabel("String", { exact: true });
    assert.equal(await name.getAttribute("required"), "");
    assert.equal(await form.getByLabel("String with email format").getAttribute("type"), "email");
    assert.equal(await form.getByLabel("String with uri format").getAttribute("type"), "url");
    assert.equal(await form.getByLabel("String with date format").getAttribute("type"), "date");
    const integer = form.getByLabel("Integer", { exact: true });
    assert.deepEqual([await integer.getAttribute("min"), await integer.getAttribute("max"), await integer.inputValue()], ["1", "100", "42"]);
    assert.equal(await form.getByLabel("String with default").inputValue(), "It was a dark and stormy night.");
    assert.equal(await form.getByLabel("Legacy Titled Single Select Enum").locator("option:checked").textContent(), "Cats");
    assert.equal(await form.getByLabel("Guitar").isChecked(), true, "multi-select default");

    await name.fill("Ada <b>Lovelace</b>");
    await form.getByLabel("Boolean", { exact: true }).check();
    await form.getByLabel("String with email format").fill("ada@example.com");
    await form.getByLabel("String with date format").fill("1815-12-10");
    await integer.fill("7");
    await form.getByLabel("Untitled Single Select Enum").selectOption("Joey");
    await form.getByLabel("Piano").check();
    await form.getByLabel("Titled Single Select Enum", { exact: true }).selectOption({ label: "Wonder Woman" });
    await form.getByLabel("Legacy Titled Single Select Enum").selectOption({ label: "Dogs" });

    // The agent waits for activity; the person's answer must wake it.
    await call(agent, "list_servers"); // delivers what is pending so far
    const woke = awaitActivity(agent, 30_000);
    await form.getByRole("button", { name: "Accept" }).click();
    await page.waitForURL(/\/console\/inbox\?answered=/);
    assert.equal(await page.locator(`article[data-key="${requestId}"]`).count(), 0, "answered: gone from the inbox");

    const activity = await woke;
    assert.ok(
      activityEvents(activity).some((e) => e.type === "task_completed" && (e.data as { taskId?: string }).taskId === p.taskId),
      `await_activity woke with the task's completion: ${JSON.stringify(activity)}`,
    );
    assert.deepEqual(rawResult(await taskResultText(agent, p.taskId)), {
      action: "accept",
      content: {
        name: "Ada <b>Lovelace</b>",
        check: true,
        firstLine: "It was a dark and stormy night.",
        email: "ada@example.com",
        birthdate: "1815-12-10",
        integer: 7,
        number: 3.14,
        untitledSingleSelectEnum: "Joey",
        untitledMultipleSelectEnum: ["Guitar", "Piano"],
        titledSingleSelectEnum: "hero-3",
        titledMultipleSelectEnum: ["fish-1"],
        legacyTitledEnum: "pet-2",
      },
    });

    // The other side sees who answered.
    const late = await call(agent, "respond_to_elicitation", { request_id: requestId, action: "cancel" });
    assert.equal(late.isError, true);
    assert.match(allText(late), /already answered by a person in the web console \(accept\)/);

    // The task page renders the arguments and the result, escaped.
    await page.goto(`${base}/console/tasks/${p.taskId}`);
    await page.getByText("completed", { exact: true }).first().waitFor();
    assert.ok(
      (await page.locator("pre.text").allTextContents()).some((s) => s.includes("Ada <b>Lovelace</b>")),
      "the result's text, as text",
    );
    assert.equal(await page.locator("main b").count(), 0, "nothing of the result became markup");
    await screenshot(page, "task");
  });

  test("keyboard only: Tab to the field, type, Enter submits the generated form (Accept) with the defaults", async (t) => {
    const agent = await pool.open(t);
    await openLiveInbox();
    const p = await promote(agent, "everything", "trigger-elicitation-request", {}, 1_000);
    const item = page.locator("article.request").first();
    await item.waitFor();
    const requestId = (await item.getAttribute("data-key"))!;

    // An answer the schema refuses is refused exactly as respond_to_elicitation refuses it, and stays pending.
    const session = (await item.locator("input[name=session]").getAttribute("value"))!;
    const bad = await fetch(`${base}/console/inbox/${requestId}`, {
      method: "POST",
      headers: { Origin: base, "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ session, kind: "elicitation", action: "accept", "f.name": "x", "f.integer": "500" }),
    });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /content does not match the requested schema: data\/integer must be &lt;= 100/);

    const field = `f-${requestId}-0`;
    for (let i = 0; i < 40 && (await page.evaluate<string | undefined>("document.activeElement?.id")) !== field; i++) await page.keyboard.press("Tab");
    assert.equal(await page.evaluate<string | undefined>("document.activeElement?.id"), field, "the name field is reachable with Tab");
    await page.keyboard.type("Grace Hopper");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/console\/inbox\?answered=/);

    assert.deepEqual(rawResult(await taskResultText(agent, p.taskId)), {
      action: "accept",
      content: {
        name: "Grace Hopper",
        check: false,
        firstLine: "It was a dark and stormy night.",
        integer: 42,
        number: 3.14,
        untitledSingleSelectEnum: "Monica",
        untitledMultipleSelectEnum: ["Guitar"],
        titledSingleSelectEnum: "hero-1",
        titledMultipleSelectEnum: ["fish-1"],
        legacyTitledEnum: "pet-1",
      },
    });
  });

  test("a sampling request is answered in the console: the task completes with the person's reply, await_activity wakes", async (t) => {
    const agent = await pool.open(t);
    await openLiveInbox();
    const p = await promote(agent, "everything", "trigger-sampling-request", { prompt: "Say <hello>", maxTokens: 50 }, 1_000);
    const item = page.locator("article.request", { hasText: "Sampling request" });
    await item.waitFor();
    await notReloaded();
    assert.ok(
      (await item.locator("pre.text").allTextContents()).some((s) => s.includes("Say <hello>")),
      "the request's messages are shown, as text",
    );

    await call(agent, "list_servers");
    const woke = awaitActivity(agent, 30_000);
    await item.getByLabel("Your reply (as the assistant)").fill("Hello from a person.");
    await item.getByRole("button", { name: "Send reply" }).click();
    await page.waitForURL(/\/console\/inbox\?answered=/);

    const activity = await woke;
    assert.ok(activityEvents(activity).some((e) => e.type === "task_completed" && (e.data as { taskId?: string }).taskId === p.taskId));
    const text = await taskResultText(agent, p.taskId);
    const result = JSON.parse(text.slice(text.indexOf("{"))) as Record<string, unknown>;
    assert.deepEqual(result, {
      role: "assistant",
      content: { type: "text", text: "Hello from a person." },
      model: "human (emceepee console)",
      stopReason: "endTurn",
    });
  });

  test("a URL-mode elicitation shows its link; 'I completed it' accepts it", async (t) => {
    const agent = await pool.open(t);
    await openLiveInbox();
    const url = "https://example.com/consent?scope=<all>";
    const p = await promote(agent, "everything", "trigger-url-elicitation", { url, message: "Open <this> to consent" }, 1_000);
    const item = page.locator("article.request", { hasText: "Open <this> to consent" });
    await item.waitFor();
    assert.equal(await item.getByRole("link", { name: url }).getAttribute("href"), new URL(url).href);
    assert.equal(await item.locator("input:not([type=hidden])").count(), 0, "no fields in URL mode");
    await item.getByRole("button", { name: "I completed it" }).click();
    await page.waitForURL(/\/console\/inbox\?answered=/);
    assert.deepEqual(rawResult(await taskResultText(agent, p.taskId)), { action: "accept" });
  });

  test("a change between a page's render and the start of its live stream is not missed: the page re-reads itself when the stream says hello", async () => {
    const client = new Client({ name: "late-stream-client", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/everything/mcp`)));
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The page's /console/events request is held until the task has completed: the change happens while no stream is open.
    await page.route("**/console/events", async (route) => {
      await held;
      await route.continue();
    });
    try {
      const task = await startTask(client, "trigger-long-running-operation", { duration: 10, steps: 2 });
      await page.goto(`${base}/console/tasks/${task.taskId}`);
      assert.equal(await page.locator("#task").getByText("completed", { exact: true }).count(), 0, "the page was rendered while the task worked");
      await pollTask(client, task.taskId, (t) => t.status === "completed", "the task to complete", 90_000);
      release();
      await page.locator("#task").getByText("completed", { exact: true }).waitFor();
    } finally {
      release();
      await page.unroute("**/console/events");
      await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  test("a task's page renders its result's images and resource links (a task-augmented call on a transparent face)", async () => {
    const client = new Client({ name: "task-client", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/everything/mcp`)));
    try {
      const image = await startTask(client, "get-tiny-image", {});
      const links = await startTask(client, "get-resource-links", { count: 2 });
      await page.goto(`${base}/console/tasks/${image.taskId}`);
      await page.locator("#task").getByText("completed", { exact: true }).waitFor();
      const src = (await page.locator("#task img").first().getAttribute("src")) ?? "";
      assert.match(src, /^data:image\/png;base64,/);
      const decoded = () =>
        page
          .locator("#task img")
          .first()
          .evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth);
      await eventually("the image decodes", async () => ((await decoded()) > 0 ? true : undefined));

      await page.goto(`${base}/console/tasks/${links.taskId}`);
      await page.locator("#task").getByText("completed", { exact: true }).waitFor();
      const text = (await page.locator("#task").textContent()) ?? "";
      assert.match(text, /Blob Resource 1/);
      assert.match(text, /Text Resource 2/);
      assert.equal(await page.locator('#task a[href^="demo:"]').count(), 0, "only http(s) URIs become links");
    } finally {
      await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  test("a task is cancelled from its page; the agent sees it cancelled and await_activity wakes", async (t) => {
    const agent = await pool.open(t);
    const p = await promote(agent, "everything", "trigger-long-running-operation", { duration: 60, steps: 60 }, 300);
    await page.goto(`${base}/console/tasks?status=working`);
    await page.getByRole("link", { name: p.taskId }).click();
    await page.getByRole("button", { name: "Cancel task" }).waitFor();

    await call(agent, "list_servers");
    const woke = awaitActivity(agent, 30_000);
    await page.getByRole("button", { name: "Cancel task" }).click();
    await page.getByText("Task cancelled").waitFor();
    assert.ok((await woke).events.length > 0);
    const { task } = await getTask(agent, p.taskId);
    assert.equal(task.status, "cancelled");

    await page.goto(`${base}/console`);
    await page.locator("#overview").getByText("everything").first().waitFor();
  });

  test("an elicitation forwarded natively to a capable client is shown read-only while the client holds it, and goes when it answers", async () => {
    const client = new Client({ name: "form-client", version: "2.0.0" }, { capabilities: { elicitation: { form: {} } } });
    let answer!: (r: ElicitResult) => void;
    let asked!: () => void;
    const wasAsked = new Promise<void>((resolve) => (asked = resolve));
    client.setRequestHandler(ElicitRequestSchema, () => {
      asked();
      return new Promise<ElicitResult>((resolve) => (answer = resolve));
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/everything/mcp`)));
    try {
      await openLiveInbox();
      const call = client.callTool({ name: "trigger-elicitation-request", arguments: {} }, undefined, { timeout: 60_000 });
      await wasAsked;
      const item = page.locator("article.request.forwarded");
      await item.waitFor();
      await notReloaded();
      assert.match((await item.textContent()) ?? "", /Please provide inputs for the following fields:/);
      assert.equal(await item.locator("form, button, input").count(), 0, "read-only: nothing to answer with");

      answer({ action: "decline" });
      await call;
      await item.waitFor({ state: "detached" });
    } finally {
      await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  test("the overview lists upstreams and sessions and updates live when a session starts", async (t) => {
    await page.goto(`${base}/console`);
    await page.waitForSelector("html[data-live='on']");
    const before = await page.locator("#overview tbody tr").count();
    const agent = await pool.open(t);
    await eventually("the new session in the overview", async () => ((await page.locator("#overview tbody tr").count()) > before ? true : undefined));
    assert.match((await page.locator("#overview").textContent()) ?? "", /stdio/);
    assert.match((await page.locator("#overview").textContent()) ?? "", /meta-async-test 1\.0\.0/);
    await pool.close(agent);
  });
});

describe("web console behind a token", { skip, timeout: 300_000 }, () => {
  let gw: TestGateway;
  let base: string;
  let tb: TestBrowser;

  before(async () => {
    gw = await startGateway({ mcpServers: {}, gateway: { token: TOKEN } });
    base = gw.url.replace(/\/mcp$/, "");
    tb = await launchBrowser();
  });

  after(async () => {
    await tb?.close();
    await gw?.close();
  });

  test("refuses without the token, works after the login form, and its POSTs need the console's own origin", async () => {
    assert.equal((await fetch(`${base}/console`)).status, 401, "no token: 401");
    assert.equal((await fetch(`${base}/console/tasks`, { headers: { Authorization: `Bearer ${TOKEN}` } })).status, 200, "the bearer token works too");

    const context = await tb.browser.newContext();
    context.setDefaultTimeout(90_000); // Chromium on a loaded 2-core machine
    const page = await context.newPage();
    await page.goto(`${base}/console`);
    assert.match(page.url(), /\/console\/login\?next=/, "a browser is sent to the login page");
    await page.getByLabel("Gateway token").fill("not-the-token-at-all");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("alert").waitFor();
    assert.match((await page.getByRole("alert").textContent()) ?? "", /not the gateway's token/);

    await page.getByLabel("Gateway token").fill(TOKEN);
    await page.keyboard.press("Enter");
    await page.waitForURL(`${base}/console`);
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    await page.waitForSelector("html[data-live='on']"); // the live stream is let in by the cookie too
    const [cookie] = await context.cookies();
    assert.ok(cookie, "a cookie was set");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");
    assert.equal(cookie.path, "/console");
    assert.ok(!cookie.value.includes(TOKEN), "the cookie does not hold the token");

    // The cookie is the console's only: /mcp still needs the bearer header.
    const mcp = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: { Cookie: `${cookie.name}=${cookie.value}`, "Content-Type": "application/json" },
      body: "{}",
    });
    assert.equal(mcp.status, 401);
    // A console POST without the console's own Origin is refused (CSRF), even with the cookie.
    const cookieHeader = { Cookie: `${cookie.name}=${cookie.value}`, "Content-Type": "application/x-www-form-urlencoded" };
    assert.equal((await fetch(`${base}/console/logout`, { method: "POST", headers: cookieHeader })).status, 403);
    const crossSite = await fetch(`${base}/console/logout`, { method: "POST", headers: { ...cookieHeader, Origin: "http://localhost:1" } });
    assert.equal(crossSite.status, 403, "another origin, even one the MCP Origin check accepts");

    await page.getByRole("button", { name: "Log out" }).click();
    await page.waitForURL(/\/console\/login/);
    await page.goto(`${base}/console/inbox`);
    assert.match(page.url(), /\/console\/login/, "logged out");
    await context.close();
  });

  test("a login link cannot send the browser outside the console", async () => {
    const login = (next: string) =>
      fetch(`${base}/console/login`, {
        method: "POST",
        redirect: "manual",
        headers: { Origin: base, "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: TOKEN, next }),
      });
    for (const next of ["https://evil.example/", "//evil.example/console", "/console/../mcp", "/console/%2e%2e/mcp", "/mcp"]) {
      assert.equal((await login(next)).headers.get("location"), "/console", next);
    }
    assert.equal((await login("/console/tasks?status=working")).headers.get("location"), "/console/tasks?status=working");
  });
});

describe("web console turned off", () => {
  test("gateway.console.enabled: false answers /console with 404", async () => {
    const gw = await startGateway({ mcpServers: {}, gateway: { console: { enabled: false } } });
    try {
      const res = await fetch(gw.url.replace(/\/mcp$/, "/console"));
      assert.equal(res.status, 404);
    } finally {
      await gw.close();
    }
  });
});
