/**
 * A pending approval survives the gateway's death (issue 24, docs/adr/0025),
 * with real processes: `emceepee serve` on a fixed port and SQLite file,
 * server-everything over stdio. execute_tool on a tool a rule sends to
 * `approve` answers with a promoted task; the gateway is SIGKILLed and
 * started again; the task is still input_required "Awaiting approval" in the
 * same (resumed) session, the approval is approved on the console of the new
 * process, and get_task_result returns the tool's real result. The same with
 * two replicas on one Redis: the session's replica is SIGKILLed, the other
 * adopts the session and runs the approved call.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ROOT, block, call, everythingStdio } from "../helpers/gateway.js";
import { firstText, freePort, pollFor, startCliServe, stopChild, waitExit, type RunningCli } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";
import { connectFace, type Peer } from "../helpers/transparent.js";

let tmp: string;
const running = new Set<RunningCli>();
const closeLater: Array<() => Promise<unknown>> = [];

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-approvals-restart-"));
});

after(async () => {
  await Promise.allSettled(closeLater.map((close) => close()));
  await Promise.allSettled([...running].map((r) => stopChild(r.child)));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const NO_STREAM_RECONNECT = { initialReconnectionDelay: 1_000, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1, maxRetries: 0 };

test("SIGKILL with an approval pending: after the restart it is still pending, and approving it runs the call", { timeout: 300_000 }, async () => {
  const config = path.join(tmp, "gw.json");
  await writeFile(
    config,
    JSON.stringify({
      mcpServers: { local: everythingStdio() },
      // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway (issue 21).
      gateway: {
        upstream: { warmPool: 0 },
        governance: { profile: "enforce", rules: [{ id: "echo-needs-approval", server: "local", tool: "echo", action: "approve" }] },
      },
    }),
  );
  const port = await freePort();
  const db = path.join(tmp, "state.db");
  const serve = async () => {
    const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--store", `sqlite:${db}`, "--no-upstream-check"]);
    running.add(served);
    return served;
  };
  const base = `http://127.0.0.1:${port}`;
  const gw = await serve();
  const meta = await connectFace(`${base}/mcp`, { capabilities: {}, http: { reconnectionOptions: NO_STREAM_RECONNECT } });
  closeLater.push(() => meta.client.close());
  const res = await call(meta.client, "execute_tool", { server: "local", tool: "echo", args: { message: "survives a SIGKILL" } });
  const taskId = block<string>(res, "task_id")!;
  const approvalId = block<{ id: string }>(res, "approval")!.id;
  assert.ok(taskId && approvalId, JSON.stringify(res));

  gw.child.kill("SIGKILL");
  await waitExit(gw.child, 60_000);
  running.delete(gw);
  const gw2 = await serve();

  // The same session, through a new client (the SDK skips initialize when its transport has a session id).
  const meta2: Peer = await connectFace(`${base}/mcp`, { capabilities: {}, http: { sessionId: meta.sessionId } });
  closeLater.push(() => meta2.client.close());
  (meta2.transport as StreamableHTTPClientTransport).setProtocolVersion((meta.transport as StreamableHTTPClientTransport).protocolVersion!);
  const view = block<Record<string, unknown>>(await call(meta2.client, "get_task", { task_id: taskId }), "task")!;
  assert.equal(view.status, "input_required", `still waiting for the approval after the restart: ${JSON.stringify(view)}\n${gw2.stderr().slice(-2000)}`);

  const page = await (await fetch(`${base}/console/approvals`)).text();
  assert.match(page, new RegExp(`ap-${approvalId}`), "the new process's console shows the pending approval");
  const post = await fetch(`${base}/console/approvals/${approvalId}`, {
    method: "POST",
    headers: { origin: base, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ action: "approve", reason: "after the restart" }).toString(),
    redirect: "manual",
  });
  assert.equal(post.status, 303, await post.text());
  const result = await call(meta2.client, "get_task_result", { task_id: taskId, timeout_ms: 60_000 });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.match(firstText(result), /survives a SIGKILL/);
});

describe("a pending approval survives the death of the replica that held the session (two replicas, one Redis)", { skip: redisSkipReason() }, () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis?.stop());

  async function replica(id: string): Promise<{ served: RunningCli; base: string }> {
    const port = await freePort();
    const config = path.join(tmp, `${id}.json`);
    await writeFile(
      config,
      JSON.stringify({
        mcpServers: { local: everythingStdio() },
        gateway: {
          store: { kind: "redis", url: redis.url },
          cluster: { enabled: true, replicaId: id, advertiseUrl: `http://127.0.0.1:${port}`, secret: "${EMCEEPEE_CLUSTER_SECRET}", leaseMs: 3_000 },
          upstream: { warmPool: 0 },
          governance: { profile: "enforce", rules: [{ id: "echo-needs-approval", server: "local", tool: "echo", action: "approve" }] },
        },
      }),
    );
    const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check"], 60_000, {
      EMCEEPEE_CLUSTER_SECRET: "approvals-replica-secret-0123456789",
    });
    running.add(served);
    return { served, base: `http://127.0.0.1:${port}` };
  }

  test("SIGKILL of the session's replica: the other adopts it, its console approves, the call runs there", { timeout: 300_000 }, async () => {
    const [a, b] = await Promise.all([replica("ra"), replica("rb")]);
    const meta = await connectFace(`${a.base}/mcp`, { capabilities: {}, http: { reconnectionOptions: NO_STREAM_RECONNECT } });
    closeLater.push(() => meta.client.close());
    const res = await call(meta.client, "execute_tool", { server: "local", tool: "echo", args: { message: "outlives its replica" } });
    const taskId = block<string>(res, "task_id")!;
    const approvalId = block<{ id: string }>(res, "approval")!.id;
    assert.ok(taskId && approvalId, JSON.stringify(res));

    a.served.child.kill("SIGKILL");
    await waitExit(a.served.child, 60_000);
    running.delete(a.served);

    // The same session through replica B, once B has adopted it (after the dead replica's lease).
    const meta2: Peer = await connectFace(`${b.base}/mcp`, { capabilities: {}, http: { sessionId: meta.sessionId } });
    closeLater.push(() => meta2.client.close());
    (meta2.transport as StreamableHTTPClientTransport).setProtocolVersion((meta.transport as StreamableHTTPClientTransport).protocolVersion!);
    const view = await pollFor(
      async () => {
        try {
          return block<Record<string, unknown>>(await call(meta2.client, "get_task", { task_id: taskId }), "task");
        } catch {
          return undefined;
        }
      },
      "the session to continue on replica B",
      60_000,
      500,
    );
    assert.equal(view.status, "input_required", `still waiting for the approval on B: ${JSON.stringify(view)}\n${b.served.stderr().slice(-2000)}`);
    const post = await fetch(`${b.base}/console/approvals/${approvalId}`, {
      method: "POST",
      headers: { origin: b.base, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ action: "approve", reason: "the other replica" }).toString(),
      redirect: "manual",
    });
    assert.equal(post.status, 303, await post.text());
    const result = await call(meta2.client, "get_task_result", { task_id: taskId, timeout_ms: 60_000 });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.match(firstText(result), /outlives its replica/);
  });
});
