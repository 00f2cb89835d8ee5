/**
 * Where an upstream's server→client requests go, and what the task that
 * waits on them shows (ADR 0002 §7, §8), against server-everything (its own
 * code in this process over the SDK's in-memory transport, which the gateway
 * treats as stdio: no per-request streams; and a real Streamable HTTP process),
 * the task-server fixture (in this process too) and real SDK clients:
 * - two concurrent calls on one upstream: over Streamable HTTP the first
 *   call's elicitation arrives on the first call's stream; over stdio (no way
 *   to tell) on the standalone stream; one call alone, on its stream;
 * - a gateway-owned task whose call waits for an elicitation reads
 *   input_required, and the client's tasks/result receives the request (with
 *   the task's related-task metadata) on its stream; the SDK's own
 *   callToolStream loop gets through it; the meta face shows input_required
 *   and the request in pending_client_action;
 * - the meta face's get_task_result honours timeout_ms for upstream tasks;
 * - a lazy tasks/get poll is bounded by upstream.taskPollTimeoutMs;
 * - emulated calls stay alive: progress under a client's token (a client
 *   with a short timeout and resetTimeoutOnProgress succeeds), SSE comments
 *   without one;
 * - closing a session waits for the upstream cancel of an emulated call.
 * Streams are told apart at the wire (the client's fetch logs every SSE
 * stream it reads, test/helpers/transparent.ts).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { CallToolResultSchema, RELATED_TASK_META_KEY, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { allText, errorCodeOf, field, pendingAction } from "../helpers/async-extra.js";
import { MCP_POST_HEADERS, jsonRpcMessages, rawRequest, startEverythingHttp, type ChildServer } from "../helpers/core-extra.js";
import { call, connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, inProcessTransportFactory, startInProcessGateway } from "../helpers/in-process.js";
import { LONG, getTask, pollTask, sessionOf, startTask, streamedResult, taskResult, text, waitFor } from "../helpers/tasks.js";
import { DroppingFetch, FULL_CAPABILITIES, connectFace, type Peer, type SseStreamLog, type WireMessage } from "../helpers/transparent.js";

const ELICIT = "trigger-elicitation-request";
const ACCEPT = { action: "accept" as const, content: { name: "Ada Lovelace" } };

let web: ChildServer;
let gw: TestGateway;
let base: string;
const closing: Array<{ close(): Promise<void> }> = [];

before(async () => {
  web = await startEverythingHttp();
  gw = await startInProcessGateway({
    mcpServers: {
      everything: inProcess("everything"),
      web: { url: web.url },
      tasks: inProcess("task-server"),
    },
    // taskPollTimeoutMs bounds every tasks/get to an upstream: long enough for a loaded machine's answers. No warm pool:
    // a spare task-server connection that no test takes (the pool's own tests: warm-pool.test.ts).
    gateway: { http: { sseKeepAliveMs: 200 }, tasks: { progressKeepAliveMs: 300 }, upstream: { taskPollTimeoutMs: 5_000, warmPool: 0 } },
  });
  base = gw.url.replace(/\/mcp$/, "");
});

after(async () => {
  for (const c of closing.splice(0)) await c.close().catch(() => undefined);
  await gw?.close();
  await web?.close();
});

/** A transparent-face client whose fetch logs every SSE stream it reads. */
async function peerOn(server: string, options: { elicit?: () => typeof ACCEPT | { action: "decline" } } = {}): Promise<{ peer: Peer; net: DroppingFetch }> {
  const net = new DroppingFetch();
  const peer = await connectFace(`${base}/servers/${server}/mcp`, {
    name: "routing-test",
    capabilities: FULL_CAPABILITIES,
    elicit: options.elicit ?? (() => ({ action: "decline" })),
    http: { fetch: net.fetch },
  });
  closing.push(peer);
  return { peer, net };
}

const isElicitation = (m: WireMessage) => m.method === "elicitation/create";

/** The stream that carried the (first) elicitation/create. */
function elicitationStream(net: DroppingFetch): SseStreamLog {
  const stream = net.streamOf(isElicitation);
  assert.ok(stream, `no stream carried an elicitation/create: ${JSON.stringify(net.streams.map((s) => s.kind))}`);
  return stream;
}

/** The result a stream carried (its request's response), if any. */
function responseOn(stream: SseStreamLog): WireMessage | undefined {
  return stream.events.map((e) => e.message).find((m) => m.id !== undefined && ("result" in m || "error" in m));
}

/** Waits until the client has its standalone GET stream open (the SDK opens it after initialized). */
async function standaloneOpen(net: DroppingFetch): Promise<void> {
  await waitFor(() => (net.streams.some((s) => s.kind === "get") ? true : undefined), "the client's standalone GET stream");
}

/**
 * Issue 21: the bounded waits on the task-server (a 20 s task and a 5 s poll bound, at once: each case has its own session
 * and task-server connection) run beside the other suites, which run one after another as before. With every case at once,
 * at load 30-49, calls to the HTTP upstream were lost ("other side closed", two sessions' calls on it at once): the
 * suites that use it stay one after another.
 */
describe("routing (two at a time)", { concurrency: true }, () => {
  describe("bounded waits on upstream tasks", () => {
    test("meta get_task_result honours timeout_ms for an upstream task: still working, not failed; later the result", async () => {
      // An upstream task that runs 20 s: still working after the steps below however slow the machine is.
      const { peer } = await peerOn("tasks");
      const task = await startTask(peer.client, "slow-task", { ms: 20_000 });
      const meta = await connectClient(`${base}/mcp?session=${encodeURIComponent(peer.sessionId)}`, { name: "routing-attached" });
      closing.push({ close: () => meta.close() });
      const early = await call(meta, "get_task_result", { task_id: task.taskId, timeout_ms: 200 });
      assert.equal(early.isError, true, allText(early));
      assert.equal(errorCodeOf(early), "EMCP_TASK_STILL_WORKING", allText(early));
      assert.equal((await getTask(peer.client, task.taskId)).status, "working", "a wait cut short leaves the task running");
      const result = await call(meta, "get_task_result", { task_id: task.taskId });
      assert.notEqual(result.isError, true, allText(result));
      assert.match(allText(result), /slept 20000ms/);
    });

    test("a lazy tasks/get poll the upstream never answers fails after upstream.taskPollTimeoutMs; the task goes on", async () => {
      const { peer } = await peerOn("tasks");
      const task = await startTask(peer.client, "stuck-poll-task", {});
      // The client's own timeout is far longer than the poll's bound (5 s here, the request timeout 60 s).
      const err = await peer.client.experimental.tasks.getTask(task.taskId, LONG).then(
        () => assert.fail("tasks/get answered although the upstream never does"),
        (e: unknown) => e as { code?: number; message: string },
      );
      assert.match(err.message, /could not ask upstream 'tasks' about task .*retry tasks\/get/);
      assert.equal((await sessionOf(gw, peer).tasks.get(task.taskId)).status, "working", "a poll that timed out does not fail the task (design TK-11)");
    });
  });

  describe("the other cases, one after another", { concurrency: 1 }, () => {
    describe("which stream carries an upstream's elicitation", () => {
      test("Streamable HTTP upstream, two calls in flight: the first call's elicitation arrives on the first call's stream", async () => {
        const { peer, net } = await peerOn("web");
        // Both calls are sent at once; the elicitation comes back after a round trip to the upstream,
        // when both are in flight (the old routing picked the latest, i.e. the second).
        const [first, second] = await Promise.all([peer.callTool(ELICIT), peer.callTool("trigger-long-running-operation", { duration: 2, steps: 2 })]);
        assert.match(text(first), /declined/);
        assert.match(text(second), /Long running operation completed/);
        const stream = elicitationStream(net);
        assert.equal(stream.kind, "post");
        assert.deepEqual(responseOn(stream)?.result?.content, first.content, "the stream that carried the elicitation is the first call's");
      });

      test("stdio upstream, two calls in flight: nobody can tell whose it is, so it goes on the standalone stream", async () => {
        const { peer, net } = await peerOn("everything");
        await standaloneOpen(net);
        // The 10 s call is in flight upstream before the elicitation's call is sent (an in-process upstream answers at
        // once: sent together, the elicitation could come back before the other call left), and still is when it comes.
        const conn = await sessionOf(gw, peer).connection("everything");
        const sent = conn.requestCount;
        const long = peer.callTool("trigger-long-running-operation", { duration: 10, steps: 10 });
        await waitFor(() => (conn.idleSince(sent) ? undefined : true), "the long call in flight upstream");
        const first = await peer.callTool(ELICIT);
        assert.match(text(first), /declined/);
        assert.equal(elicitationStream(net).kind, "get");
        assert.match(text(await long), /Long running operation completed/);
      });

      test("stdio upstream, one call in flight: the elicitation is that call's and rides its stream", async () => {
        const { peer, net } = await peerOn("everything");
        await standaloneOpen(net);
        const result = await peer.callTool(ELICIT);
        const stream = elicitationStream(net);
        assert.equal(stream.kind, "post");
        assert.deepEqual(responseOn(stream)?.result?.content, result.content);
      });
    });

    describe("a gateway-owned task waiting for an elicitation (ADR 0002 §8)", () => {
      for (const server of ["everything", "web"]) {
        test(`${server}: input_required; tasks/result receives the request on its stream, naming the task; the answer completes the task`, async () => {
          const { peer, net } = await peerOn(server, { elicit: () => ACCEPT });
          const task = await startTask(peer.client, ELICIT, {});
          const seen = await pollTask(peer.client, task.taskId, (t) => t.status === "input_required", "input_required");
          assert.ok(
            seen.every((t) => t.status === "working" || t.status === "input_required"),
            JSON.stringify(seen.map((t) => t.status)),
          );
          assert.equal(peer.elicitations.length, 0, "the request waits for tasks/result (spec: the requestor calls tasks/result on input_required)");
          assert.ok(
            peer.notifications("notifications/tasks/status").some((n) => n.taskId === task.taskId && n.status === "input_required"),
            "the client heard of input_required",
          );

          const result = await taskResult(peer.client, task.taskId);
          assert.match(text(result), /User provided the requested information/);
          assert.match(text(result), /Ada Lovelace/);
          assert.equal(peer.elicitations.length, 1);
          assert.deepEqual(peer.elicitations[0]?._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId }, "the request names the gateway's task");
          const stream = elicitationStream(net);
          assert.equal(stream.kind, "post");
          assert.deepEqual(responseOn(stream)?.result?._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId }, "it rode the tasks/result stream");
          assert.equal((await getTask(peer.client, task.taskId)).status, "completed");
        });
      }

      test("the SDK's own task loop (callToolStream: tasks/get until input_required, then tasks/result) gets through", async () => {
        const { peer } = await peerOn("everything", { elicit: () => ACCEPT });
        const result = await streamedResult(peer.client, ELICIT, {});
        assert.match(text(result), /Ada Lovelace/);
      });

      test("meta face: get_task and list_tasks show input_required, the request is in pending_client_action; answered, the task completes", async () => {
        const client = await connectClient(`${base}/mcp`, { name: "routing-meta" });
        closing.push({ close: () => client.close() });
        // Long enough for the upstream's elicitation to arrive before the promotion on a loaded machine (it never answers by itself).
        const promoted = await call(client, "execute_tool", { server: "everything", tool: ELICIT, timeout_ms: 10_000 });
        const task = field<{ task_id: string; status: string }>(promoted, "proxy_task");
        assert.ok(task, allText(promoted));
        // The elicitation was sent at once: by the promotion the call already waits for it.
        assert.equal(task.status, "input_required", allText(promoted));
        const viewed = await call(client, "get_task", { task_id: task.task_id });
        assert.equal(field<{ status: string }>(viewed, "task")?.status, "input_required");
        const pending = pendingAction(viewed)?.elicitations ?? [];
        assert.equal(pending.length, 1, allText(viewed));
        const listed = (status: string) =>
          call(client, "list_tasks", { status }).then((r) => (field<Array<{ task_id: string }>>(r, "tasks") ?? []).map((t) => t.task_id));
        assert.deepEqual(await listed("input_required"), [task.task_id]);
        assert.deepEqual(await listed("working"), [], "a task waiting for input is not listed as working");
        const elicitation = field<Array<{ requestId: string; _meta?: Record<string, unknown> }>>(await call(client, "get_elicitations"), "elicitations")?.[0];
        assert.equal(elicitation?.requestId, pending[0]!.requestId);

        const answer = await call(client, "respond_to_elicitation", { request_id: pending[0]!.requestId, ...ACCEPT });
        assert.notEqual(answer.isError, true, allText(answer));
        const result = await call(client, "get_task_result", { task_id: task.task_id, timeout_ms: 30_000 });
        assert.match(allText(result), /Ada Lovelace/);
        const done = await call(client, "get_task", { task_id: task.task_id });
        assert.equal(field<{ status: string }>(done, "task")?.status, "completed");
      });
    });

    describe("emulated calls stay alive (a plain call of a task-only tool)", () => {
      test("with a progress token: a client with a 3 s timeout and resetTimeoutOnProgress gets the 4 s call's result", async () => {
        const { peer } = await peerOn("everything");
        let progress = 0;
        const result = (await peer.client.callTool({ name: "simulate-research-query", arguments: { topic: "keepalive" } }, CallToolResultSchema, {
          // Shorter than the call (4 stages of 1 s upstream), ten keep-alive intervals (300 ms) long: a loaded machine's pauses fit.
          timeout: 3_000,
          resetTimeoutOnProgress: true,
          onprogress: () => progress++,
        })) as CallToolResult;
        assert.match(text(result), /Research Report: keepalive/);
        assert.ok(progress >= 3, `progress keep-alives arrived (${progress})`);
      });

      test("without a token: the request's SSE stream carries keep-alive comments while the call runs", async () => {
        const url = `${base}/servers/everything/mcp`;
        const init = await rawRequest(url, {
          headers: { ...MCP_POST_HEADERS },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "initialize",
            params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
          }),
        });
        const session = String(init.headers["mcp-session-id"]);
        closing.push({ close: () => rawRequest(url, { method: "DELETE", headers: { "mcp-session-id": session } }).then(() => undefined) });
        const headers = { ...MCP_POST_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" };
        await rawRequest(url, { headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
        const res = await rawRequest(url, {
          headers,
          body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "simulate-research-query", arguments: { topic: "raw" } } }),
        });
        assert.equal(res.status, 200);
        const comments = res.body.split(/\r?\n/).filter((line) => line.startsWith(":"));
        assert.ok(comments.length >= 2, `keep-alive comments on the stream: ${JSON.stringify(res.body.slice(0, 400))}`);
        const answer = jsonRpcMessages(res).find((m) => m.id === 2);
        assert.match(JSON.stringify(answer?.result), /Research Report: raw/);
      });
    });

    describe("closing a session", () => {
      test("waits for the upstream tasks/cancel of an emulated meta-face call before the connection closes", async () => {
        const log: string[] = [];
        let cancelId: unknown;
        let resultAwaited = false;
        const inProcessFactory = inProcessTransportFactory();
        const recording: TransportFactory = (name, config, options) => {
          const created = inProcessFactory(name, config, options);
          const { transport } = created;
          const send = transport.send.bind(transport);
          transport.send = (message, options) => {
            if ("method" in message && message.method === "tasks/result") resultAwaited = true;
            if ("method" in message && message.method === "tasks/cancel" && "id" in message) {
              cancelId = message.id;
              log.push("cancel sent");
            }
            return send(message, options);
          };
          const close = transport.close.bind(transport);
          transport.close = () => {
            // (In process, closing one end closes the pair: the gateway's own close can come a second time.)
            if (!log.includes("closed")) log.push("closed");
            return close();
          };
          // The SDK installs its onmessage on connect: record responses as they arrive through it.
          let onmessage: ((m: JSONRPCMessage) => void) | undefined;
          Object.defineProperty(transport, "onmessage", {
            configurable: true,
            get: () => onmessage,
            set: (fn: ((m: JSONRPCMessage) => void) | undefined) => {
              onmessage =
                fn &&
                ((m) => {
                  // (Handlers installed later wrap earlier ones: log each answer once.)
                  if ("id" in m && m.id === cancelId && !("method" in m) && !log.includes("cancel answered")) log.push("cancel answered");
                  fn(m);
                });
            },
          });
          return created;
        };
        const own = await startGateway({ mcpServers: { everything: inProcess("everything") } }, { transportFactory: recording });
        try {
          const client: Client = await connectClient(own.url, { name: "routing-close" });
          const call = client
            .callTool({
              name: "execute_tool",
              arguments: { server: "everything", tool: "simulate-research-query", args: { topic: "close" }, timeout_ms: 60_000 },
            })
            .catch(() => undefined);
          const session = (client.transport as StreamableHTTPClientTransport).sessionId!;
          // The upstream task exists once the emulation awaits its tasks/result.
          await waitFor(() => (resultAwaited ? true : undefined), "the emulated call's upstream tasks/result");
          assert.deepEqual(log, []);
          await own.gateway.context.sessions.destroy(session, "test");
          assert.deepEqual(log, ["cancel sent", "cancel answered", "closed"], "the connection closed only after the upstream answered the cancel");
          await call;
          await client.close().catch(() => undefined);
        } finally {
          await own.close();
        }
      });
    });
  });
});
