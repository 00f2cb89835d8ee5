/**
 * The parts that route an upstream's server→client requests to the call they
 * belong to, without the network: CallOrigin (waiting requests make the
 * owning task input_required, also when the task comes later), the task
 * manager's input_required flag and its MCP view, the Streamable HTTP stream
 * tap's SSE parsing (chunks split anywhere, CRLF, comments, resumption), and
 * the transparent face's queue of requests waiting for a task's tasks/result.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { IdGenerator } from "../../src/clock.js";
import { DownstreamRoutes } from "../../src/faces/transparent/bridge.js";
import { SseRequestTap } from "../../src/mcp/sse-request-tap.js";
import { EventSystem } from "../../src/session/event-system.js";
import type { TaskRecord } from "../../src/store/contracts.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { toMcpTask } from "../../src/mcp/task-object.js";
import { TaskManager } from "../../src/tasks/task-manager.js";
import { CallOrigin } from "../../src/upstream/origin.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush } from "../helpers/promises.js";

function counterIds(prefix: string): IdGenerator {
  let n = 0;
  return () => `${prefix}-${String(++n).padStart(6, "0")}`;
}

async function taskManager() {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const events = new EventSystem("s1", { maxEvents: 1000, warningThreshold: 0.8, maxTotal: 10_000 }, store.events, clock, counterIds("ev"));
  const tm = new TaskManager(
    "s1",
    { defaultTtlMs: 10_000, maxTtlMs: 60_000, completedRetentionMs: 1_000, maxTasksPerSession: 10 },
    store.tasks,
    events,
    clock,
    counterIds("task"),
  );
  const changes: TaskRecord[] = [];
  tm.onStatusChange = (r) => changes.push(r);
  const task = await tm.create({ server: "srv", toolName: "t", toolArgs: {}, abort: new AbortController() });
  return { clock, tm, task, changes };
}

describe("CallOrigin", () => {
  test("a request waiting before the task exists makes it input_required when attached; the last answer makes it working", () => {
    const origin = new CallOrigin({ requestId: 7 });
    const reports: boolean[] = [];
    const first = origin.awaitClient();
    const second = origin.awaitClient();
    assert.equal(origin.waitingForClient, 2);
    origin.attachTask("task-1", (waiting) => reports.push(waiting));
    assert.equal(origin.taskId, "task-1");
    assert.deepEqual(reports, [true], "attached while requests wait: input_required at once");
    first();
    first(); // idempotent
    assert.deepEqual(reports, [true], "one request still waits");
    second();
    assert.deepEqual(reports, [true, false]);
    const third = origin.awaitClient();
    third();
    assert.deepEqual(reports, [true, false, true, false]);
  });

  test("without a task nothing is reported", () => {
    const origin = new CallOrigin();
    const done = origin.awaitClient();
    done();
    assert.equal(origin.waitingForClient, 0);
    assert.equal(origin.taskId, undefined);
  });
});

describe("TaskManager: input_required", () => {
  test("a working task flagged input_required reads so in MCP, is listed under it, and is announced; answered, it is working again", async () => {
    const { clock, tm, task, changes } = await taskManager();
    tm.setInputRequired(task.taskId, true);
    await flush();
    assert.equal(toMcpTask(await tm.get(task.taskId)).status, "input_required");
    assert.equal((await tm.get(task.taskId)).status, "working", "the record stays working: TTL, cancel and limits treat it as running");
    assert.deepEqual(
      (await tm.list({ status: "input_required" })).map((t) => t.taskId),
      [task.taskId],
    );
    assert.deepEqual(
      (await tm.list({ status: "working" })).map((t) => t.taskId),
      [task.taskId],
      "the manager's working includes tasks waiting for input",
    );
    tm.setInputRequired(task.taskId, true); // no change, no announcement
    await flush();
    assert.deepEqual(
      changes.map((r) => toMcpTask(r).status),
      ["input_required"],
    );
    tm.setInputRequired(task.taskId, false);
    await flush();
    assert.equal(toMcpTask(await tm.get(task.taskId)).status, "working");
    assert.deepEqual(await tm.list({ status: "input_required" }), []);
    assert.deepEqual(
      changes.map((r) => toMcpTask(r).status),
      ["input_required", "working"],
    );
    await tm.close();
    assert.equal(clock.pendingTimers, 0);
  });

  test("a task that ends while waiting ends as it ended (the flag goes); an ended task is never flagged", async () => {
    const { clock, tm, task } = await taskManager();
    tm.setInputRequired(task.taskId, true);
    await tm.cancel(task.taskId);
    const ended = await tm.get(task.taskId);
    assert.equal(ended.status, "cancelled");
    assert.equal(ended.inputRequired, undefined);
    assert.equal(toMcpTask(ended).status, "cancelled");
    tm.setInputRequired(task.taskId, true);
    await flush();
    assert.equal((await tm.get(task.taskId)).inputRequired, undefined);
    clock.advance(10_000); // kept at least its TTL
    assert.equal(clock.pendingTimers, 0);
  });
});

/** A Response whose SSE body arrives in exactly these chunks. */
function sseResponse(chunks: string[]): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(encoder.encode(c));
      controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
}

/** A tap over a base fetch that answers each call with the next canned response. */
function tapWith(responses: Response[]) {
  const seen: Array<{ method: string | undefined; lastEventId: string | null }> = [];
  const tap = new SseRequestTap(async (_url, init) => {
    seen.push({ method: init?.method, lastEventId: new Headers(init?.headers).get("last-event-id") });
    const next = responses.shift();
    if (!next) throw new Error("no more canned responses");
    return next;
  });
  return { tap, seen };
}

const post = (id: RequestId) => ({ method: "POST", body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "x" } }) });
const elicit = (id: RequestId) => JSON.stringify({ jsonrpc: "2.0", id, method: "elicitation/create", params: { message: "m" } });

describe("SseRequestTap", () => {
  test("a request on a POST's stream maps to the POST's request, however the bytes are split; the body reaches the reader unchanged", async () => {
    const stream = `id: e1\r\ndata: ${elicit(42)}\r\n\r\n: keepalive\n\nid: e2\ndata: {"jsonrpc":"2.0",\ndata: "method":"sampling/createMessage","id":"s-1","params":{}}\n\n`;
    // Split everywhere, including between CR and LF.
    const chunks = stream.split("");
    const { tap } = tapWith([sseResponse(chunks)]);
    const res = await tap.fetch("http://upstream/mcp", post(7));
    assert.equal(await res.text(), stream, "the SDK reads exactly what the upstream sent");
    assert.equal(tap.take(42), 7);
    assert.equal(tap.take(42), undefined, "each answer is given once");
    assert.equal(tap.take("s-1"), 7, "multi-line data is joined");
    assert.equal(tap.take(999), undefined, "never seen: unknown");
  });

  test("a resumed stream (GET with Last-Event-ID) still belongs to the POST whose stream carried that id; a plain GET is the standalone stream", async () => {
    const { tap, seen } = tapWith([
      sseResponse([`id: a-1\ndata: ${elicit(1)}\n\n`, `id: a-2\ndata: \n\n`]),
      sseResponse([`id: a-3\ndata: ${elicit(2)}\n\n`]),
      sseResponse([`id: g-1\ndata: ${elicit(3)}\n\n`]),
    ]);
    await (await tap.fetch("http://upstream/mcp", post("call-9"))).text();
    await (await tap.fetch("http://upstream/mcp", { method: "GET", headers: { "last-event-id": "a-2" } })).text();
    await (await tap.fetch("http://upstream/mcp", { method: "GET" })).text();
    assert.deepEqual(
      seen.map((s) => s.method),
      ["POST", "GET", "GET"],
    );
    assert.equal(tap.take(1), "call-9");
    assert.equal(tap.take(2), "call-9", "the resumed stream's requests are the POST's");
    assert.equal(tap.take(3), undefined, "standalone stream: unknown");
  });

  test("POSTs of notifications or of several requests, and non-SSE answers, are passed through untouched and recorded for nobody", async () => {
    const json = new Response('{"jsonrpc":"2.0","id":1,"result":{}}', { status: 200, headers: { "content-type": "application/json" } });
    const { tap } = tapWith([sseResponse([`data: ${elicit(5)}\n\n`]), json]);
    const batch = JSON.stringify([
      { jsonrpc: "2.0", id: 1, method: "a" },
      { jsonrpc: "2.0", id: 2, method: "b" },
    ]);
    await (await tap.fetch("http://upstream/mcp", { method: "POST", body: batch })).text();
    assert.equal(tap.take(5), undefined);
    const res = await tap.fetch("http://upstream/mcp", post(3));
    assert.equal(res, json, "a JSON answer is the upstream's own Response object");
  });
});

describe("DownstreamRoutes (transparent face)", () => {
  test("a request for a task waits for the task's tasks/result and goes out on its stream; later ones go at once", async () => {
    const routes = new DownstreamRoutes();
    const sentOn: RequestId[] = [];
    const send = (id: RequestId) => {
      sentOn.push(id);
      return Promise.resolve(`answered on ${String(id)}`);
    };
    const signal = new AbortController().signal;
    const queued = routes.viaTaskResult("task-1", signal, 60_000, send);
    assert.deepEqual(sentOn, [], "nothing is sent before the client asks for the task's result");
    const stop = routes.consume("task-1", 11);
    assert.equal(await queued, "answered on 11");
    assert.equal(await routes.viaTaskResult("task-1", signal, 60_000, send), "answered on 11", "while tasks/result 11 waits, at once");
    const stopLater = routes.consume("task-1", 12);
    assert.equal(await routes.viaTaskResult("task-1", signal, 60_000, send), "answered on 12", "the latest tasks/result");
    stopLater();
    stop();
    const other = routes.viaTaskResult("task-2", signal, 60_000, send);
    routes.consume("task-1", 13)();
    assert.deepEqual(sentOn, [11, 11, 12], "another task's tasks/result takes nothing of task-2");
    routes.close("face closed");
    await assert.rejects(other, /face closed/);
  });

  test("a queued request the upstream withdraws (its signal aborts) is dropped, never sent", async () => {
    const routes = new DownstreamRoutes();
    const abort = new AbortController();
    let sent = 0;
    const queued = routes.viaTaskResult("task-1", abort.signal, 60_000, () => {
      sent++;
      return Promise.resolve("x");
    });
    abort.abort(new Error("cancelled by the upstream"));
    await assert.rejects(queued, /cancelled by the upstream/);
    routes.consume("task-1", 1)();
    assert.equal(sent, 0);
  });

  test("requests in flight are tracked until untracked", () => {
    const routes = new DownstreamRoutes();
    const untrack = routes.track("r1");
    assert.equal(routes.has("r1"), true);
    assert.equal(routes.has(1), false);
    untrack();
    assert.equal(routes.has("r1"), false);
  });
});
