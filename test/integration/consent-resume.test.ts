/**
 * Consent that does not lose the call (issue 23): a person whose agent calls
 * an OAuth-protected upstream they have not connected yet gets the
 * authorization URL as a URL-mode elicitation (transparent face, a client
 * with `elicitation.url`), -32042 URLElicitationRequiredError (a client
 * without it), or a promoted task with a pending URL elicitation (meta
 * face); the test plays the person at oidc-provider headlessly and the same
 * call goes on by itself. Another person opening the link binds nothing and
 * the task keeps waiting.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ElicitationCompleteNotificationSchema, McpError, type ElicitRequest } from "@modelcontextprotocol/sdk/types.js";
import { continueUrlOf } from "../../src/console/views/connections.js";
import { call } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleLogin, followAuthorization, startIdentityStack, type IdentityStack, type TestOidcProvider } from "../helpers/oidc.js";
import { waitFor } from "../helpers/tasks.js";
import type { ProtectedServer } from "../fixtures/oauth-protected-server.js";

const MCP_REDIRECT = "http://127.0.0.1:65503/callback";

let stack: IdentityStack;
let idp: TestOidcProvider;
let upstream: ProtectedServer;
let base: string;
const oauth: Record<string, MemoryOAuthClient> = {};
const cookies: Record<string, string> = {};
const opened: Client[] = [];

/** `user` consents at the provider and their browser completes the callback with `cookie`'s console login. */
async function consent(url: string, user: string, cookie: string): Promise<{ status: number; text: string }> {
  const back = await followAuthorization(url, user, `${base}/console/oauth/callback`);
  const hop = await fetch(back, { redirect: "manual" });
  const next = /url=([^"]+)"/.exec(await hop.text())![1]!.replace(/&amp;/g, "&");
  const res = await fetch(`${base}${next}`, { redirect: "manual", headers: { cookie } });
  return { status: res.status, text: await res.text() };
}

/** A client of `user` on `path` (a token for that resource first), with `capabilities`. */
async function clientOf(user: string, path: string, capabilities: Record<string, unknown> = {}): Promise<Client> {
  const tokens = path === "/mcp" ? oauth[user]! : new MemoryOAuthClient(MCP_REDIRECT);
  if (path !== "/mcp") opened.push((await loginAndConnect(`${base}${path}`, user, tokens)).client);
  const client = new Client({ name: "consent-test", version: "1" }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}${path}`), { authProvider: tokens }));
  opened.push(client);
  return client;
}

const textOf = (r: object) => (((r as { content?: unknown }).content ?? []) as Array<{ text?: string }>).map((c) => c.text ?? "").join("\n");

before(async () => {
  stack = await startIdentityStack();
  ({ idp, upstream, base } = stack);
  for (const user of ["alice", "bob", "carol", "erin"]) {
    oauth[user] = new MemoryOAuthClient(MCP_REDIRECT);
    opened.push((await loginAndConnect(`${base}/mcp`, user, oauth[user])).client);
    cookies[user] = await consoleLogin(base, user, idp.issuer);
  }
});

after(async () => {
  for (const c of opened) await c.close().catch(() => undefined);
  await stack?.close();
});

describe("a call that needs consent resumes after it", () => {
  test("transparent face, URL elicitation: the call waits, the person consents, elicitation/complete, the same call answers", async () => {
    const client = await clientOf("alice", "/all/mcp", { elicitation: { url: {} } });
    const asked: ElicitRequest["params"][] = [];
    const completed: string[] = [];
    const consents: Promise<{ status: number; text: string }>[] = [];
    client.setRequestHandler(ElicitRequestSchema, (req) => {
      asked.push(req.params);
      // The person opens the link (after the client said yes).
      if (req.params.mode === "url") consents.push(consent(req.params.url, "alice", cookies.alice!));
      return { action: "accept" };
    });
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completed.push(n.params.elicitationId));
    const seen = upstream.seen.length;
    const result = await client.callTool({ name: "remote__whoami", arguments: {} }, undefined, { timeout: 120_000 });
    assert.equal(result.isError, undefined, textOf(result));
    assert.match(textOf(result), /alice/);
    assert.equal(asked.length, 1);
    const params = asked[0] as { mode: string; url: string; elicitationId: string };
    assert.equal(params.mode, "url");
    assert.equal(new URL(params.url).origin, idp.issuer);
    const done = await consents[0]!;
    assert.equal(done.status, 200, done.text);
    await waitFor(() => (completed.length ? true : undefined), "elicitation/complete", 60_000);
    assert.deepEqual(completed, [params.elicitationId]);
    assert.deepEqual(
      upstream.seen
        .slice(seen)
        .filter((s) => s.method === "tools/call")
        .map((s) => s.subject),
      ["alice"],
    );
  });

  test("transparent face, the person declines: the call ends with EMCP_CONSENT_REQUIRED and nothing is stored", async () => {
    const client = await clientOf("erin", "/all/mcp", { elicitation: { url: {} } });
    client.setRequestHandler(ElicitRequestSchema, () => ({ action: "decline" }));
    const err = await client.callTool({ name: "remote__whoami", arguments: {} }).then(
      () => assert.fail("the call needed consent"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof McpError, String(err));
    assert.match(err.message, /EMCP_CONSENT_REQUIRED: the authorization for server remote was not given \(decline\)/);
    const page = await (await fetch(`${base}/console/connections`, { headers: { cookie: cookies.erin! } })).text();
    assert.match(page, /<code>remote<\/code><\/td>\s*<td>not connected<\/td>/);
  });

  test("transparent face, a client without URL elicitation: -32042 with the authorization URL as a URL elicitation", async () => {
    const client = await clientOf("bob", "/all/mcp");
    const err = await client.callTool({ name: "remote__whoami", arguments: {} }).then(
      () => assert.fail("the call needed consent"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof McpError, String(err));
    assert.equal(err.code, -32042);
    // The SDK client keeps only `data.elicitations` of a -32042 (UrlElicitationRequiredError); the message keeps the EMCP code and the URL.
    assert.match(err.message, /EMCP_CONSENT_REQUIRED/);
    const data = err.data as { elicitations: Array<{ mode: string; url: string; elicitationId: string }> };
    assert.equal(data.elicitations.length, 1);
    assert.equal(data.elicitations[0]!.mode, "url");
    assert.equal(new URL(data.elicitations[0]!.url).origin, idp.issuer);
    assert.ok(err.message.includes(data.elicitations[0]!.url), err.message);
    assert.ok(data.elicitations[0]!.elicitationId.length > 0);
  });

  test("meta face: a promoted task with a pending URL elicitation; another person's completion binds nothing; the owner's consent completes the task", async () => {
    const client = await clientOf("carol", "/mcp");
    const promotedReply = await call(client, "execute_tool", { server: "remote", tool: "whoami", args: {} });
    assert.equal(promotedReply.isError, undefined, textOf(promotedReply));
    const reply = promotedReply.structuredContent as { task_id: string; authorization_url: string };
    assert.ok(reply.task_id, textOf(promotedReply));
    const pending = await waitFor(
      async () => {
        const r = await call(client, "get_elicitations", {});
        const list = (r.structuredContent as { elicitations?: Array<{ requestId: string; mode: string; url: string }> }).elicitations;
        return list?.length ? list : undefined;
      },
      "the URL elicitation in get_elicitations",
      60_000,
    );
    assert.equal(pending.length, 1);
    assert.equal(pending[0]!.mode, "url");
    assert.equal(pending[0]!.url, reply.authorization_url);
    const status = async () => ((await call(client, "get_task", { task_id: reply.task_id })).structuredContent as { task: { status: string } }).task.status;
    await waitFor(async () => ((await status()) === "input_required" ? true : undefined), "input_required", 60_000);

    // Bob opens carol's link with his console login: refused, nothing bound, the task still waits.
    const stolen = await consent(reply.authorization_url, "bob", cookies.bob!);
    assert.equal(stolen.status, 400);
    assert.match(stolen.text, /another person/);
    assert.equal(await status(), "input_required");

    // Carol's own consent: a fresh link (the first was used up), from the Connections page.
    const connect = await fetch(`${base}/console/connections`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie: cookies.carol!, origin: base, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ server: "remote", action: "connect" }).toString(),
    });
    assert.equal(connect.status, 200);
    const done = await consent(continueUrlOf(await connect.text())!, "carol", cookies.carol!);
    assert.equal(done.status, 200, done.text);
    const result = await call(client, "get_task_result", { task_id: reply.task_id, timeout_ms: 60_000 });
    assert.match(textOf(result), /carol/);
    assert.equal(await status(), "completed");
    const after = await call(client, "get_elicitations", {});
    assert.equal(
      (after.structuredContent as { elicitations?: unknown[] }).elicitations?.length ?? 0,
      0,
      "the elicitation is withdrawn once the grant is stored",
    );
  });
});
