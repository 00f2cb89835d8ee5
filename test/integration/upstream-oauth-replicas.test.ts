/**
 * Upstream OAuth across replicas (issue 23, docs/adr/0027 §17): two gateways on one real redis-server, one person's
 * grant, and an authorization server (oidc-provider) that rotates refresh tokens and revokes the grant when a used one
 * comes again. Both replicas' calls need a refresh at once (vault.refreshAheadMs beyond the token's lifetime: every
 * use renews); the token endpoint holds the first refresh until a second arrives (bounded), and lets the second in
 * only after the first has been answered, so two refreshes with one refresh token are refused, not raced. With the
 * store lease one replica refreshes and the other uses its grant: both calls succeed and the person is not asked again.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { call, startGateway, type TestGateway } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleLogin, followAuthorization, startIdentityStack, type IdentityStack } from "../helpers/oidc.js";
import { freePort } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const MCP_REDIRECT = "http://127.0.0.1:65503/callback";
const skip = redisSkipReason();

let stack: IdentityStack | undefined;
let redis: RedisServer | undefined;
let gwB: TestGateway | undefined;
const clients: Client[] = [];

/** execute_tool whoami through `client`: the subject the upstream saw, or the consent URL / error text. */
async function whoami(client: Client): Promise<{ subject?: string; consent?: string; error?: string }> {
  const r = await call(client, "execute_tool", { server: "remote", tool: "whoami", args: {} });
  const waiting = r.structuredContent as { task_id?: string; authorization_url?: string } | undefined;
  if (waiting?.authorization_url && waiting.task_id) {
    await call(client, "cancel_task", { task_id: waiting.task_id });
    return { consent: waiting.authorization_url };
  }
  const text = (r.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("\n");
  if (r.isError) return { error: text };
  return { subject: /"text":\s*"([^"]+)"|^(\w+)$/m.exec(text)?.slice(1).find(Boolean) ?? text };
}

/**
 * The token endpoint's gate for the race: the first request waits until a second arrives (at most `boundMs`), the
 * second goes in only once the first has been answered. `seen` counts the token requests while the gate is set.
 */
function tokenGate(boundMs: number) {
  let arrive!: () => void;
  let done!: () => void;
  const second = new Promise<void>((r) => (arrive = r));
  const firstDone = new Promise<void>((r) => (done = r));
  const gate = {
    seen: 0,
    async pass(res: ServerResponse): Promise<void> {
      const n = ++gate.seen;
      if (n === 1) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([second, new Promise<void>((r) => (timer = setTimeout(r, boundMs)))]);
        clearTimeout(timer);
        res.once("close", done);
      } else if (n === 2) {
        arrive();
        await firstDone;
      }
    },
  };
  return gate;
}

describe("upstream OAuth across replicas", { skip }, () => {
  let gate: ReturnType<typeof tokenGate> | undefined;
  let base = "";
  let baseB = "";

  before(async () => {
    redis = await startRedis();
    const store = { kind: "redis", url: redis.url, keyPrefix: "uor:" };
    // Every use renews: the provider's access tokens live 600 s.
    const vault = { keys: randomBytes(32).toString("base64"), refreshAheadMs: 700_000 };
    const portB = await freePort();
    baseB = `http://127.0.0.1:${portB}`;
    stack = await startIdentityStack({
      gateway: { store, vault },
      alsoConsoleAt: [baseB],
      intercept: async (req, res) => {
        if (gate && req.method === "POST" && req.url?.startsWith("/token")) await gate.pass(res);
      },
    });
    base = stack.base;
    gwB = await startGateway({
      mcpServers: { remote: { url: stack.upstream.url, auth: stack.upstreamAuth, sharing: "session" } },
      gateway: { port: portB, auth: stack.shared.auth, console: stack.shared.console, vault, store },
    });
    for (const at of [base, baseB]) clients.push((await loginAndConnect(`${at}/mcp`, "alice", new MemoryOAuthClient(MCP_REDIRECT))).client);
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await gwB?.close();
    await stack?.close();
    await redis?.stop();
  });

  test("both replicas refresh one grant at once: one refreshes, the other uses its grant; the person is not asked again", async () => {
    const [a, b] = clients as [Client, Client];
    // Alice consents once, through replica A.
    const first = await whoami(a);
    assert.ok(first.consent, JSON.stringify(first));
    const back = await followAuthorization(new URL(first.consent), "alice", `${base}/console/oauth/callback`);
    const hop = await fetch(back, { redirect: "manual" });
    const next = /url=([^"]+)"/.exec(await hop.text())![1]!.replace(/&amp;/g, "&");
    const cookie = await consoleLogin(base, "alice", stack!.idp.issuer);
    assert.equal((await fetch(`${base}${next}`, { redirect: "manual", headers: { cookie } })).status, 200);
    // Each replica's connection made (one after the other: each of its requests renews the grant in turn).
    assert.equal((await whoami(a)).subject, "alice");
    assert.equal((await whoami(b)).subject, "alice");

    for (let round = 0; round < 2; round++) {
      gate = tokenGate(3_000);
      const both = await Promise.all([whoami(a), whoami(b)]);
      const seen = gate.seen;
      gate = undefined;
      assert.deepEqual(both, [{ subject: "alice" }, { subject: "alice" }], `round ${round}: ${JSON.stringify(both)}`);
      assert.equal(seen, 1, "one refresh for both replicas' calls");
    }
    // Still connected: the next calls need no consent either.
    assert.deepEqual(await Promise.all([whoami(a), whoami(b)]), [{ subject: "alice" }, { subject: "alice" }]);
  });
});
