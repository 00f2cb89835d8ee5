/**
 * Replicas sharing one Redis (docs/adr/0013), with real processes: a
 * redis-server of the test's own, three `emceepee serve` children with
 * `gateway.cluster` on, and a small round-robin HTTP balancer (in this file)
 * in front, so an SDK client's consecutive requests land on different
 * replicas. Meta face: promotion, await_activity waking for a task that runs
 * on the owner, an elicitation answered through another replica, add_server
 * reaching every replica. Transparent face: a call with progress
 * notifications streamed back through a forwarding replica, and an SSE stream
 * resumed with Last-Event-ID through another replica; native tasks. Then one
 * replica is SIGKILLed under load: every session continues, every affected
 * call either completes or fails with a reason naming the dead replica, results acknowledged
 * before the kill are kept, and
 * native tasks on an HTTP upstream complete, re-attached by the adopter.
 * Last, Redis itself goes down and comes back.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ROOT, call, everythingStdio } from "../helpers/gateway.js";
import { allText, awaitUntil, elicitations, EventLedger, field, getTask, payloadText, promote, waitTerminal } from "../helpers/async-extra.js";
import {
  MCP_POST_HEADERS,
  freePort,
  initializeBody,
  pollFor,
  startCliServe,
  startEverythingHttp,
  stopChild,
  waitExit,
  type ChildServer,
  type RunningCli,
  logLines,
} from "../helpers/core-extra.js";
import { isTerminalTask, pollTask, startTask, taskResult, text } from "../helpers/tasks.js";
import { connectFace, type Peer } from "../helpers/transparent.js";
import { sessionHash } from "../../src/logging.js";
import { Balancer, type Backend } from "../helpers/balancer.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const SLOW = { timeout: 600_000 };
const SECRET = "replica-test-secret-0123456789";
/** Long enough that a live replica's heartbeat is not missed on a loaded machine (a takeover waits for it to run out). */
const LEASE_MS = 5_000;
const skip = redisSkipReason();

interface Replica extends Backend {
  id: string;
  port: number;
  base: string;
  served: RunningCli;
}

if (skip !== undefined) {
  test("replicas on redis", { skip }, () => undefined);
} else {
  let tmp: string;
  let redis: RedisServer;
  let remote: ChildServer;
  let replicas: Replica[] = [];
  let balancer: Balancer;
  let base: string;
  const clients: Client[] = [];
  const peers: Peer[] = [];

  async function peer(face: string): Promise<Peer> {
    const p = await connectFace(`${base}${face}`);
    peers.push(p);
    return p;
  }

  async function startReplica(i: number): Promise<Replica> {
    const port = await freePort();
    const id = `r${i}`;
    const config = path.join(tmp, `${id}.json`);
    await writeFile(
      config,
      JSON.stringify({
        mcpServers: { everything: everythingStdio(), shared: { ...everythingStdio(), sharing: "shared" }, remote: { url: remote.url } },
        gateway: {
          // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway (issue 21).
          upstream: { warmPool: 0 },
          store: { kind: "redis", url: redis.url },
          cluster: { enabled: true, replicaId: id, advertiseUrl: `http://127.0.0.1:${port}`, secret: "${EMCEEPEE_CLUSTER_SECRET}", leaseMs: LEASE_MS },
          servers: { allowRuntimeStdio: true },
        },
      }),
    );
    const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check", "--log-level", "info"], 60_000, {
      EMCEEPEE_CLUSTER_SECRET: SECRET,
    });
    return { id, port, base: `http://127.0.0.1:${port}`, served };
  }

  async function connect(face = "/mcp", capabilities = {}): Promise<Client> {
    const client = new Client({ name: "replica-test", version: "1.0.0" }, { capabilities });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}${face}`)));
    clients.push(client);
    return client;
  }

  function sessionOf(client: Client): string {
    return (client.transport as StreamableHTTPClientTransport).sessionId!;
  }

  /** Replicas that served requests of `session`. */
  function servedBy(session: string): Set<string> {
    return new Set(balancer.hits.filter((h) => h.session === session).map((h) => h.replica));
  }

  /** Log lines `msg` of a replica (JSON lines on stderr). */
  function replicaLog(r: Replica, msg: string): Array<Record<string, any>> {
    return logLines(r.served.stderr(), msg);
  }

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-replicas-"));
    redis = await startRedis();
    remote = await startEverythingHttp();
    replicas = await Promise.all([1, 2, 3].map((i) => startReplica(i)));
    balancer = new Balancer(() => replicas.filter((r) => r.served.child.exitCode === null && r.served.child.signalCode === null));
    base = await balancer.start();
  });

  after(async () => {
    await Promise.allSettled([...clients, ...peers.map((p) => p.client)].map((c) => c.close()));
    await balancer?.close();
    await Promise.allSettled(replicas.map((r) => stopChild(r.served.child)));
    await redis?.stop();
    await remote?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  describe("replicas behind a round-robin balancer", () => {
    test("meta face: promotion, await_activity and an elicitation answer, with consecutive requests on different replicas", SLOW, async () => {
      const c = await connect();
      const session = sessionOf(c);
      const ledger = new EventLedger();
      const long = await promote(c, "everything", "trigger-long-running-operation", { duration: 2, steps: 4 }, 200, {}, ledger);
      await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "task_completed" && e.data.taskId === long.taskId), 60_000);
      assert.equal((await getTask(c, long.taskId)).task.status, "completed");
      assert.match(
        payloadText(await call(c, "get_task_result", { task_id: long.taskId })),
        /Long running operation completed\. Duration: 2 seconds, Steps: 4\./,
      );

      const asked = await promote(c, "everything", "trigger-elicitation-request", {}, 1_000);
      const [pending] = await elicitations(c, "everything");
      assert.ok(pending, "the elicitation is pending");
      const answer = await call(c, "respond_to_elicitation", {
        request_id: pending.requestId,
        action: "accept",
        content: { name: "Ada Lovelace", check: true, integer: 7 },
      });
      assert.equal(field(answer, "success"), true, allText(answer));
      assert.equal((await waitTerminal(c, asked.taskId)).status, "completed");
      assert.match(payloadText(await call(c, "get_task_result", { task_id: asked.taskId })), /- Name: Ada Lovelace/);

      const replicasSeen = servedBy(session);
      assert.equal(replicasSeen.size, 3, `the session's requests reached every replica: ${[...replicasSeen].join(", ")}`);
      const owners = replicas.filter((r) => replicaLog(r, "session_created").length > 0);
      assert.ok(owners.length >= 1, "the session was created on one replica");
      assert.deepEqual(
        replicas.flatMap((r) => replicaLog(r, "session_resumed")),
        [],
        "no replica resumed the session: every request reached its owner",
      );
    });

    test("add_server on one replica reaches the sessions of every replica", SLOW, async () => {
      const adder = await connect();
      const others = await Promise.all([connect(), connect()]);
      const r = await call(adder, "add_server", { name: "extra", command: process.execPath, args: everythingStdio().args });
      assert.notEqual(r.isError, true, allText(r));
      for (const [i, c] of others.entries()) {
        const echo = await pollFor(
          async () => {
            const res = await call(c, "execute_tool", { server: "extra", tool: "echo", args: { message: `hi ${i}` } });
            return res.isError ? undefined : res;
          },
          "the added server on another session",
          20_000,
          200,
        );
        assert.match(payloadText(echo), new RegExp(`Echo: hi ${i}`));
      }
      assert.ok(
        replicas.some((rep) => replicaLog(rep, "cluster_server_applied").length > 0),
        "another replica applied the change from pub/sub",
      );
      const removed = await call(adder, "remove_server", { name: "extra" });
      assert.notEqual(removed.isError, true, allText(removed));
      await pollFor(
        async () => {
          const res = await call(others[0], "execute_tool", { server: "extra", tool: "echo", args: { message: "gone?" } });
          return res.isError ? true : undefined;
        },
        "the removed server to be gone on another replica",
        20_000,
        200,
      );
    });

    test("transparent face: a call's progress notifications stream back through a forwarding replica", SLOW, async () => {
      const c = await connect("/all/mcp");
      const progress: number[] = [];
      const result = (await c.callTool({ name: "everything__trigger-long-running-operation", arguments: { duration: 2, steps: 4 } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
        timeout: 60_000,
      })) as CallToolResult;
      assert.match(payloadText(result), /Long running operation completed\. Duration: 2 seconds, Steps: 4\./);
      assert.deepEqual(progress, [1, 2, 3, 4]);
      assert.ok(servedBy(sessionOf(c)).size >= 2, "the session's requests went through several replicas");
    });

    test("transparent face: native tasks (task-augmented call, tasks/get, tasks/result) through different replicas", SLOW, async () => {
      const p = await peer("/servers/everything/mcp");
      const task = await startTask(p.client, "get-sum", { a: 20, b: 22 });
      await pollTask(p.client, task.taskId, isTerminalTask, "completed");
      assert.deepEqual((await taskResult(p.client, task.taskId)).content, [{ type: "text", text: "The sum of 20 and 22 is 42." }]);
      assert.ok(servedBy(p.sessionId).size >= 2, "the task's requests went through several replicas");
    });

    test("Last-Event-ID: a dropped SSE response is resumed through another replica", SLOW, async () => {
      const url = `${base}/all/mcp`;
      const init = await fetch(url, { method: "POST", headers: MCP_POST_HEADERS, body: initializeBody() });
      const session = init.headers.get("mcp-session-id")!;
      await init.text();
      const headers = { ...MCP_POST_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" };
      await (await fetch(url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
      const abort = new AbortController();
      const first = await fetch(url, {
        method: "POST",
        headers,
        signal: abort.signal,
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 7,
          method: "tools/call",
          params: { name: "everything__trigger-long-running-operation", arguments: { duration: 2, steps: 4 }, _meta: { progressToken: "p7" } },
        }),
      });
      assert.equal(first.headers.get("content-type"), "text/event-stream");
      const reader = first.body!.getReader();
      let seen = "";
      let lastId: string | undefined;
      while (lastId === undefined) {
        const { value, done } = await reader.read();
        assert.ok(!done, `the stream ended before an event id: ${seen}`);
        seen += new TextDecoder().decode(value);
        lastId = /^id: ?(\S+)$/m.exec(seen)?.[1];
      }
      abort.abort();
      await reader.cancel().catch(() => undefined);
      // 409 while the owner has not yet seen the dropped stream close (the SDK allows one connection per stream): try again, as the SDK client does.
      const resumed = await pollFor(
        async () => {
          const r = await fetch(url, { method: "GET", headers: { ...headers, accept: "text/event-stream", "last-event-id": lastId } });
          if (r.status !== 409) return r;
          await r.text();
          return undefined;
        },
        "the stream to be resumable",
        10_000,
        100,
      );
      assert.equal(resumed.status, 200);
      const rest = resumed.body!.getReader();
      let text = "";
      while (!/"id":7/.test(text)) {
        const { value, done } = await rest.read();
        assert.ok(!done, `the resumed stream ended before the result: ${text}`);
        text += new TextDecoder().decode(value);
      }
      await rest.cancel().catch(() => undefined);
      assert.match(text, /Long running operation completed/);
      assert.doesNotMatch(text, new RegExp(`^id: ${lastId}$`, "m"), "the event before the cursor is not sent again");
      assert.ok(servedBy(session).size >= 2, "the resumption went through another replica than the dropped stream");
    });

    test("SIGKILL one replica under load: sessions continue, affected calls complete or fail with a reason", SLOW, async () => {
      const victim = replicas[0]!;
      const onVictim = (id: string) => replicaLog(victim, "session_created").some((l) => l.sessionHash === sessionHash(id));
      // Sessions on every replica, at least two of them on the one to be killed (the balancer decides where each starts).
      const sessions: Client[] = [];
      // A connect is three requests (initialize, initialized, the GET stream): a probe between connects moves the rotation on.
      const shift = async () => void (await (await fetch(`${base}/healthz`)).text());
      while (sessions.length < 6 || sessions.filter((c) => onVictim(sessionOf(c))).length < 2) {
        sessions.push(await connect());
        await shift();
      }
      // The calls go to "shared": one stdio process per replica for all these sessions, not one per session (and again
      // per adopted session); the case is the replicas' sessions and tasks, not their upstream processes (docs/adr/0060 §2).
      // Native tasks on the HTTP upstream (they run upstream, not on a replica), one of them in a session of the victim.
      const remotePeers: Peer[] = [];
      while (remotePeers.length < 3 || !remotePeers.some((p) => onVictim(p.sessionId))) {
        remotePeers.push(await peer("/servers/remote/mcp"));
        await shift();
      }
      const research = await Promise.all(remotePeers.map((p) => startTask(p.client, "simulate-research-query", { topic: "replicas" })));
      // Each session starts a call that outlives the kill (promoted to a task) on its owner.
      // And a result acknowledged before the kill (the task reported completed), in every session.
      const done = await Promise.all(sessions.map((c) => promote(c, "shared", "trigger-long-running-operation", { duration: 1, steps: 1 }, 100)));
      for (const [i, c] of sessions.entries()) assert.equal((await waitTerminal(c, done[i]!.taskId, 30_000)).status, "completed");
      const tasks = await Promise.all(sessions.map((c) => promote(c, "shared", "trigger-long-running-operation", { duration: 4, steps: 4 }, 200)));
      const victimSessions = new Set(replicaLog(victim, "session_created").map((l) => l.sessionHash as string));
      // Load: echo calls from every session while the replica dies.
      let stop = false;
      const outcomes: Array<{ ok: boolean; reason?: string }> = [];
      const load = sessions.map(async (c, i) => {
        for (let n = 0; !stop; n++) {
          try {
            // A call cut by the kill on a direct connection to the dead replica (the balancer cannot answer for it) ends by its timeout.
            const r = (await c.callTool({ name: "execute_tool", arguments: { server: "shared", tool: "echo", args: { message: `s${i}-${n}` } } }, undefined, {
              timeout: 15_000,
            })) as CallToolResult;
            outcomes.push(r.isError ? { ok: false, reason: allText(r) } : { ok: true });
          } catch (err) {
            outcomes.push({ ok: false, reason: String(err) });
          }
        }
      });
      await pollFor(async () => (outcomes.length >= sessions.length ? true : undefined), "the load running (calls answered)", 60_000);
      victim.served.child.kill("SIGKILL");
      await waitExit(victim.served.child);
      // The load goes on until the victim's lease ran out and another replica took over one of its sessions.
      await pollFor(
        async () => (replicas.some((r) => r !== victim && replicaLog(r, "cluster_session_adopted").length > 0) ? true : undefined),
        "a session of the killed replica adopted by another",
        90_000,
      );
      stop = true;
      await Promise.all(load);
      assert.ok(outcomes.length > 0);
      for (const o of outcomes.filter((x) => !x.ok)) assert.ok(o.reason && o.reason.length > 10, `a failed call says why: ${JSON.stringify(o)}`);

      // Every session goes on: a new call succeeds, and each task ended one way or the other, with a reason when failed.
      let failedWithReason = 0;
      for (const [i, c] of sessions.entries()) {
        const r = await call(c, "execute_tool", { server: "shared", tool: "echo", args: { message: `after-${i}` } }).catch((err: unknown) => {
          const logs = replicas.map(
            (rep) =>
              `${rep.id}:\n${rep.served
                .stderr()
                .split("\n")
                .filter((l) => /resum|adopt|cluster|expired|session_/.test(l))
                .slice(-30)
                .join("\n")}`,
          );
          throw new Error(`session ${i} (${sessionOf(c)}) failed after the kill: ${String(err)}\n${logs.join("\n")}`);
        });
        assert.notEqual(r.isError, true, `session ${i} continues after the kill: ${allText(r)}`);
        assert.equal(
          payloadText(await call(c, "get_task_result", { task_id: done[i]!.taskId })),
          "Long running operation completed. Duration: 1 seconds, Steps: 1.",
          `session ${i}: a result acknowledged before the kill is kept`,
        );
        const task = await waitTerminal(c, tasks[i]!.taskId, 30_000);
        if (task.status === "failed") {
          failedWithReason++;
          const result = await call(c, "get_task_result", { task_id: tasks[i]!.taskId });
          assert.match(allText(result), /replica r1\.\w+ stopped while this call ran; its result is unknown/);
        } else assert.equal(task.status, "completed");
      }
      // The native upstream tasks go on, the dead replica's ones re-attached by the replica that adopted their session.
      for (const [i, p] of remotePeers.entries()) {
        const statuses = await pollTask(p.client, research[i]!.taskId, isTerminalTask, "completed", 60_000);
        assert.equal(statuses.at(-1)?.status, "completed", JSON.stringify(statuses));
        assert.match(text(await taskResult(p.client, research[i]!.taskId)), /replicas/i);
      }
      assert.ok(
        remotePeers.some((p) => victimSessions.has(sessionHash(p.sessionId))),
        "one of the native tasks' sessions was held by the killed replica",
      );
      assert.ok(victimSessions.size > 0, "the killed replica owned sessions");
      assert.ok(failedWithReason > 0, "the calls that ran on the killed replica failed with the reason");
      assert.ok(
        replicas.slice(1).some((r) => replicaLog(r, "cluster_session_adopted").length > 0),
        "a surviving replica adopted the dead replica's sessions",
      );
    });

    test(
      "Redis down: every replica's /readyz says so and a new session fails fast with EMCP_STORE_UNAVAILABLE; all recover when it is back",
      SLOW,
      async () => {
        const live = replicas.filter((r) => r.served.child.exitCode === null && r.served.child.signalCode === null);
        await redis.kill();
        for (const r of live) {
          await pollFor(
            async () => {
              const res = await fetch(`${r.base}/readyz`);
              const body = (await res.json()) as { status: string };
              return res.status === 503 && body.status === "store_unavailable" ? true : undefined;
            },
            `${r.id}'s /readyz to report the store`,
            15_000,
            200,
          );
        }
        const refused = await fetch(`${base}/mcp`, { method: "POST", headers: MCP_POST_HEADERS, body: initializeBody() });
        assert.equal(refused.status, 503);
        assert.match(await refused.text(), /EMCP_STORE_UNAVAILABLE.*check that Redis is running/);
        await redis.restart();
        for (const r of live) {
          await pollFor(async () => ((await fetch(`${r.base}/readyz`)).status === 200 ? true : undefined), `${r.id} ready again`, 30_000, 200);
        }
        // The restarted test Redis keeps nothing (no persistence): new sessions work on it.
        const c = await connect();
        assert.match(payloadText(await call(c, "execute_tool", { server: "everything", tool: "echo", args: { message: "back" } })), /Echo: back/);
      },
    );
  });
}
