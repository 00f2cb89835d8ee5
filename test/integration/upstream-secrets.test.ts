/**
 * Per-user secrets through a real gateway (issue 23, docs/adr/0027 §13): a stdio server with a secret slot
 * (the secret-env-server fixture, started as a real process, reports a hash of the env value it got). Alice's
 * call without a value waits as a task whose URL is the Connections page; Chromium, logged in to the console
 * as alice, fills the slot and the waiting call completes with her value. Bob's value is his own: each
 * principal gets their own process in session and in shared mode. The raw SQLite file and the logs hold no
 * value; Replace and Remove end the person's running processes, so the next call uses the new value (or asks again).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import type { BrowserContext, Page } from "playwright-core";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ElicitationCompleteNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createLogger } from "../../src/logging.js";
import { browserUnavailable, openTestPage, type TestBrowser } from "../helpers/browser.js";
import { call, fixtureArgs, ROOT, startGateway, type TestGateway } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleLogin, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { freePort } from "../helpers/core-extra.js";

const SCOPE = "mcp:tools";
const CONSOLE_SECRET = "console-client-secret-0123456789";
const MCP_REDIRECT = "http://127.0.0.1:65503/callback";
const ALICE = `alice-secret-${randomBytes(8).toString("hex")}`;
const ALICE2 = `alice-replaced-${randomBytes(8).toString("hex")}`;
const BOB = `bob-secret-${randomBytes(8).toString("hex")}`;
const CAROL = `carol-secret-${randomBytes(8).toString("hex")}`;
const skip = browserUnavailable();

const hashOf = (v: string) => createHash("sha256").update(v).digest("hex").slice(0, 16);
const fixture = (sharing: "session" | "shared") => ({
  command: process.execPath,
  args: fixtureArgs("secret-env-server"),
  cwd: ROOT,
  secrets: { TOKEN: { description: "your test token", env: "FIXTURE_TOKEN" } },
  sharing,
});

/** The fixture's answer: which value (hash) and which process. */
function whoenvOf(r: CallToolResult): { set: boolean; hash: string | null; pid: number } {
  const text = (r.content as Array<{ text?: string }>).map((c) => c.text ?? "").join("\n");
  const m = /\{[^{}]*"set"[^{}]*\}/.exec(text.replace(/\\"/g, '"'));
  assert.ok(m, text);
  return JSON.parse(m[0]) as { set: boolean; hash: string | null; pid: number };
}

describe("per-user secrets", { skip, timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let gw: TestGateway;
  let base: string;
  let dir: string;
  let tb: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  const agents: Record<string, Client> = {};
  const extra: Client[] = [];
  const logText: string[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-secrets-"));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    idp = await startOidcProvider({
      scopes: [SCOPE],
      clients: [
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
    gw = await startGateway(
      {
        mcpServers: { envs: fixture("session"), envsh: fixture("shared") },
        gateway: {
          port,
          auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
          console: { oidc: { clientId: "console", clientSecret: CONSOLE_SECRET, scopes: ["openid"] } },
          vault: { keys: randomBytes(32).toString("base64") },
          store: { kind: "sqlite", path: path.join(dir, "state.db") },
          upstream: { warmPool: 2 },
        },
      },
      { logger: createLogger("debug", new Writable({ write: (chunk: Buffer, _e, done) => (logText.push(chunk.toString("utf8")), done()) })) },
    );
    for (const user of ["alice", "bob"]) agents[user] = (await loginAndConnect(`${base}/mcp`, user, new MemoryOAuthClient(MCP_REDIRECT))).client;
    ({ tb, context, page } = await openTestPage());
    const [name, value] = (await consoleLogin(base, "alice", idp.issuer)).split(/=(.*)/s) as [string, string];
    await context.addCookies([{ name, value, url: base, sameSite: "Strict" }]);
  });

  after(async () => {
    for (const a of [...Object.values(agents), ...extra]) await a.close().catch(() => undefined);
    await context?.close();
    await tb?.close();
    await gw?.close();
    await idp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const slotRow = (server: string) => page.locator(`tr[data-server="${server}"][data-slot="TOKEN"]`);
  const statusOf = async (server: string) => (await slotRow(server).locator("td.status").textContent())?.trim() ?? "";

  /** In Chromium, as alice: fill the slot of `server` and press its first button (Save or Replace). */
  async function fillInBrowser(server: string, value: string): Promise<void> {
    await page.goto(`${base}/console/connections`);
    await slotRow(server).locator('input[name="value"]').fill(value);
    await Promise.all([page.waitForURL(`${base}/console/connections`), slotRow(server).locator("form").first().getByRole("button").click()]);
  }

  /** `user` fills their slot with a plain form POST under their console login (the browser path is alice's). */
  async function fillAs(user: string, server: string, value: string): Promise<void> {
    const cookie = await consoleLogin(base, user, idp.issuer);
    const res = await fetch(`${base}/console/connections`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie, origin: base, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ action: "secret-save", server, slot: "TOKEN", value }).toString(),
    });
    assert.equal(res.status, 303, await res.text());
  }

  test("a call without the value waits; Chromium fills the slot on the Connections page and the call resumes with it", async () => {
    const reply = await call(agents["alice"]!, "execute_tool", { server: "envs", tool: "whoenv", args: {} });
    const waiting = reply.structuredContent as { task_id?: string; authorization_url?: string } | undefined;
    assert.ok(waiting?.task_id, JSON.stringify(reply.content));
    assert.equal(waiting.authorization_url, `${base}/console/connections`);
    await page.goto(`${base}/console/connections`);
    assert.equal(await statusOf("envs"), "not set");
    await fillInBrowser("envs", ALICE);
    assert.match(await statusOf("envs"), /^set/);
    assert.ok(!(await page.content()).includes(ALICE), "the value is never shown back");
    const result = await call(agents["alice"]!, "get_task_result", { task_id: waiting.task_id, timeout_ms: 90_000 });
    assert.equal(whoenvOf(result).hash, hashOf(ALICE));
  });

  test("each principal's own process with their own value, in session and in shared mode", async () => {
    await fillInBrowser("envsh", ALICE);
    await fillAs("bob", "envs", BOB);
    await fillAs("bob", "envsh", BOB);
    const run = async (user: string, server: string) => whoenvOf(await call(agents[user]!, "execute_tool", { server, tool: "whoenv", args: {} }));
    for (const server of ["envs", "envsh"]) {
      const a = await run("alice", server);
      const b = await run("bob", server);
      assert.equal(a.hash, hashOf(ALICE), server);
      assert.equal(b.hash, hashOf(BOB), server);
      assert.notEqual(a.pid, b.pid, `${server}: one process per principal`);
    }
    // A second session of alice's shares her shared process, never bob's.
    const again = (await loginAndConnect(`${base}/mcp`, "alice", new MemoryOAuthClient(MCP_REDIRECT))).client;
    extra.push(again);
    const shared = whoenvOf(await call(again, "execute_tool", { server: "envsh", tool: "whoenv", args: {} }));
    assert.equal(shared.hash, hashOf(ALICE));
    assert.equal(shared.pid, (await run("alice", "envsh")).pid);
  });

  test("transparent face: a URL elicitation of the Connections page; the call resumes once the value is saved, then elicitation/complete", async () => {
    const tokens = new MemoryOAuthClient(MCP_REDIRECT);
    extra.push((await loginAndConnect(`${base}/all/mcp`, "carol", tokens)).client);
    const client = new Client({ name: "secrets-transparent", version: "1" }, { capabilities: { elicitation: { url: {} } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/all/mcp`), { authProvider: tokens }));
    extra.push(client);
    const asked: Array<{ mode?: string; url?: string; elicitationId?: string }> = [];
    const completed: string[] = [];
    const saved: Promise<void>[] = [];
    client.setRequestHandler(ElicitRequestSchema, (req) => {
      asked.push(req.params as { mode?: string; url?: string; elicitationId?: string });
      // The person opens the link and saves their value (after the client said yes).
      saved.push(fillAs("carol", "envs", CAROL));
      return { action: "accept" };
    });
    let completion: (() => void) | undefined;
    const completedOnce = new Promise<void>((resolve) => (completion = resolve));
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
      completed.push(n.params.elicitationId);
      completion?.();
    });
    const result = (await client.callTool({ name: "envs__whoenv", arguments: {} }, undefined, { timeout: 120_000 })) as CallToolResult;
    assert.equal(result.isError, undefined, JSON.stringify(result.content));
    assert.equal(whoenvOf(result).hash, hashOf(CAROL));
    assert.equal(asked.length, 1);
    assert.equal(asked[0]!.mode, "url");
    assert.equal(asked[0]!.url, `${base}/console/connections`);
    await saved[0];
    await completedOnce; // bounded by the test's timeout
    assert.deepEqual(completed, [asked[0]!.elicitationId]);
  });

  test("the raw SQLite files and the logs hold no value", () => {
    for (const f of readdirSync(dir)) {
      const raw = readFileSync(path.join(dir, f)).toString("latin1");
      for (const v of [ALICE, BOB, CAROL]) assert.ok(!raw.includes(v), `${f} holds no secret value`);
    }
    const logs = logText.join("");
    assert.match(logs, /upstream_secret_saved/);
    for (const v of [ALICE, BOB, CAROL]) assert.ok(!logs.includes(v), "no log line holds a secret value");
  });

  test("Replace ends the person's running shared process (only theirs): the next call uses the new value", async () => {
    const run = async (user: string) => whoenvOf(await call(agents[user]!, "execute_tool", { server: "envsh", tool: "whoenv", args: {} }));
    const before = await run("alice");
    const bobBefore = await run("bob");
    assert.equal(before.hash, hashOf(ALICE));
    await fillInBrowser("envsh", ALICE2);
    let now: { hash: string | null; pid: number } | undefined;
    // The old process is dropped at once; a call racing the drop may fail: poll until the new value answers.
    for (const end = Date.now() + 60_000; Date.now() < end;) {
      now = await run("alice").catch(() => undefined);
      if (now?.hash === hashOf(ALICE2)) break;
    }
    assert.equal(now?.hash, hashOf(ALICE2));
    assert.notEqual(now.pid, before.pid);
    const bobAfter = await run("bob");
    assert.equal(bobAfter.hash, hashOf(BOB));
    assert.equal(bobAfter.pid, bobBefore.pid, "bob's process is untouched");
  });

  test("Replace takes effect on the next connection; Remove makes the next session ask again", async () => {
    await fillInBrowser("envs", ALICE2);
    const fresh = (await loginAndConnect(`${base}/mcp`, "alice", new MemoryOAuthClient(MCP_REDIRECT))).client;
    extra.push(fresh);
    assert.equal(whoenvOf(await call(fresh, "execute_tool", { server: "envs", tool: "whoenv", args: {} })).hash, hashOf(ALICE2));
    await page.goto(`${base}/console/connections`);
    await Promise.all([page.waitForURL(`${base}/console/connections`), slotRow("envs").getByRole("button", { name: "Remove" }).click()]);
    assert.equal(await statusOf("envs"), "not set");
    const later = (await loginAndConnect(`${base}/mcp`, "alice", new MemoryOAuthClient(MCP_REDIRECT))).client;
    extra.push(later);
    const reply = await call(later, "execute_tool", { server: "envs", tool: "whoenv", args: {} });
    const waiting = reply.structuredContent as { task_id?: string; authorization_url?: string } | undefined;
    assert.equal(waiting?.authorization_url, `${base}/console/connections`, JSON.stringify(reply.content));
    await call(later, "cancel_task", { task_id: waiting.task_id });
  });
});
