/**
 * Per-person upstream identity through a real gateway (issue 23): alice and
 * bob log in to the gateway with OAuth (oidc-provider on loopback), call a
 * remote upstream with `auth: { type: "oauth" }` (an MCP resource server of
 * the same provider) through the meta face; without their own grant each
 * gets EMCP_CONSENT_REQUIRED with an authorization URL, the test plays the
 * person (the provider's dev pages, headlessly) and completes the callback
 * with that person's console login; afterwards each call carries its own
 * principal's token, on own (session) and on shared connections, and one
 * person's consent link completed by another is refused and stores nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { continueUrlOf } from "../../src/console/views/connections.js";
import { createLogger } from "../../src/logging.js";
import { call, startGateway, type TestGateway } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleLogin, followAuthorization, startIdentityStack, type IdentityStack, type TestOidcProvider } from "../helpers/oidc.js";
import { freePort } from "../helpers/core-extra.js";
import type { ProtectedServer } from "../fixtures/oauth-protected-server.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const MCP_REDIRECT = "http://127.0.0.1:65503/callback";

let stack: IdentityStack;
let idp: TestOidcProvider;
let upstream: ProtectedServer;
let base: string;
const clients: Record<string, Client> = {};
let redis: RedisServer | undefined;
let baseB = "";
let gwB: TestGateway | undefined;
/** Every log line gateway A wrote. */
const logText: string[] = [];
const cookies: Record<string, string> = {};

/** A console session of `user` (the console's OIDC login, headlessly): its Cookie header. */
const consoleCookie = (user: string, at = base): Promise<string> => consoleLogin(at, user, idp.issuer);

/** execute_tool whoami on `server` as `user`: the subject the upstream saw, or the error text. */
async function whoami(user: string, server: string, client = clients[user]!): Promise<{ subject?: string; error?: string }> {
  const r = await call(client, "execute_tool", { server, tool: "whoami", args: {} });
  // Without a grant the call waits for consent as a task (docs/adr/0027 §12): withdrawn here, its URL read as the old error.
  const waiting = r.structuredContent as { task_id?: string; authorization_url?: string } | undefined;
  if (waiting?.authorization_url && waiting.task_id) {
    await call(client, "cancel_task", { task_id: waiting.task_id });
    return { error: `EMCP_CONSENT_REQUIRED: open ${waiting.authorization_url} in a browser` };
  }
  const text = (r.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("\n");
  if (r.isError) return { error: text };
  return { subject: /"text":\s*"([^"]+)"|^(\w+)$/m.exec(text)?.slice(1).find(Boolean) ?? text };
}

/** The authorization URL of a CONSENT_REQUIRED answer. */
function authorizationUrl(error: string | undefined): URL {
  assert.match(error ?? "", /EMCP_CONSENT_REQUIRED/);
  return new URL(/open (\S+) in a browser/.exec(error!)![1]!);
}

/** `person` consents at the provider (as `user` there) and the browser comes back with `cookie`'s console login; the completion page. */
async function consentAndComplete(url: URL, user: string, cookie: string, completeAt = base): Promise<{ status: number; text: string }> {
  const back = await followAuthorization(url, user, `${base}/console/oauth/callback`);
  // The public callback only moves the browser on, same-site, with the same query; it needs no login.
  const hop = await fetch(back, { redirect: "manual" });
  assert.equal(hop.status, 200);
  const next = /url=([^"]+)"/.exec(await hop.text())![1]!.replace(/&amp;/g, "&");
  assert.ok(next.startsWith("/console/oauth/complete?"));
  const res = await fetch(`${completeAt}${next}`, { redirect: "manual", headers: { cookie } });
  return { status: res.status, text: await res.text() };
}

before(async () => {
  const portB = await freePort();
  baseB = `http://127.0.0.1:${portB}`;
  if (redisSkipReason() === undefined) redis = await startRedis();
  const store = redis ? { kind: "redis", url: redis.url, keyPrefix: "uid:" } : undefined;
  stack = await startIdentityStack({
    servers: (url, auth) => ({
      remote: { url, auth, sharing: "session" },
      "remote-shared": { url, auth, sharing: "shared" },
    }),
    gateway: { ...(store ? { store } : {}), logLevel: "debug" },
    deps: { logger: createLogger("debug", new Writable({ write: (chunk: Buffer, _e, done) => (logText.push(chunk.toString("utf8")), done()) })) },
    alsoConsoleAt: [baseB],
  });
  ({ idp, upstream, base } = stack);
  // A second replica on the same Redis store (same vault key): a callback may reach it.
  if (store) {
    gwB = await startGateway({
      mcpServers: { remote: { url: upstream.url, auth: stack.upstreamAuth, sharing: "session" } },
      gateway: { port: portB, ...stack.shared, store },
    });
  }
  for (const user of ["alice", "bob"]) {
    clients[user] = (await loginAndConnect(`${base}/mcp`, user, new MemoryOAuthClient(MCP_REDIRECT))).client;
    cookies[user] = await consoleCookie(user);
  }
});

after(async () => {
  for (const c of Object.values(clients)) await c.close().catch(() => undefined);
  await gwB?.close();
  await stack?.close();
  await redis?.stop();
});

describe("upstream identity through the gateway", () => {
  for (const server of ["remote", "remote-shared"]) {
    test(`${server}: each person consents once and their calls carry their own identity; another's link is refused`, async () => {
      const seenBefore = upstream.seen.length;
      const aliceUrl = authorizationUrl((await whoami("alice", server)).error);
      assert.equal(aliceUrl.origin, idp.issuer);
      assert.equal(aliceUrl.searchParams.get("code_challenge_method"), "S256");
      const done = await consentAndComplete(aliceUrl, "alice", cookies.alice!);
      assert.equal(done.status, 200, done.text);
      assert.match(done.text, new RegExp(`Server <code>${server}</code> is connected`));
      assert.deepEqual(await whoami("alice", server), { subject: "alice" });

      // Bob: alice's grant (and, shared, her connection) is not his.
      const bobUrl = authorizationUrl((await whoami("bob", server)).error);
      // Alice opening bob's link (her console login) binds nothing to her or to him.
      const stolen = await consentAndComplete(bobUrl, "alice", cookies.alice!);
      assert.equal(stolen.status, 400);
      assert.match(stolen.text, /another person/);
      assert.match((await whoami("bob", server)).error ?? "", /EMCP_CONSENT_REQUIRED/);
      const bobDone = await consentAndComplete(authorizationUrl((await whoami("bob", server)).error), "bob", cookies.bob!);
      assert.equal(bobDone.status, 200, bobDone.text);
      assert.deepEqual(await whoami("bob", server), { subject: "bob" });
      assert.deepEqual(await whoami("alice", server), { subject: "alice" });
      const calls = upstream.seen.slice(seenBefore).filter((s) => s.method === "tools/call");
      assert.deepEqual(
        calls.map((c) => c.subject),
        ["alice", "bob", "alice"],
        "every tools/call carried its caller's own token",
      );
    });
  }

  test("the Connections page: a person sees their own connections, disconnects (the next call asks again) and connects from there", async () => {
    const page = async (user: string) => (await fetch(`${base}/console/connections`, { headers: { cookie: cookies[user]! } })).text();
    const alice = await page("alice");
    assert.match(alice, /<code>remote<\/code><\/td>\s*<td>connected<\/td>/);
    assert.match(alice, /mcp:tools/);
    const post = (user: string, form: Record<string, string>) =>
      fetch(`${base}/console/connections`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie: cookies[user]!, origin: base, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(form).toString(),
      });
    const off = await post("alice", { server: "remote", action: "disconnect" });
    assert.equal(off.status, 303);
    assert.match(await page("alice"), /<code>remote<\/code><\/td>\s*<td>not connected<\/td>/);
    assert.match(await page("bob"), /<code>remote<\/code><\/td>\s*<td>connected<\/td>/, "bob's connection is his own");
    assert.match((await whoami("alice", "remote")).error ?? "", /EMCP_CONSENT_REQUIRED/, "revoked here: the next call asks again");
    const on = await post("alice", { server: "remote", action: "connect" });
    // A page that moves the browser on (the console's form-action 'self' stops a 303 to another origin).
    assert.equal(on.status, 200);
    const authorize = new URL(continueUrlOf(await on.text())!);
    assert.equal(authorize.origin, idp.issuer);
    const done = await consentAndComplete(authorize, "alice", cookies.alice!);
    assert.equal(done.status, 200, done.text);
    assert.deepEqual(await whoami("alice", "remote"), { subject: "alice" });
  });

  test("a replayed callback is refused and changes nothing", async () => {
    // A flow of bob's for a third server name is not needed: a used state is simply unknown.
    const res = await fetch(`${base}/console/oauth/complete?state=never-started&code=x&iss=${encodeURIComponent(idp.issuer)}`, {
      headers: { cookie: cookies.bob! },
    });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /unknown, already used or expired state/);
  });

  test("a flow started on one replica completes on another (flows and credentials in the shared store), once", { skip: redisSkipReason() }, async () => {
    const carol = (await loginAndConnect(`${base}/mcp`, "carol", new MemoryOAuthClient(MCP_REDIRECT))).client;
    const carolOnB = (await loginAndConnect(`${baseB}/mcp`, "carol", new MemoryOAuthClient(MCP_REDIRECT))).client;
    try {
      const url = authorizationUrl((await whoami("carol", "remote", carol)).error);
      const back = await followAuthorization(url, "carol", `${base}/console/oauth/callback`);
      const cookieB = await consoleCookie("carol", baseB);
      const done = await fetch(`${baseB}/console/oauth/complete${back.search}`, { headers: { cookie: cookieB } });
      assert.equal(done.status, 200, await done.clone().text());
      // Replayed at the replica that started it: the state is used up.
      const again = await fetch(`${base}/console/oauth/complete${back.search}`, { headers: { cookie: await consoleCookie("carol") } });
      assert.equal(again.status, 400);
      assert.match(await again.text(), /already used/);
      assert.deepEqual(await whoami("carol", "remote", carol), { subject: "carol" });
      assert.deepEqual(await whoami("carol", "remote", carolOnB), { subject: "carol" }, "the grant is in the shared store");
    } finally {
      await carol.close();
      await carolOnB.close();
    }
  });

  test("no access or refresh token, PKCE verifier or code appears in any log line, error or console page", async () => {
    assert.ok(upstream.tokens.size >= 2, "tokens were used");
    const logs = logText.join("");
    assert.ok(logs.includes("upstream_authorized"), "the log was captured");
    for (const token of upstream.tokens) assert.ok(!logs.includes(token) && !logs.includes(token.slice(-24)), "a token in the logs");
    for (const user of ["alice", "bob"]) {
      const page = await (await fetch(`${base}/console/`, { headers: { cookie: cookies[user]! } })).text();
      for (const token of upstream.tokens) assert.ok(!page.includes(token.slice(-24)), "a token in the console");
    }
  });
});
