/**
 * Rate limits (gateway.rateLimits, docs/adr/0023) with real parts: a real
 * OpenID provider logs alice and bob in; a per-principal-per-tool bucket
 * throttles alice on every face (meta execute_tool: EMCP_RATE_LIMITED with
 * retry_after_ms; transparent tools/call and a task-augmented call: a JSON-RPC
 * error with data.retryAfterSeconds and the limit's scope, no task made) while
 * bob goes on; /metrics counts the refusals by scope. Then two replicas
 * (`emceepee serve` children, cluster on) on one real redis-server share one
 * per-server bucket: calls spread over both are refused beyond its capacity
 * (their upstream: an echo server over Streamable HTTP in the test process, as
 * the limit is the subject, not the upstream's process; docs/adr/0062).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ROOT, startGateway, type TestGateway } from "../helpers/gateway.js";
import { statelessEchoHandler } from "../helpers/echo-upstream.js";
import { freePort, logLines, startCliServe, stopChild, type RunningCli } from "../helpers/core-extra.js";
import { inProcess, inProcessTransportFactory } from "../helpers/in-process.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";
import { LONG, rpcError, startTask } from "../helpers/tasks.js";

const SCOPE = "mcp:tools";
const STATIC_TOKEN = "static-machine-token-0123456789";
const REDIRECT = "http://127.0.0.1:65500/callback";
/** So slow that no token comes back while a test runs (one per 100 minutes). */
const NEVER = 0.01;

const execute = (client: Client, message: string) =>
  client.callTool({ name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message } } }, undefined, LONG) as Promise<CallToolResult>;
const textOf = (r: CallToolResult) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("");

describe("rate limits per principal and tool (OAuth users, real provider)", { timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let gw: TestGateway;
  let base: string;
  const clients: Client[] = [];
  const aliceMeta = new MemoryOAuthClient(REDIRECT);
  const aliceEverything = new MemoryOAuthClient(REDIRECT);
  const bobMeta = new MemoryOAuthClient(REDIRECT);

  const limited = async () => {
    const page = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${STATIC_TOKEN}` } })).text();
    return Number(/^emceepee_rate_limited_total\{scope="principal\+tool"\} (\d+)$/m.exec(page)?.[1] ?? 0);
  };

  before(async () => {
    idp = await startOidcProvider({ scopes: [SCOPE] });
    gw = await startGateway(
      {
        mcpServers: { everything: inProcess("everything") },
        gateway: {
          token: STATIC_TOKEN,
          auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
          rateLimits: [{ name: "echo-per-user", scope: "principal+tool", server: "every*", tool: "echo", capacity: 2, refillPerMinute: NEVER }],
        },
      },
      { transportFactory: inProcessTransportFactory() },
    );
    base = new URL(gw.url).origin;
  });

  after(async () => {
    for (const c of clients) {
      await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await c.close().catch(() => undefined);
    }
    await gw?.close();
    await idp?.close();
  });

  test("alice's bucket empties on the meta face (EMCP_RATE_LIMITED, retry_after_ms) and stays empty on the transparent face (JSON-RPC error data, task-augmented too); bob goes on", async () => {
    const alice = (await loginAndConnect(`${base}/mcp`, "alice", aliceMeta)).client;
    const aliceT = (await loginAndConnect(`${base}/servers/everything/mcp`, "alice", aliceEverything)).client;
    const bob = (await loginAndConnect(`${base}/mcp`, "bob", bobMeta)).client;
    clients.push(alice, aliceT, bob);
    const before = await limited();

    for (const m of ["one", "two"]) {
      const ok = await execute(alice, m);
      assert.notEqual(ok.isError, true, textOf(ok));
      assert.match(textOf(ok), new RegExp(m));
    }
    const refused = await execute(alice, "three");
    assert.equal(refused.isError, true);
    assert.match(textOf(refused), /^EMCP_RATE_LIMITED: .*'echo-per-user'.*retry after \d+ s \(retry_after_ms: \d+\)/);
    // Other tools are not counted by this limit.
    const other = (await alice.callTool(
      { name: "execute_tool", arguments: { server: "everything", tool: "get-sum", args: { a: 1, b: 2 } } },
      undefined,
      LONG,
    )) as CallToolResult;
    assert.notEqual(other.isError, true, textOf(other));

    // The same bucket on the transparent face: a JSON-RPC error, before anything is sent upstream.
    const err = await rpcError(aliceT.callTool({ name: "echo", arguments: { message: "four" } }, undefined, LONG));
    assert.equal(err.code, -32603);
    assert.match(err.message, /over the rate limit 'echo-per-user'/);
    const data = err.data as { code: string; retryAfterSeconds: number; retry_after_ms: number; scope: string; limit: string };
    assert.equal(data.code, "EMCP_RATE_LIMITED");
    assert.equal(data.scope, "principal+tool");
    assert.equal(data.limit, "echo-per-user");
    assert.ok(data.retryAfterSeconds > 60, `retryAfterSeconds ${data.retryAfterSeconds}`);
    // A task-augmented call is refused the same way: no task is accepted.
    const taskErr = await rpcError(startTask(aliceT, "echo", { message: "five" }));
    assert.equal((taskErr.data as { code: string }).code, "EMCP_RATE_LIMITED");
    const tasks = await aliceT.experimental.tasks.listTasks(undefined, LONG);
    assert.equal(tasks.tasks.length, 0, "no task was made");

    // Bob has his own bucket.
    for (const m of ["b1", "b2"]) assert.notEqual((await execute(bob, m)).isError, true);
    assert.equal((await execute(bob, "b3")).isError, true);

    assert.equal((await limited()) - before, 4, "three refusals of alice, one of bob, by scope");
  });
});

const skip = redisSkipReason();
describe("rate limits shared by two replicas on one Redis (emceepee serve, cluster on)", { timeout: 300_000, skip }, () => {
  let redis: RedisServer;
  let tmp: string;
  let upstream: Server | undefined;
  const replicas: RunningCli[] = [];
  const clients: Client[] = [];

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-rate-limits-"));
    redis = await startRedis();
    const echo = createServer(statelessEchoHandler("remote-echo", "Echo: "));
    upstream = echo;
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    const upstreamUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/mcp`;
    const started = [1, 2].map(async (i) => {
      const port = await freePort();
      const config = path.join(tmp, `r${i}.json`);
      await writeFile(
        config,
        JSON.stringify({
          mcpServers: { everything: { url: upstreamUrl } },
          gateway: {
            store: { kind: "redis", url: redis.url, keyPrefix: "rl-test:" },
            cluster: { enabled: true, replicaId: `r${i}`, advertiseUrl: `http://127.0.0.1:${port}`, secret: "${EMCEEPEE_CLUSTER_SECRET}" },
            rateLimits: [{ name: "everything-total", scope: "server", server: "everything", capacity: 3, refillPerMinute: NEVER }],
          },
        }),
      );
      return startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check", "--log-level", "info"], 60_000, {
        EMCEEPEE_CLUSTER_SECRET: "rate-limit-test-secret-0123456789",
      });
    });
    replicas.push(...(await Promise.all(started)));
    for (const r of replicas) {
      const client = new Client({ name: "rl-replica", version: "1" });
      await client.connect(new StreamableHTTPClientTransport(new URL(r.url)));
      clients.push(client);
    }
  });

  after(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await Promise.allSettled(replicas.map((r) => stopChild(r.child)));
    await redis?.stop();
    upstream?.closeAllConnections();
    await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  test("calls alternating over both replicas are refused beyond the one shared capacity; each refusal logged by the replica that refused it", async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await execute(clients[i % 2]!, `m${i}`);
      outcomes.push(r.isError === true ? (textOf(r).split(":")[0] ?? "") : "ok");
    }
    assert.deepEqual(outcomes, ["ok", "ok", "ok", "EMCP_RATE_LIMITED", "EMCP_RATE_LIMITED", "EMCP_RATE_LIMITED"]);
    // The bucket is one key in Redis, under the replicas' prefix.
    const keys = await redis.client().keys("rl-test:rl:*");
    assert.equal(keys.length, 1, keys.join(", "));
    // Refusals 4 and 6 on the second replica, 5 on the first.
    assert.deepEqual(
      replicas.map((r) => logLines(r.stderr(), "rate_limited").map((l) => [l.limit, l.scope])),
      [
        [["everything-total", "server"]],
        [
          ["everything-total", "server"],
          ["everything-total", "server"],
        ],
      ],
    );
  });
});
