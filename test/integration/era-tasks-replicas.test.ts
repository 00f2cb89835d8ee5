/**
 * Tasks of both eras across a replica's death (issue 25, "Durability"; ADR
 * 0032, "Tasks across eras"): a redis-server of the test's own and
 * `emceepee serve` replicas with `gateway.cluster` on and a long lease, so
 * "at once" is told apart from "once the dead replica's heartbeat ran out".
 * (a) A 2026-07-28 client's extension tasks made on replica 1, which is then
 * SIGKILLed: on replica 2 the first tasks/get of a gateway-owned call that ran
 * there reads failed, naming the dead replica (never `working` until its TTL),
 * and a legacy HTTP upstream's own task goes on to its result. (b) A
 * 2025-11-25 client's task on a 2026-07-28 upstream's extension task (bridge
 * 4; test/fixtures/modern-tasks-server.ts, in this process) made on a replica
 * that is then SIGKILLed: the client's tasks/result on another replica gets
 * the upstream's result, its input request asked again there. (c) The meta
 * face (`/mcp`): an SDK v2 client's execute_tool promoted on one replica is
 * followed with get_task/get_task_result (and tasks/get) on another, and once
 * that replica is SIGKILLed the next get_task there reads failed at once; a
 * caller hanging up on a replica that forwarded its meta call cancels the call
 * on the holder (test/fixtures/slow-server-tools.ts counts it). (d) A task
 * request passed on to the holder that reaches it after another replica took
 * the host over (the holder was paused past its heartbeat) is answered 503
 * "send the request again", not from the paused replica's stale copy.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { startModernTasksServer, type ModernTasksServer } from "../fixtures/modern-tasks-server.js";
import { everythingStdio, slowServerStdio } from "../helpers/gateway.js";
import { startEverythingHttp, waitExit, type ChildServer, type RunningCli } from "../helpers/core-extra.js";
import { startReplicaSet, type ReplicaSet } from "../helpers/era-setups.js";
import { MODERN, TASKS_EXTENSION, modernRequest, pollModernTask } from "../helpers/modern-requests.js";
import { redisSkipReason } from "../helpers/redis.js";
import { connectFace, getTask, startTask, taskResult, text, waitFor, type Peer, type PeerOptions } from "../helpers/tasks.js";

const SECRET = "era-tasks-replicas-secret-0123456789";
/** Long, so that "at once" is told apart from "once the dead replica's heartbeat ran out" (asserted: the heartbeat is still there). */
const LEASE_MS = 120_000;
const T = { timeout: 300_000 };
const skip = redisSkipReason();

interface Replica {
  id: string;
  base: string;
  served: RunningCli;
}

if (skip !== undefined) {
  it("tasks across a replica's death", { skip }, () => undefined);
} else {
  describe("tasks of both eras across a replica's death", () => {
    let set: ReplicaSet;
    let remote: ChildServer;
    let modern: ModernTasksServer;
    const replicas = new Map<string, Replica>();
    const peers: Peer[] = [];

    async function startReplica(id: string, leaseMs = LEASE_MS): Promise<Replica> {
      const mcpServers = {
        everything: everythingStdio(),
        remote: { url: remote.url },
        tasks: { url: modern.url },
        slow: { ...slowServerStdio(), sharing: "shared" },
      };
      // No warm spare (upstream.warmPool 0): each replica's sessions start their own server-everything; a spare none took cost one per replica (issue 21).
      const replica = { id, ...(await set.start(id, { mcpServers, gateway: { upstream: { warmPool: 0 } } }, leaseMs)) };
      replicas.set(id, replica);
      return replica;
    }

    async function kill(replica: Replica): Promise<void> {
      replica.served.child.kill("SIGKILL");
      await waitExit(replica.served.child, 60_000);
    }

    /** Whether the replica's heartbeat is still in Redis (a SIGKILLed replica's stays until its lease runs out). */
    async function heartbeatLeft(id: string): Promise<boolean> {
      const client = set.redis.client();
      const [named] = await client.keys(`*replica-of:${id}`);
      const incarnation = named === undefined ? null : await client.get(named);
      return incarnation !== null && (await client.keys(`*replica:${incarnation}`)).length > 0;
    }

    before(async () => {
      set = await startReplicaSet("era-tasks-replicas", SECRET);
      [remote, modern] = await Promise.all([startEverythingHttp(), startModernTasksServer()]);
      await Promise.all(["r1", "r2"].map((id) => startReplica(id)));
    });
    after(async () => {
      for (const p of peers) await p.client.close().catch(() => undefined);
      await set?.close();
      await remote?.close();
      await modern?.close();
    });

    it("a 2026-07-28 client's tasks on a replica that dies: a call that ran there fails at once on another, an upstream task goes on", T, async () => {
      const r1 = replicas.get("r1")!;
      const r2 = replicas.get("r2")!;
      const start = async (base: string, server: string, name: string, args: Record<string, unknown>) => {
        const created = await modernRequest(`${base}/servers/${server}/mcp`, "tools/call", { name, arguments: args });
        assert.equal(created.body.result?.resultType, "task", `${name}: ${JSON.stringify(created.body)}`);
        return created.body.result.taskId as string;
      };
      const long = await start(r1.base, "everything", "trigger-long-running-operation", { duration: 120, steps: 120 });
      const research = await start(r1.base, "remote", "simulate-research-query", { topic: "replicas" });
      // Replica 2 has heard of the caller's tasks before replica 1 dies (its host is open there too).
      const seen = await modernRequest(`${r2.base}/servers/everything/mcp`, "tasks/get", { taskId: long });
      assert.equal(seen.body.result?.status, "working", JSON.stringify(seen.body));
      await kill(r1);

      const cut = await modernRequest(`${r2.base}/servers/everything/mcp`, "tasks/get", { taskId: long });
      assert.equal(cut.body.result?.status, "failed", `the first tasks/get after the death: ${JSON.stringify(cut.body)}`);
      assert.match(JSON.stringify(cut.body.result?.error), /replica r1/);
      assert.ok(await heartbeatLeft("r1"), "answered before the dead replica's heartbeat ran out");
      const report = await pollModernTask(`${r2.base}/servers/remote/mcp`, research, (t) => t.status !== "working" && t.status !== "input_required", "ended");
      assert.equal(report.status, "completed", JSON.stringify(report));
      assert.match(report.result.content[0].text as string, /Research Report: replicas/);
    });

    it("bridge 4: a 2025 client's task on a modern upstream's extension task, its replica killed, ends with the result on another", T, async () => {
      const r3 = await startReplica("r3");
      const r2 = replicas.get("r2")!;
      const asker = (name: string): PeerOptions => ({ capabilities: { elicitation: { form: {} } }, elicit: () => ({ action: "accept", content: { name } }) });
      const before = await connectFace(`${r3.base}/servers/tasks/mcp`, asker("nobody"));
      peers.push(before);
      const task = await startTask(before.client, "ask_then_answer", {});
      await waitFor(async () => ((await getTask(before.client, task.taskId)).status === "input_required" ? true : undefined), "the task waits for input");
      await kill(r3);

      const after = await connectFace(`${r2.base}/servers/tasks/mcp`, { ...asker("Bob"), http: { sessionId: before.sessionId } });
      peers.push(after);
      (after.transport as StreamableHTTPClientTransport).setProtocolVersion((before.transport as StreamableHTTPClientTransport).protocolVersion!);
      const result = await taskResult(after.client, task.taskId);
      assert.equal(text(result), "Hello, Bob!", JSON.stringify(result));
      assert.equal(after.elicitations.length, 1, "the input request is asked again on replica 2");
      assert.ok(await heartbeatLeft("r3"), "answered before the dead replica's heartbeat ran out (taken over at once)");
    });

    it("the meta face: an execute_tool promoted on a replica is followed on another, and fails there at once when that replica dies", T, async () => {
      const r4 = await startReplica("r4");
      const r2 = replicas.get("r2")!;
      type ToolResult = { content: Array<{ text: string }>; structuredContent?: Record<string, any>; isError?: boolean };
      const texts = (r: ToolResult) => r.content.map((c) => c.text).join("\n");
      const clientOf = async (base: string) => {
        const client = new ModernClient({ name: "era-meta-replicas", version: "1" }, { versionNegotiation: { mode: { pin: MODERN } } });
        await client.connect(new ModernTransport(new URL(`${base}/mcp`)));
        return client;
      };
      const on4 = await clientOf(r4.base);
      const on2 = await clientOf(r2.base);
      try {
        const call = (client: ModernClient, name: string, args: Record<string, unknown>) =>
          (client.callTool({ name, arguments: args }, { timeout: 150_000 }) as Promise<ToolResult>).catch((err: unknown) => {
            throw new Error(`${name} ${JSON.stringify(args)}: ${String(err)}`);
          });
        const promote = async (duration: number) => {
          const args = { server: "everything", tool: "trigger-long-running-operation", args: { duration, steps: duration }, timeout_ms: 50 };
          const promoted = await call(on4, "execute_tool", args);
          const taskId = promoted.structuredContent?.task_id as string;
          assert.ok(taskId, `promoted to a task: ${texts(promoted)}`);
          return taskId;
        };
        const short = await promote(3);
        const long = await promote(120);
        // Replica 2 follows the calls that run on replica 4 (the caller's meta host is held there).
        const got = await call(on2, "get_task", { task_id: long });
        assert.equal(got.structuredContent?.task?.status, "working", texts(got));
        const done = await call(on2, "get_task_result", { task_id: short, timeout_ms: 120_000 });
        assert.equal(done.isError, undefined, texts(done));
        assert.match(texts(done), /Long running operation completed/);
        const viaExtension = await modernRequest(`${r2.base}/mcp`, "tasks/get", { taskId: long }, { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
        assert.equal(viaExtension.body.result?.status, "working", JSON.stringify(viaExtension.body));
        await kill(r4);

        const cut = await call(on2, "get_task", { task_id: long });
        assert.equal(cut.structuredContent?.task?.status, "failed", `the first get_task after the death: ${texts(cut)}`);
        assert.match(texts(cut), /replica r4/);
        const result = await call(on2, "get_task_result", { task_id: long, timeout_ms: 1000 });
        assert.equal(result.isError, true, texts(result));
        assert.ok(await heartbeatLeft("r4"), "answered before the dead replica's heartbeat ran out");
      } finally {
        await Promise.allSettled([on4.close(), on2.close()]);
      }
    });

    it("the meta face: a caller hanging up on a replica that forwarded its call cancels the call on the holder", T, async () => {
      const r2 = replicas.get("r2")!;
      const PLAIN = { capabilities: { elicitation: {} } };
      const slowCalls = async (base: string): Promise<{ running: number; cancelled: number }> => {
        const answer = await modernRequest(
          `${base}/mcp`,
          "tools/call",
          { name: "execute_tool", arguments: { server: "slow", tool: "slow-calls", args: {} } },
          PLAIN,
        );
        assert.ok(answer.body.result, JSON.stringify(answer.body));
        return JSON.parse(answer.body.result.content[0].text as string) as { running: number; cancelled: number };
      };
      const before = await slowCalls(r2.base); // replica 2 holds the anonymous caller's meta host (claimed or adopted)
      const r5 = await startReplica("r5");
      const abort = new AbortController();
      const args = { server: "slow", tool: "slow", args: { ms: 600_000 }, timeout_ms: 600_000 };
      const options = { capabilities: {}, clientInfo: { name: "era-meta-replicas", version: "1" }, signal: abort.signal };
      const call = modernRequest(`${r5.base}/mcp`, "tools/call", { name: "execute_tool", arguments: args }, options).catch((err: unknown) => err);
      // Sent to replica 5, run by replica 2's slow server: the call was forwarded to the holder.
      await waitFor(async () => ((await slowCalls(r2.base)).running === before.running + 1 ? true : undefined), "the slow call runs on the holder");
      abort.abort();
      await call;
      await waitFor(async () => {
        const now = await slowCalls(r2.base);
        return now.running === before.running && now.cancelled === before.cancelled + 1 ? true : undefined;
      }, "the call is cancelled on the holder");
    });

    it("a task request passed on to a holder that lost the host on the way is answered 503 'send again', not served there", T, async () => {
      // A short heartbeat for the replica paused here; long enough that the other replica passes the request on before it runs out.
      const r6 = await startReplica("r6", 9_000);
      const r2 = replicas.get("r2")!;
      const created = await modernRequest(`${r6.base}/servers/slow/mcp`, "tools/call", { name: "slow", arguments: { ms: 600_000 } });
      assert.equal(created.body.result?.resultType, "task", JSON.stringify(created.body));
      const taskId = created.body.result.taskId as string;
      r6.served.child.kill("SIGSTOP");
      let paused = true;
      try {
        // Replica 2 passes the caller's tasks/get on to replica 6, the holder, whose heartbeat is still live: it waits there.
        let settled = false;
        const late = modernRequest(`${r2.base}/servers/slow/mcp`, "tasks/get", { taskId }).finally(() => (settled = true));
        await waitFor(async () => ((await heartbeatLeft("r6")) ? undefined : true), "the paused replica's heartbeat runs out", 60_000);
        const adopted = await modernRequest(`${r2.base}/servers/slow/mcp`, "tasks/get", { taskId });
        assert.equal(adopted.body.result?.status, "failed", `replica 2 took the host over: ${JSON.stringify(adopted.body)}`);
        assert.equal(settled, false, "the passed-on tasks/get was still waiting at the paused holder");
        r6.served.child.kill("SIGCONT");
        paused = false;
        // Bounded only so that a hang fails clearly (before the holder's check, the paused replica served it from its own copy and never answered).
        let timer: NodeJS.Timeout | undefined;
        const unanswered = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("the passed-on tasks/get was not answered within 120 s of the resume")), 120_000);
        });
        const answer = await Promise.race([late, unanswered]).finally(() => clearTimeout(timer));
        assert.equal(answer.status, 503, `the late request on the replica that lost the host: ${JSON.stringify(answer.body)}`);
        assert.match(String(answer.body.error?.message), /held by replica r2\..*send the request again/);
        const again = await modernRequest(`${r6.base}/servers/slow/mcp`, "tasks/get", { taskId });
        assert.equal(again.body.result?.status, "failed", `sent again, to either replica, it reaches the holder: ${JSON.stringify(again.body)}`);
      } finally {
        if (paused) r6.served.child.kill("SIGCONT");
      }
    });
  });
}
