/**
 * Per-user secrets across replicas (issue 23, docs/adr/0027 §13): two gateways with `gateway.cluster` on one real
 * redis-server. Alice's stdio process (the secret-env-server fixture, a real process started with her value) runs on
 * replica 2; she removes her value on replica 1's Connections page. Replica 1 tells the others (the cluster's
 * pub/sub), so the process on replica 2 ends and her next call there takes the consent path (the Connections page).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { call, fixtureArgs, ROOT, startGateway, type TestGateway } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleLogin, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { freePort } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";
import { waitFor } from "../helpers/tasks.js";

const SCOPE = "mcp:tools";
const CONSOLE_SECRET = "console-client-secret-0123456789";
const MCP_REDIRECT = "http://127.0.0.1:65503/callback";
const ALICE = `alice-secret-${randomBytes(8).toString("hex")}`;
const skip = redisSkipReason();

const hashOf = (v: string) => createHash("sha256").update(v).digest("hex").slice(0, 16);

function whoenvOf(r: CallToolResult): { set: boolean; hash: string | null; pid: number } {
  const text = (r.content as Array<{ text?: string }>).map((c) => c.text ?? "").join("\n");
  const m = /\{[^{}]*"set"[^{}]*\}/.exec(text.replace(/\\"/g, '"'));
  assert.ok(m, text);
  return JSON.parse(m[0]) as { set: boolean; hash: string | null; pid: number };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("per-user secrets across replicas", { skip, timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let redis: RedisServer;
  const gws: TestGateway[] = [];
  const bases: string[] = [];
  let agent: Client | undefined;

  before(async () => {
    redis = await startRedis();
    const ports = [await freePort(), await freePort()];
    bases.push(...ports.map((p) => `http://127.0.0.1:${p}`));
    idp = await startOidcProvider({
      scopes: [SCOPE],
      clients: [
        {
          client_id: "console",
          client_secret: CONSOLE_SECRET,
          redirect_uris: bases.map((b) => `${b}/console/callback`),
          token_endpoint_auth_method: "client_secret_post",
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
      ],
    });
    const keys = randomBytes(32).toString("base64");
    for (const [i, port] of ports.entries()) {
      gws.push(
        await startGateway({
          mcpServers: {
            envs: {
              command: process.execPath,
              args: fixtureArgs("secret-env-server"),
              cwd: ROOT,
              secrets: { TOKEN: { env: "FIXTURE_TOKEN" } },
              sharing: "session",
            },
          },
          gateway: {
            port,
            auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
            console: { oidc: { clientId: "console", clientSecret: CONSOLE_SECRET, scopes: ["openid"] } },
            vault: { keys },
            store: { kind: "redis", url: redis.url, keyPrefix: "usr:" },
            cluster: { enabled: true, replicaId: `r${i + 1}`, advertiseUrl: bases[i], secret: "secrets-replicas-cluster-secret-0123" },
          },
        }),
      );
    }
  });

  after(async () => {
    await agent?.close().catch(() => undefined);
    for (const gw of gws) await gw.close();
    await idp?.close();
    await redis?.stop();
  });

  /** Alice's form POST to `base`'s Connections page (her console login there). */
  async function form(base: string, action: "secret-save" | "secret-remove", value?: string): Promise<void> {
    const cookie = await consoleLogin(base, "alice", idp.issuer);
    const res = await fetch(`${base}/console/connections`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie, origin: base, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ action, server: "envs", slot: "TOKEN", ...(value === undefined ? {} : { value }) }).toString(),
    });
    assert.equal(res.status, 303, await res.text());
  }

  test("Remove on replica 1 ends alice's process on replica 2; her next call there asks for the value", async () => {
    const [r1, r2] = bases as [string, string];
    await form(r1, "secret-save", ALICE);
    agent = (await loginAndConnect(`${r2}/mcp`, "alice", new MemoryOAuthClient(MCP_REDIRECT))).client;
    const before = whoenvOf(await call(agent, "execute_tool", { server: "envs", tool: "whoenv", args: {} }));
    assert.equal(before.hash, hashOf(ALICE));
    assert.ok(alive(before.pid));

    await form(r1, "secret-remove");
    await waitFor(() => (alive(before.pid) ? undefined : true), `alice's process ${before.pid} on replica 2 to end`);

    const reply = await call(agent, "execute_tool", { server: "envs", tool: "whoenv", args: {} });
    const waiting = reply.structuredContent as { task_id?: string; authorization_url?: string } | undefined;
    assert.equal(waiting?.authorization_url, `${r2}/console/connections`, JSON.stringify(reply.content));
    await call(agent, "cancel_task", { task_id: waiting.task_id });
  });
});
