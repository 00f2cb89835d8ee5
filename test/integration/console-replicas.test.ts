/**
 * The web console across replicas (issue 16, docs/adr/0012 "Across
 * replicas"): a redis-server of the test's own, two `emceepee serve` replicas
 * with `gateway.cluster` and a token, Debian's Chromium on replica B's
 * console, and agents as real SDK clients connected directly to replica A
 * (meta face, no elicitation capability: their requests wait in A's queue).
 * B's pages list A's sessions, tasks and requests, update when A changes,
 * and an answer or a cancel made on B runs on A through the console's answer
 * path. The internal read model is refused to anyone without the cluster
 * secret.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { BrowserContext, Page } from "playwright-core";
import { sessionHash } from "../../src/logging.js";
import { activityEvents, allText, awaitActivity, getTask, payloadText, promote } from "../helpers/async-extra.js";
import { browserUnavailable, openTestPage, type TestBrowser } from "../helpers/browser.js";
import { freePort, pollFor, startCliServe, stopChild, waitExit, type RunningCli } from "../helpers/core-extra.js";
import { ROOT, call, everythingStdio } from "../helpers/gateway.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const SECRET = "console-replicas-secret-0123456789";
const TOKEN = "console-replicas-token-0123456789";
const skip = redisSkipReason() ?? browserUnavailable();
/** Long enough that a killed replica's heartbeat outlives the checks made right after the kill (renewed every third: ≥ 3.3 s left). */
const LEASE_MS = 5_000;
/** On the upstreams' command lines: a SIGKILLed replica leaves its stdio upstreams behind (re-parented to init); after() ends them. */
const MARKER = newMarker();

interface Replica {
  id: string;
  base: string;
  served: RunningCli;
}

/** What server-everything's trigger-elicitation-request returns after its "Raw result:" line. */
function rawResult(text: string): unknown {
  const i = text.indexOf("Raw result:");
  assert.ok(i >= 0, `no raw result in: ${text}`);
  return JSON.parse(text.slice(i + "Raw result:".length));
}

describe("web console across replicas", { skip, timeout: 600_000 }, () => {
  let tmp: string;
  let redis: RedisServer;
  let a: Replica;
  let b: Replica;
  let tb: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  const agents: Client[] = [];

  async function startReplica(id: string): Promise<Replica> {
    const port = await freePort();
    const config = path.join(tmp, `${id}.json`);
    await writeFile(
      config,
      JSON.stringify({
        mcpServers: { everything: { ...everythingStdio(), args: [...everythingStdio().args, MARKER] } },
        gateway: {
          token: TOKEN,
          // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway (issue 21).
          upstream: { warmPool: 0 },
          store: { kind: "redis", url: redis.url },
          cluster: { enabled: true, replicaId: id, advertiseUrl: `http://127.0.0.1:${port}`, secret: "${EMCEEPEE_CLUSTER_SECRET}", leaseMs: LEASE_MS },
        },
      }),
    );
    const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check"], 60_000, {
      EMCEEPEE_CLUSTER_SECRET: SECRET,
    });
    return { id, base: `http://127.0.0.1:${port}`, served };
  }

  /** An agent session on replica A itself (no balancer: the session lives on A). */
  async function agentOnA(): Promise<{ client: Client; session: string }> {
    const client = new Client({ name: "console-replicas-agent", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${a.base}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }));
    agents.push(client);
    return { client, session: (client.transport as StreamableHTTPClientTransport).sessionId! };
  }

  /** Opens a page of B's console and waits until its live stream is connected; marks the document to prove later that it was not reloaded. */
  async function openLive(pathname: string): Promise<void> {
    await page.goto(`${b.base}${pathname}`);
    await page.waitForSelector("html[data-live='on']");
    await page.evaluate("window.loadedOnce = 'yes'");
  }

  async function notReloaded(): Promise<void> {
    assert.equal(await page.evaluate<string | undefined>("window.loadedOnce"), "yes", "the page updated without a reload");
  }

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-console-replicas-"));
    redis = await startRedis();
    [a, b] = await Promise.all([startReplica("ra"), startReplica("rb")]);
    ({ tb, context, page } = await openTestPage());
    // The person logs in on B's console only.
    await page.goto(`${b.base}/console/login`);
    await page.getByLabel("Gateway token").fill(TOKEN);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.waitForURL(`${b.base}/console`);
  });

  after(async () => {
    await Promise.allSettled(
      agents.map(async (c) => {
        await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
        await c.close();
      }),
    );
    await context?.close();
    await tb?.close();
    await Promise.allSettled([a, b].filter(Boolean).map((r) => stopChild(r.served.child)));
    await redis?.stop();
    // What the SIGKILLed replica left running (its upstream processes never saw it end).
    for (const pid of processesWith(MARKER)) process.kill(pid, "SIGKILL");
    assert.deepEqual(await waitForNoProcesses(MARKER), [], "no upstream process left behind");
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  test("an elicitation waiting on replica A appears in replica B's inbox without reload; answered there, A's promoted task completes with exactly that content", async () => {
    const { client: agent, session } = await agentOnA();
    await openLive("/console/inbox");
    const p = await promote(agent, "everything", "trigger-elicitation-request", {}, 1_000);
    const item = page.locator("article.request", { hasText: "Please provide inputs for the following fields:" });
    await item.waitFor({ timeout: 90_000 });
    await notReloaded();
    const requestId = (await item.getAttribute("data-key"))!;
    assert.equal(await item.locator("input[name=session]").getAttribute("value"), sessionHash(session), "the request of A's session");
    assert.equal(await page.locator("#inbox-count").textContent(), "1", "the badge counts A's request");

    const form = item.locator("form");
    await form.getByLabel("String", { exact: true }).fill("Ada <b>Lovelace</b> on A");
    await form.getByLabel("Boolean", { exact: true }).check();
    await form.getByLabel("Integer", { exact: true }).fill("7");
    await form.getByLabel("Piano").check();
    await call(agent, "list_servers"); // delivers what is pending so far
    const woke = awaitActivity(agent, 30_000);
    await form.getByRole("button", { name: "Accept" }).click();
    await page.waitForURL(/\/console\/inbox\?answered=/);
    assert.equal(await page.locator(`article[data-key="${requestId}"]`).count(), 0, "answered: gone from B's inbox");

    const activity = await woke;
    assert.ok(
      activityEvents(activity).some((e) => e.type === "task_completed" && (e.data as { taskId?: string }).taskId === p.taskId),
      `await_activity on A woke with the task's completion: ${JSON.stringify(activity)}`,
    );
    const r = await call(agent, "get_task_result", { task_id: p.taskId, timeout_ms: 30_000 });
    assert.notEqual(r.isError, true, allText(r));
    assert.deepEqual(rawResult(payloadText(r)), {
      action: "accept",
      content: {
        name: "Ada <b>Lovelace</b> on A",
        check: true,
        firstLine: "It was a dark and stormy night.",
        integer: 7,
        number: 3.14,
        untitledSingleSelectEnum: "Monica",
        untitledMultipleSelectEnum: ["Guitar", "Piano"],
        titledSingleSelectEnum: "hero-1",
        titledMultipleSelectEnum: ["fish-1"],
        legacyTitledEnum: "pet-1",
      },
    });

    // The other side is told who answered: the agent on A…
    const late = await call(agent, "respond_to_elicitation", { request_id: requestId, action: "cancel" });
    assert.equal(late.isError, true);
    assert.match(allText(late), /already answered by a person in the web console \(accept\)/);
    // …and B's console, when the agent answered first.
    const second = await promote(agent, "everything", "trigger-elicitation-request", {}, 1_000);
    const next = page.locator("article.request", { hasText: "Please provide inputs for the following fields:" });
    await next.waitFor({ timeout: 90_000 });
    const nextId = (await next.getAttribute("data-key"))!;
    const byAgent = await call(agent, "respond_to_elicitation", { request_id: nextId, action: "decline" });
    assert.notEqual(byAgent.isError, true, allText(byAgent));
    // B's form, posted after the agent answered (as a person's slower click; not through the page, which may already have dropped it).
    const stale = await fetch(`${b.base}/console/inbox/${nextId}`, {
      method: "POST",
      redirect: "manual",
      headers: { Origin: b.base, Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ session: sessionHash(session), kind: "elicitation", action: "cancel" }),
    });
    assert.equal(stale.status, 303);
    const told = stale.headers.get("location")!;
    assert.equal(told, `/console/inbox?gone=${nextId}&by=client`);
    await page.goto(`${b.base}${told}`);
    await page.getByText(`${nextId} was already answered by its session's client; the first answer wins.`).waitFor();
    assert.deepEqual(rawResult(payloadText(await call(agent, "get_task_result", { task_id: second.taskId, timeout_ms: 30_000 }))), { action: "decline" });

    // B's overview names the replica holding the session.
    await page.goto(`${b.base}/console`);
    const row = page.locator("#overview tr", { hasText: sessionHash(session) });
    assert.match((await row.locator("td").first().textContent()) ?? "", /^ra\./, "the session is A's");
    assert.match((await page.locator("#replicas").textContent()) ?? "", /rb\.\S+ \(this one\), ra\./);
  });

  test("a task running on replica A shows up in B's task list without reload and is cancelled from B's task page", async () => {
    const { client: agent } = await agentOnA();
    await openLive("/console/tasks?status=working");
    const p = await promote(agent, "everything", "trigger-long-running-operation", { duration: 60, steps: 60 }, 300);
    const link = page.getByRole("link", { name: p.taskId });
    await link.waitFor({ timeout: 90_000 });
    await notReloaded();
    await link.click();
    await page.getByRole("button", { name: "Cancel task" }).waitFor();

    await call(agent, "list_servers");
    const woke = awaitActivity(agent, 30_000);
    await page.getByRole("button", { name: "Cancel task" }).click();
    await page.getByText("Task cancelled").waitFor();
    assert.ok((await woke).events.length > 0, "await_activity on A woke");
    assert.equal((await getTask(agent, p.taskId)).task.status, "cancelled");
    await page.locator("#task").getByText("cancelled", { exact: true }).first().waitFor();
  });

  test("a sampling request of A's session is answered in B's console: an answer the check refuses is shown at B's form, then the reply completes A's task", async () => {
    const { client: agent, session } = await agentOnA();
    await openLive("/console/inbox");
    const p = await promote(agent, "everything", "trigger-sampling-request", { prompt: "Say <hello> from A", maxTokens: 50 }, 1_000);
    const item = page.locator("article.request", { hasText: "Sampling request" });
    await item.waitFor({ timeout: 90_000 });
    await notReloaded();
    assert.ok((await item.locator("pre.text").allTextContents()).some((t) => t.includes("Say <hello> from A")));
    const requestId = (await item.getAttribute("data-key"))!;

    // Refused on A by the same check as respond_to_sampling; B shows it at the form and the request stays pending.
    const empty = await fetch(`${b.base}/console/inbox/${requestId}`, {
      method: "POST",
      headers: { Origin: b.base, Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ session: sessionHash(session), kind: "sampling", action: "answer", text: "   " }),
    });
    assert.equal(empty.status, 400);
    assert.match(await empty.text(), /write a reply first/);

    await item.getByLabel("Your reply (as the assistant)").fill("Hello from a person on B.");
    await item.getByRole("button", { name: "Send reply" }).click();
    await page.waitForURL(/\/console\/inbox\?answered=/);
    const r = await call(agent, "get_task_result", { task_id: p.taskId, timeout_ms: 30_000 });
    const text = payloadText(r);
    assert.deepEqual(JSON.parse(text.slice(text.indexOf("{"))), {
      role: "assistant",
      content: { type: "text", text: "Hello from a person on B." },
      model: "human (emceepee console)",
      stopReason: "endTurn",
    });
  });

  test("the replicas' read model is served only to replicas: the token alone, or a wrong secret, gets 404", async () => {
    const headers = { Authorization: `Bearer ${TOKEN}`, Accept: "application/json" };
    for (const extra of [{}, { "X-Emceepee-Forwarded": "not-the-secret-0123456789" }]) {
      const res = await fetch(`${a.base}/console/cluster/inbox`, { headers: { ...headers, ...extra } });
      assert.equal(res.status, 404);
    }
    const ok = await fetch(`${a.base}/console/cluster/version`, { headers: { ...headers, "X-Emceepee-Forwarded": SECRET } });
    assert.equal(ok.status, 200);
    assert.match(((await ok.json()) as { replica: string }).replica, /^ra\./);
    const noToken = await fetch(`${a.base}/console/cluster/version`, { headers: { Accept: "application/json", "X-Emceepee-Forwarded": SECRET } });
    assert.equal(noToken.status, 401, "the secret does not replace the gateway's token");
  });

  test("replica A killed: B's console still answers, names A as not answering while its heartbeat lasts (an answer for its session says so), then shows only its own", async () => {
    const { client: agent, session } = await agentOnA();
    await openLive("/console/inbox");
    await promote(agent, "everything", "trigger-elicitation-request", {}, 1_000);
    const item = page.locator("article.request", { hasText: "Please provide inputs for the following fields:" });
    await item.waitFor({ timeout: 90_000 });
    const requestId = (await item.getAttribute("data-key"))!;
    a.served.child.kill("SIGKILL");
    await waitExit(a.served.child);

    // Posted as the page's Decline button does (the page itself may already have dropped A's request on its next refresh).
    const answer = await fetch(`${b.base}/console/inbox/${requestId}`, {
      method: "POST",
      redirect: "manual",
      headers: { Origin: b.base, Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ session: sessionHash(session), kind: "elicitation", action: "decline" }),
    });
    assert.equal(answer.status, 303);
    assert.equal(answer.headers.get("location"), `/console/inbox?gone=${requestId}&by=unreachable`);
    await page.goto(`${b.base}${answer.headers.get("location")!}`);
    await page.getByText(`${requestId} was not answered: a replica that may hold its session did not answer. Try again.`).waitFor();
    await page.goto(`${b.base}/console`);
    await page.locator("#overview").getByText("Not answering, their sessions are not shown:").waitFor();
    assert.match((await page.locator("#overview [role=alert]").textContent()) ?? "", /ra\./);
    await pollFor(
      async () => {
        await page.goto(`${b.base}/console`);
        const now = (await page.locator("#overview").textContent()) ?? "";
        return /ra\./.test(now) ? undefined : now;
      },
      "A's heartbeat to expire",
      LEASE_MS * 4,
      500,
    );
    assert.equal(await page.locator("#overview tr", { hasText: sessionHash(session) }).count(), 0, "A's session is not listed");
    const inbox = await page.goto(`${b.base}/console/inbox`);
    assert.equal(inbox?.status(), 200);
  });
});
