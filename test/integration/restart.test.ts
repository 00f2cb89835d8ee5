/**
 * Sessions across gateway restarts, with real processes (ADR 0007, "Sessions
 * across restarts"): `emceepee serve --store sqlite:<tmp>` as a child on a
 * fixed port, with server-everything over stdio ("local") and over Streamable
 * HTTP ("remote": a separate child that keeps running while the gateway
 * restarts). Clients keep their Mcp-Session-Id and go on after SIGTERM and
 * after SIGKILL without a new initialize, on the meta face and on the
 * transparent faces: finished results are still there, gateway-owned calls
 * that were running are failed with the restart as reason, undelivered events
 * come once, the logging level and subscriptions hold on a restarted stdio
 * upstream, and a native upstream task on the HTTP upstream, started before
 * the restart, returns the same report as a direct call. Unknown, expired and
 * other faces' ids get 404. (Tasks, events and pending requests across
 * restarts in general: durable-state.test.ts.)
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client as SdkClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, Task } from "@modelcontextprotocol/sdk/types.js";
import { sessionHash } from "../../src/logging.js";
import { openStandaloneStream } from "../../src/mcp/resume-session.js";
import { ROOT, call, everythingStdio } from "../helpers/gateway.js";
import {
  MCP_POST_HEADERS,
  eventsOf,
  firstText,
  freePort,
  pollFor,
  rawRequest,
  startCliServe,
  startEverythingHttp,
  stopChild,
  waitExit,
  type ChildServer,
  type RunningCli,
  logLines,
} from "../helpers/core-extra.js";
import { connectFace, type Peer } from "../helpers/transparent.js";
import { isTerminalTask, LONG, pollTask, startTask, streamedResult, taskResult, text } from "../helpers/tasks.js";

const SLOW = { timeout: 300_000 };
const RESEARCH = { topic: "gateway restarts" };
/** The research tasks' TTL: what the cases test is not expiry, and at load 30-40 with the cases at once a restart took longer than 60 s. */
const RESEARCH_TTL = 600_000;

let tmp: string;
let remote: ChildServer;
const running = new Set<RunningCli>();
const closeLater: Array<() => Promise<unknown>> = [];

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-restart-test-"));
  remote = await startEverythingHttp();
});

after(async () => {
  await Promise.allSettled(closeLater.map((close) => close()));
  await Promise.allSettled([...running].map((r) => stopChild(r.child)));
  await remote?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** A gateway on a fixed port and SQLite file, so that a restart is the same address and the same state. */
class Gateway {
  served!: RunningCli;
  readonly base: string;
  /** Log lines of every run so far (the current one last). */
  private readonly logs: string[] = [];

  constructor(
    readonly port: number,
    private readonly config: string,
    private readonly db: string,
  ) {
    this.base = `http://127.0.0.1:${port}`;
  }

  async start(): Promise<void> {
    this.served = await startCliServe(ROOT, [
      "--config",
      this.config,
      "--port",
      String(this.port),
      "--store",
      `sqlite:${this.db}`,
      "--no-upstream-check",
      "--log-level",
      "info",
    ]);
    running.add(this.served);
  }

  /** Stops the gateway with `signal` (SIGTERM: a clean exit) and starts it again on the same port and file. */
  async restart(signal: "SIGTERM" | "SIGKILL"): Promise<void> {
    const old = this.served;
    old.child.kill(signal);
    const { code } = await waitExit(old.child, 60_000);
    if (signal === "SIGTERM") assert.equal(code, 0, `SIGTERM must end the gateway cleanly:\n${old.stderr().slice(-3000)}`);
    running.delete(old);
    this.logs.push(old.stderr());
    await this.start();
  }

  /** Ends the current run (SIGTERM); the next test does not pay for an idle gateway and its upstreams. */
  async stop(): Promise<void> {
    await stopChild(this.served.child);
    running.delete(this.served);
  }

  /** JSON log lines `msg` of the current run. */
  logLines(msg: string): Array<Record<string, any>> {
    return logLines(this.served.stderr(), msg);
  }
}

async function newGateway(name: string, gateway: Record<string, unknown> = {}, remoteUrl = remote.url): Promise<Gateway> {
  const config = path.join(tmp, `${name}.json`);
  // No warm pool: a spare server-everything per run that no case here uses (the pool's own tests: warm-pool.test.ts).
  await writeFile(
    config,
    JSON.stringify({ mcpServers: { local: everythingStdio(), remote: { url: remoteUrl } }, gateway: { ...gateway, upstream: { warmPool: 0 } } }),
  );
  const gw = new Gateway(await freePort(), config, path.join(tmp, `${name}.db`));
  await gw.start();
  return gw;
}

/** A client that keeps the session: the SDK skips initialize when its transport has a session id. */
async function continuePeer(url: string, previous: Peer, watch?: GetWatch): Promise<Peer> {
  const old = previous.transport as StreamableHTTPClientTransport;
  const peer = await connectFace(url, { capabilities: {}, http: { sessionId: previous.sessionId, ...(watch ? { fetch: watch.fetch } : {}) } });
  closeLater.push(() => peer.client.close());
  const transport = peer.transport as StreamableHTTPClientTransport;
  assert.equal(transport.sessionId, previous.sessionId);
  // The SDK sets the negotiated protocol version only when it initializes.
  transport.setProtocolVersion(old.protocolVersion!);
  return peer;
}

/**
 * The clients from before a restart do not reconnect their streams: what goes on is the session, through new
 * client objects (continuePeer). A stream of the old client would resume by itself with Last-Event-ID — and hold
 * the session's one GET stream the new client opens (resumption itself: sse-resume.test.ts).
 */
const NO_STREAM_RECONNECT = { initialReconnectionDelay: 1_000, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1, maxRetries: 0 };

async function newPeer(url: string, options: Parameters<typeof connectFace>[1] = {}): Promise<Peer> {
  const peer = await connectFace(url, { capabilities: {}, http: { reconnectionOptions: NO_STREAM_RECONNECT }, ...options });
  closeLater.push(() => peer.client.close());
  return peer;
}

/** A raw POST of one JSON-RPC request on a session; the status and the Mcp-Session-Id the gateway answers with. */
async function rawCall(url: string, sessionId: string, method = "tools/list") {
  const res = await rawRequest(url, {
    headers: { ...MCP_POST_HEADERS, "Mcp-Session-Id": sessionId, "Mcp-Protocol-Version": "2025-11-25" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method }),
  });
  return { status: res.status, sessionHeader: res.headers["mcp-session-id"], body: res.body };
}

/** The first JSON block with `key` of a meta-tool result. */
function field<T = any>(result: CallToolResult, key: string): T | undefined {
  for (const c of result.content) {
    if (c.type !== "text") continue;
    try {
      const parsed = JSON.parse(c.text) as Record<string, unknown>;
      if (parsed && typeof parsed === "object" && key in parsed) return parsed[key] as T;
    } catch {
      /* prose */
    }
  }
  return undefined;
}

/** The report a direct client gets from the HTTP server-everything `server` for RESEARCH (the reference). */
async function directReport(server: ChildServer): Promise<string> {
  const direct = new SdkClient({ name: "direct", version: "1.0.0" });
  await direct.connect(new StreamableHTTPClientTransport(new URL(server.url)));
  try {
    return text(await streamedResult(direct, "simulate-research-query", RESEARCH));
  } finally {
    await (direct.transport as StreamableHTTPClientTransport).terminateSession().catch(() => undefined);
    await direct.close();
  }
}

/**
 * Two at a time (issue 21: the file's wall time was the sum of its cases, 70 s on a quiet machine, the expiry case's 15 s
 * idle wait among it): the SIGTERM and SIGKILL cases one after the other (each counts the upstream sessions the shared
 * HTTP server-everything closes), beside them the lost-session case (its own server) and the expiry case (its sessions
 * on `remote` close none: an expired stored session is forgotten, not ended upstream). Each case has its own gateway,
 * port and SQLite file. All four at once, at load 36-49, connections to the gateways were reset.
 */
describe("sessions survive a gateway restart (real processes, SQLite store)", { concurrency: true }, () => {
  describe("SIGTERM, then SIGKILL", { concurrency: 1 }, () => {
    for (const signal of ["SIGTERM", "SIGKILL"] as const) {
      test(`${signal}: the same Mcp-Session-Id continues on the meta and transparent faces, without initialize`, SLOW, async () => {
        const gw = await newGateway(signal.toLowerCase());
        const reference = directReport(remote);

        // ---- before the restart ----------------------------------------------------------------
        // Meta face: a result that is ready, a call still running, an event not yet delivered.
        const meta = await newPeer(`${gw.base}/mcp`);
        const metaCall = (name: string, args: Record<string, unknown> = {}) => call(meta.client, name, args);
        assert.equal(firstText(await metaCall("execute_tool", { server: "local", tool: "echo", args: { message: "before" } })), "Echo: before");
        const runningCall = field(
          await metaCall("execute_tool", { server: "local", tool: "trigger-long-running-operation", args: { duration: 120, steps: 120 }, timeout_ms: 200 }),
          "proxy_task",
        )?.task_id as string;
        const doneCall = field(
          await metaCall("execute_tool", { server: "local", tool: "trigger-long-running-operation", args: { duration: 1, steps: 1 }, timeout_ms: 100 }),
          "proxy_task",
        )?.task_id as string;
        assert.ok(runningCall && doneCall, "both calls were promoted to tasks");
        // Completed without any meta response since: its task_completed event is undelivered at the restart.
        await pollFor(async () => gw.logLines("task_completed").find((l) => l.taskId === doneCall), "the short call's task_completed log line", 60_000);

        // Transparent face on the HTTP upstream: a native upstream task, a gateway-owned result, a gateway-owned call running.
        const remotePeer = await newPeer(`${gw.base}/servers/remote/mcp`);
        const research = await startTask(remotePeer.client, "simulate-research-query", RESEARCH, RESEARCH_TTL);
        const sum = await startTask(remotePeer.client, "get-sum", { a: 20, b: 22 });
        await pollTask(remotePeer.client, sum.taskId, isTerminalTask, "completed");
        const long = await startTask(remotePeer.client, "trigger-long-running-operation", { duration: 120, steps: 120 });

        // Transparent face on the stdio upstream: a subscription before any level (its acknowledgement, an info
        // log message, reaches the client: the path works), then level "error" and a second subscription.
        const localPeer = await newPeer(`${gw.base}/servers/local/mcp`);
        const [first, second, third] = ["restart-a", "restart-b", "restart-c"].map((n) => `demo://resource/session/${n}`);
        await localPeer.client.subscribeResource({ uri: first! });
        await localPeer.waitForLog(`Received Subscribe Resource request for URI: ${first}`);
        await localPeer.client.setLoggingLevel("error");
        await localPeer.client.subscribeResource({ uri: second! });

        const metaHash = sessionHash(meta.sessionId);
        await gw.restart(signal);

        // ---- after the restart -------------------------------------------------------------------
        // Meta face: two concurrent first requests share one resumption.
        const meta2 = await continuePeer(`${gw.base}/mcp`, meta);
        const [runningView, doneResult] = await Promise.all([
          call(meta2.client, "get_task", { task_id: runningCall }),
          call(meta2.client, "get_task_result", { task_id: doneCall }),
        ]);
        assert.equal(gw.logLines("session_resumed").filter((l) => l.sessionHash === metaHash).length, 1, "one resumption for concurrent first requests");
        const runningTask = field(runningView, "task");
        assert.equal(runningTask?.status, "failed", `a gateway-owned call running at the restart is failed: ${JSON.stringify(runningTask)}`);
        assert.match(JSON.stringify(runningTask), /restart/i, "its reason names the restart");
        assert.equal(firstText(doneResult), "Long running operation completed. Duration: 1 seconds, Steps: 1.", "a result from before the restart");
        const delivered = [...eventsOf(runningView), ...eventsOf(doneResult)].filter((e) => e.type === "task_completed" && e.data.taskId === doneCall);
        assert.equal(delivered.length, 1, "the undelivered task_completed event arrives once");
        const later = await call(meta2.client, "list_servers");
        assert.equal(eventsOf(later).filter((e) => e.type === "task_completed" && e.data.taskId === doneCall).length, 0, "and never again");
        assert.equal(firstText(await call(meta2.client, "execute_tool", { server: "local", tool: "echo", args: { message: "after" } })), "Echo: after");
        const raw = await rawCall(`${gw.base}/mcp`, meta.sessionId);
        assert.deepEqual([raw.status, raw.sessionHeader], [200, meta.sessionId], "the gateway answers on the same session id");

        // Transparent face, HTTP upstream: the native task started before the restart completes after it.
        const remote2 = await continuePeer(`${gw.base}/servers/remote/mcp`, remotePeer);
        const statuses = await pollTask(remote2.client, research.taskId, isTerminalTask, "completed", 60_000);
        assert.equal(statuses.at(-1)?.status, "completed", JSON.stringify(statuses));
        const report = text(await taskResult(remote2.client, research.taskId));
        assert.equal(report, await reference, "the upstream task's own report, as a direct call returns it");
        assert.deepEqual((await taskResult(remote2.client, sum.taskId)).content, [{ type: "text", text: "The sum of 20 and 22 is 42." }]);
        const longTask: Task = await remote2.client.experimental.tasks.getTask(long.taskId, LONG);
        assert.equal(longTask.status, "failed");
        assert.match(longTask.statusMessage ?? "", /restart/i);

        // Transparent face, stdio upstream (a new process now): level and subscriptions were set again on it.
        const watch = new GetWatch();
        const local2 = await continuePeer(`${gw.base}/servers/local/mcp`, localPeer, watch);
        await openStream(local2, watch);
        await local2.client.subscribeResource({ uri: third! });
        await local2.callTool("toggle-subscriber-updates");
        // Updates for every subscription, the ones from before the restart included (sent at once, then every 5 s).
        await local2.waitFor(() => {
          const uris = new Set(local2.notifications("notifications/resources/updated").map((p) => p.uri));
          return [first, second, third].every((u) => uris.has(u)) ? true : undefined;
        }, "resources/updated for the subscriptions from before the restart");
        // The acknowledgement of the subscription made after the restart is an info message: level "error" holds.
        assert.deepEqual(
          local2.logTexts().filter((t) => t.includes("Received Subscribe")),
          [],
          "the client's logging level from before the restart applies to the new upstream process",
        );

        // Unknown ids, and ids of another face, are 404 on every face.
        for (const url of [`${gw.base}/mcp`, `${gw.base}/servers/remote/mcp`, `${gw.base}/all/mcp`]) {
          assert.equal((await rawCall(url, randomUUID())).status, 404, `unknown id on ${url}`);
        }
        assert.equal((await rawCall(`${gw.base}/all/mcp`, meta.sessionId)).status, 404, "a meta session's id is unknown on /all/mcp");
        assert.equal((await rawCall(`${gw.base}/servers/local/mcp`, remotePeer.sessionId)).status, 404, "a session resumes only on its own face");

        // Ending a resumed session ends it for good: its id is 404 after the next restart too. (That restart is the
        // same after either signal: the SIGTERM run makes it, the SIGKILL run stops at the 404.)
        await (meta2.transport as StreamableHTTPClientTransport).terminateSession();
        assert.equal((await rawCall(`${gw.base}/mcp`, meta.sessionId)).status, 404);
        if (signal === "SIGTERM") {
          await gw.restart("SIGTERM");
          assert.equal((await rawCall(`${gw.base}/mcp`, meta.sessionId)).status, 404, "a session the client ended does not come back");
          assert.equal((await rawCall(`${gw.base}/servers/remote/mcp`, remotePeer.sessionId)).status, 200, "one it did not end does");
        }

        // A session's end ends its upstream session too (HTTP DELETE; server-everything logs it); a restart did not.
        const upstreamClosed = () => remote.output().split("Transport closed for session").length - 1;
        const closedBefore = upstreamClosed();
        const deleted = await rawRequest(`${gw.base}/servers/remote/mcp`, { method: "DELETE", headers: { "Mcp-Session-Id": remotePeer.sessionId } });
        assert.equal(deleted.status, 200);
        await pollFor(async () => (upstreamClosed() > closedBefore ? true : undefined), "the upstream session's DELETE");
        await gw.stop();
      });
    }
  });

  describe("a lost upstream session, an expired session", { concurrency: 1 }, () => {
    test("the HTTP upstream lost its session meanwhile (it restarted too): a new upstream session; the native task fails, saying why", SLOW, async () => {
      let own = await startEverythingHttp();
      closeLater.push(() => own.close());
      const gw = await newGateway("lost", {}, own.url);
      const peer = await newPeer(`${gw.base}/servers/remote/mcp`);
      const research = await startTask(peer.client, "simulate-research-query", RESEARCH, RESEARCH_TTL);
      gw.served.child.kill("SIGKILL");
      await waitExit(gw.served.child, 60_000);
      await own.close();
      own = await startEverythingHttp(90_000, own.port);
      await gw.start();
      const peer2 = await continuePeer(`${gw.base}/servers/remote/mcp`, peer);
      const task = await peer2.client.experimental.tasks.getTask(research.taskId, LONG);
      assert.equal(task.status, "failed");
      assert.match(task.statusMessage ?? "", /no longer knows its MCP session from before the gateway restarted/);
      assert.equal(text(await peer2.callTool("echo", { message: "new upstream session" })), "Echo: new upstream session");
      assert.equal(gw.logLines("upstream_session_lost").length, 1);
      await gw.stop();
    });

    test("a session idle past sessions.idleTimeoutMs while the gateway was down is not resurrected: 404", SLOW, async () => {
      // Long enough that neither session expires while the other connects on a loaded machine.
      const idleTimeoutMs = 15_000;
      const gw = await newGateway("expiry", { sessions: { idleTimeoutMs } });
      const meta = await newPeer(`${gw.base}/mcp`);
      const transparent = await newPeer(`${gw.base}/servers/remote/mcp`);
      const lastUsed = Date.now();
      gw.served.child.kill("SIGKILL");
      await waitExit(gw.served.child, 60_000);
      // The condition itself: both sessions' last activity is more than idleTimeoutMs ago.
      await new Promise((r) => setTimeout(r, Math.max(0, lastUsed + idleTimeoutMs + 500 - Date.now())));
      await gw.start();
      assert.equal((await rawCall(`${gw.base}/mcp`, meta.sessionId)).status, 404);
      assert.equal((await rawCall(`${gw.base}/servers/remote/mcp`, transparent.sessionId)).status, 404);
      // The log lines come on the child's stderr, which need not have arrived when the 404s have (another pipe).
      await pollFor(
        async () => (gw.logLines("stored_session_expired").length >= 2 ? true : undefined),
        "both stored sessions' stored_session_expired",
        60_000,
      ).catch(() => undefined);
      assert.equal(gw.logLines("stored_session_expired").length, 2, "both stored sessions were found expired and deleted");
      assert.equal(gw.logLines("session_resumed").length, 0);
      await gw.stop();
    });
  });
});

/**
 * Opens the standalone GET stream of a continued client (the SDK opens it only
 * after an initialize it skipped here) and resolves once the gateway has
 * answered it: from then on, unsolicited messages reach the client.
 */
async function openStream(peer: Peer, watch: GetWatch): Promise<void> {
  const errors: unknown[] = [];
  assert.equal(
    openStandaloneStream(peer.transport as StreamableHTTPClientTransport, (err) => errors.push(err)),
    true,
  );
  await pollFor(async () => {
    if (errors.length) throw new Error(`the standalone stream failed: ${errors.map(String).join("; ")}`);
    return watch.opened ? true : undefined;
  }, "the standalone GET stream");
}

/** A fetch for a client transport that notes when a GET stream is answered 200. */
class GetWatch {
  opened = false;
  readonly fetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const res = await fetch(url, init);
    if (init?.method === "GET" && res.ok) this.opened = true;
    return res;
  };
}
