/**
 * An approval decided in the console of one replica completes the call held
 * on another (issue 24, docs/adr/0025, GV-14/GV-15): two real `emceepee
 * serve` processes on one real redis-server, server-everything over stdio, a
 * real Chromium on replica B's Approvals page. The agent's plain `tools/call`
 * (no task) on replica A's transparent face is held while the approval waits;
 * the approver approves it on B; A's held call answers with the tool's result.
 * (A pending approval surviving the SIGKILL of its replica: approvals-restart.test.ts.)
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { browserUnavailable, openTestPage } from "../helpers/browser.js";
import { ROOT, everythingStdio } from "../helpers/gateway.js";
import { freePort, startCliServe, stopChild, type RunningCli } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const skip = browserUnavailable() || redisSkipReason();

describe("approval across replicas in a real browser", { skip, timeout: 300_000 }, () => {
  let tmp: string;
  let redis: RedisServer;
  const running: RunningCli[] = [];

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-approvals-replicas-"));
    redis = await startRedis();
  });
  after(async () => {
    await Promise.allSettled(running.map((r) => stopChild(r.child)));
    await redis?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  async function replica(id: string): Promise<string> {
    const port = await freePort();
    const config = path.join(tmp, `${id}.json`);
    await writeFile(
      config,
      JSON.stringify({
        mcpServers: { local: everythingStdio() },
        gateway: {
          store: { kind: "redis", url: redis.url },
          cluster: { enabled: true, replicaId: id, advertiseUrl: `http://127.0.0.1:${port}`, secret: "${EMCEEPEE_CLUSTER_SECRET}", leaseMs: 3_000 },
          // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway (issue 21).
          upstream: { warmPool: 0 },
          governance: {
            profile: "enforce",
            rules: [{ id: "echo-needs-approval", server: "local", tool: "echo", action: "approve" }],
            approvals: { pollMs: 200, holdMs: 120_000 },
          },
        },
      }),
    );
    const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check"], 60_000, {
      EMCEEPEE_CLUSTER_SECRET: "approvals-replica-secret-0123456789",
    });
    running.push(served);
    return `http://127.0.0.1:${port}`;
  }

  test("approved in replica B's console, the call held on replica A answers with the tool's result", async () => {
    const [a, b] = await Promise.all([replica("ra"), replica("rb")]);
    const agent = new Client({ name: "agent", version: "0" });
    await agent.connect(new StreamableHTTPClientTransport(new URL(`${a}/servers/local/mcp`)));
    const { tb, context, page } = await openTestPage();
    try {
      // A plain call (no task): held on A while the approval waits.
      const held = agent.callTool({ name: "echo", arguments: { message: "held on replica ra" } }, undefined, { timeout: 180_000 });
      let settled = false;
      void held.finally(() => (settled = true)).catch(() => undefined);
      const card = page.locator("[id^='ap-']", { hasText: "held on replica ra" });
      for (let i = 0; i < 120 && !(await card.count()); i++) {
        await page.goto(`${b}/console/approvals`);
        if (!(await card.count())) await page.waitForTimeout(500); // polling for a record another process writes
      }
      await card.waitFor();
      assert.equal(settled, false, "the call is still held while the approval waits");
      await card.getByLabel(/Reason/).fill("approved on the other replica");
      await card.getByRole("button", { name: "Approve" }).click();
      await page.waitForURL(/decided=/);
      const result = await held;
      assert.notEqual(result.isError, true, JSON.stringify(result));
      assert.match(JSON.stringify(result.content), /held on replica ra/);
    } finally {
      await agent.close().catch(() => undefined);
      await context.close();
      await tb.close();
    }
  });
});
