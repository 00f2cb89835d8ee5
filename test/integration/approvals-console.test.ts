/**
 * Approvals in the console (issue 24, docs/adr/0025): a real Chromium on the
 * approvals page of an in-process gateway (server-everything in process).
 * An approver sees the pending call appear live (who, server, tool, exact
 * arguments, the rule) and approves it with the plain form: the agent's task completes with
 * the tool's result; another is denied with a reason: the task fails with
 * it. With the static token the console's operator is the token's caller, so
 * approving their own call is refused (403) until allowSelfApproval.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { BrowserContext, Page } from "playwright-core";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { browserUnavailable, openTestPage, type TestBrowser } from "../helpers/browser.js";
import { block, call, connectClient, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const skip = browserUnavailable();
const governance = {
  profile: "enforce",
  rules: [{ id: "echo-needs-approval", server: "everything", tool: "echo", action: "approve" }],
  approvals: { pollMs: 200 },
};

describe("approvals page in a real browser", { skip, timeout: 300_000 }, () => {
  let gw: TestGateway;
  let base: string;
  let tb: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  let agent: Client;

  before(async () => {
    gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything") }, gateway: { governance } });
    base = gw.url.replace(/\/mcp$/, "");
    agent = await connectClient(gw.url);
    ({ tb, context, page } = await openTestPage());
  });

  after(async () => {
    await agent?.close().catch(() => undefined);
    await context?.close();
    await tb?.close();
    await gw?.close();
  });

  async function ask(message: string): Promise<{ taskId: string; approvalId: string }> {
    const res = await call(agent, "execute_tool", { server: "everything", tool: "echo", args: { message } });
    return { taskId: block<string>(res, "task_id")!, approvalId: block<{ id: string }>(res, "approval")!.id };
  }

  test("an approver approves in the console; the agent's task completes with the tool's result", async () => {
    // The page is open before the call: the approval appears on it live, without a reload.
    await page.goto(`${base}/console/approvals`);
    await page.waitForSelector("html[data-live='on']");
    await page.evaluate("window.loadedOnce = 'yes'");
    const { taskId, approvalId } = await ask("approve me please");
    const card = page.locator(`#ap-${approvalId}`);
    await card.waitFor();
    assert.equal(await page.evaluate<string | undefined>("window.loadedOnce"), "yes", "the approval appeared without a reload");
    const text = (await card.textContent()) ?? "";
    assert.match(text, /echo/);
    assert.match(text, /everything/);
    assert.match(text, /"message": "approve me please"/, "the exact arguments");
    assert.match(text, /echo-needs-approval/, "the rule that asked");
    await card.getByLabel(/Reason/).fill("fine by me");
    await card.getByRole("button", { name: "Approve" }).click();
    await page.waitForURL(/decided=/);
    assert.match((await page.getByRole("status").textContent()) ?? "", /approved/);
    const result = await call(agent, "get_task_result", { task_id: taskId, timeout_ms: 60_000 });
    assert.match(JSON.stringify(result), /approve me please/);
    assert.match((await page.locator("#approvals-decided").textContent()) ?? "", new RegExp(approvalId));
  });

  test("an approver denies with a reason; the agent's task fails with it", async () => {
    const { taskId, approvalId } = await ask("deny me");
    await page.goto(`${base}/console/approvals`);
    const card = page.locator(`#ap-${approvalId}`);
    await card.getByLabel(/Reason/).fill("not during the freeze");
    await card.getByRole("button", { name: "Deny" }).click();
    await page.waitForURL(/decided=/);
    const out = await call(agent, "get_task_result", { task_id: taskId, timeout_ms: 60_000 }).then(
      (r) => JSON.stringify(r),
      (e: unknown) => String(e),
    );
    assert.match(out, /rejected by operator: not during the freeze/);
  });
});

describe("approvals page behind the static token", { timeout: 120_000 }, () => {
  const TOKEN = "approvals-console-token-0123456789";
  let gw: TestGateway;

  before(async () => {
    gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything") }, gateway: { token: TOKEN, governance } });
  });
  after(() => gw?.close());

  test("the token's operator cannot approve the token's own call (403, still pending)", async () => {
    const agent = new Client({ name: "agent", version: "1.0.0" });
    await agent.connect(new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
    try {
      const res = await call(agent, "execute_tool", { server: "everything", tool: "echo", args: { message: "mine" } });
      const id = block<{ id: string }>(res, "approval")!.id;
      const base = gw.url.replace(/\/mcp$/, "");
      const post = await fetch(`${base}/console/approvals/${id}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, origin: base, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ action: "approve", reason: "self" }).toString(),
        redirect: "manual",
      });
      assert.equal(post.status, 403);
      assert.match(await post.text(), /asked for this call yourself/);
      assert.equal((await gw.gateway.context.approvalRecords!.get(id))!.state, "pending");
      const page = await fetch(`${base}/console/approvals`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.match(await page.text(), new RegExp(`ap-${id}`));
    } finally {
      await agent.close();
    }
  });
});
