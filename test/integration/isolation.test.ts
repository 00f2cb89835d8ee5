/**
 * Session isolation (issue #6): "a second session cannot read, answer or
 * cancel the first session's tasks, elicitations, sampling requests or events,
 * by id guessing included."
 *
 * Two sessions A and B on one gateway whose upstreams are server-everything
 * and the slow-server fixture in this process (test/helpers/in-process.ts;
 * each session has its own upstream connections, as with processes). What other files already cover is not repeated here:
 * same-face tasks/* isolation on /servers/everything/mcp (tasks.test.ts),
 * A's notifications and logs missing from B's get_notifications/get_logs
 * (meta-core.test.ts), per-session elicitations/progress/logs on the
 * transparent face (transparent.test.ts), attach to "no-such-session"
 * (transparent.test.ts) and hostile attach ids (fuzz.test.ts). This file adds:
 * - meta face: B's get_task / get_task_result / cancel_task / list_tasks with
 *   A's exact ids, answered exactly as for an id that never existed;
 * - pending elicitations and sampling: B can neither list nor answer A's, and
 *   B's activity (await_activity, envelope) never mentions them;
 * - native tasks across faces: /all/mcp, the other transparent endpoint and
 *   the meta face all refuse A's task ids;
 * - id guessing (neighbouring ULIDs, mutations, hostile strings) on every
 *   id-taking meta-tool and tasks/* request;
 * - attach (`POST /mcp?session=<id>`) and the bearer token;
 * - events: A's events never wake or reach B's await_activity, and
 *   presenting A's SSE event ids from B's session (Last-Event-ID) replays
 *   nothing of A's stream.
 *
 * Security model, as implemented (src/http/mcp-endpoint.ts): a session id is a
 * bearer credential. Whoever presents a live session id in Mcp-Session-Id (on
 * the endpoint that created it) *is* that session; likewise, whoever knows a
 * session id may attach the meta face to it with `POST /mcp?session=<id>`
 * (the lookup is gateway-wide: a session of any face, the meta face included,
 * can be attached). Session ids are random UUIDs that the gateway never shows
 * to another session, so nobody else can learn or guess them; everything a
 * session owns (tasks, pending requests, events, buffers, SSE replay) is only
 * reachable through its own id. The optional bearer token (gateway.token)
 * guards every request, attach included, before any of this.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { monotonicFactory, ulid } from "ulid";
import { call, connectClient, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import {
  ClientPool,
  EventLedger,
  activityEvents,
  allText,
  awaitActivity,
  eventually,
  field,
  payloadText,
  pendingAction,
  promote,
  sessionOf as metaSessionOf,
  type Activity,
  type TaskView,
  type WireEvent,
} from "../helpers/async-extra.js";
import { MCP_POST_HEADERS, initializeBody, jsonRpcMessages, rawRequest, type RawResponse } from "../helpers/core-extra.js";
import { LONG, type Peer, connectFace, getTask, pollTask, rpcError, startTask, taskResult, text } from "../helpers/tasks.js";

/** A short task that must still be promoted first (timeout_ms 0): a 10 ms sleep could finish before the promotion on a starved machine (seen at load 18-25). */
const SHORT_MS = 500;

const PROTOCOL = "2025-06-18";
/** A hung request fails its test instead of stalling the suite. */
const LIMIT = { timeout: 120_000 };
const RESEARCH = "simulate-research-query";

let gw: TestGateway;
let base: string;
const pool = new ClientPool(() => gw);
/** Transparent peers and attached meta clients, closed in after(). */
const others: Array<{ close(): Promise<void> }> = [];

before(async () => {
  gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything"), slow: inProcess("slow") } });
  base = gw.url.replace(/\/mcp$/, "");
});

after(async () => {
  await Promise.allSettled(others.splice(0).map((c) => c.close()));
  await pool.closeAll();
  await gw?.close();
});

// ---------------------------------------------------------------------------
// helpers

async function face(path: string): Promise<Peer> {
  const p = await connectFace(`${base}${path}`, { name: `isolation${path.replace(/\W+/g, "-")}` });
  others.push(p);
  return p;
}

/** The meta face attached to an existing session (`?session=<id>`). */
async function attach(sessionId: string): Promise<Client> {
  const client = await connectClient(`${base}/mcp?session=${encodeURIComponent(sessionId)}`, { name: "isolation-attached" });
  others.push({
    close: async () => {
      await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    },
  });
  return client;
}

/** `text` with every occurrence of `id` replaced, to compare messages about different ids. */
function masked(text: string, id: string): string {
  return text.split(id).join("<ID>");
}

/** Asserts an isError meta-tool result whose own text starts with `code`; returns that text. */
function metaError(r: CallToolResult, code: string, what: string): string {
  assert.equal(r.isError, true, `${what}: expected an error, got ${allText(r).slice(0, 500)}`);
  const t = payloadText(r);
  assert.ok(t.startsWith(`${code}: `), `${what}: expected ${code}, got ${t.slice(0, 500)}`);
  return t;
}

/** Asserts a JSON-RPC "task not found" error (InvalidParams); returns its message. */
async function notFound(request: Promise<unknown>, what: string): Promise<string> {
  const err = await rpcError(request);
  assert.equal(err.code, ErrorCode.InvalidParams, `${what}: code ${err.code} (${err.message.slice(0, 300)})`);
  assert.match(err.message, /Task not found/, what);
  return err.message;
}

/** Nothing in `where` names any of `secrets` (ids of the other session). */
function assertNoneOf(where: unknown, secrets: Iterable<string>, what: string): void {
  const json = JSON.stringify(where);
  for (const s of secrets) assert.ok(!json.includes(s), `${what} mentions ${s}: ${json.slice(0, 800)}`);
}

/** Calls a meta-tool of one session (through its ledger when it has one, so no event goes unrecorded). */
type Caller = (name: string, args?: Record<string, unknown>) => Promise<CallToolResult>;

function via(client: Client, ledger?: EventLedger): Caller {
  return (name, args = {}) => (ledger ? ledger.call(client, name, args) : call(client, name, args));
}

async function listTaskIds(caller: Caller, args: Record<string, unknown>): Promise<string[]> {
  const r = await caller("list_tasks", args);
  assert.notEqual(r.isError, true, allText(r));
  const tasks = field<TaskView[]>(r, "tasks");
  assert.ok(Array.isArray(tasks), `list_tasks without tasks: ${allText(r)}`);
  return tasks.map((t) => t.task_id);
}

async function taskStatus(caller: Caller, taskId: string): Promise<string> {
  const r = await caller("get_task", { task_id: taskId });
  assert.notEqual(r.isError, true, allText(r));
  const task = field<TaskView>(r, "task");
  assert.ok(task, allText(r));
  return task.status;
}

/** The request ids of get_elicitations / get_sampling_requests. */
async function pendingIds(caller: Caller, kind: "elicitations" | "sampling_requests", server?: string): Promise<string[]> {
  const r = await caller(kind === "elicitations" ? "get_elicitations" : "get_sampling_requests", server === undefined ? {} : { server });
  assert.notEqual(r.isError, true, allText(r));
  const list = field<Array<{ requestId: string }>>(r, kind);
  assert.ok(Array.isArray(list), allText(r));
  return list.map((p) => p.requestId);
}

/** Every meta-tool call B makes that takes an id, with that id. */
function idTakingCalls(id: string): Array<{ tool: string; args: Record<string, unknown>; code: string }> {
  return [
    { tool: "get_task", args: { task_id: id }, code: "EMCP_UNKNOWN_TASK" },
    { tool: "get_task_result", args: { task_id: id, timeout_ms: 0 }, code: "EMCP_UNKNOWN_TASK" },
    { tool: "cancel_task", args: { task_id: id }, code: "EMCP_UNKNOWN_TASK" },
    { tool: "respond_to_elicitation", args: { request_id: id, action: "decline" }, code: "EMCP_UNKNOWN_REQUEST" },
    { tool: "respond_to_sampling", args: { request_id: id, error: "rejected by another session" }, code: "EMCP_UNKNOWN_REQUEST" },
  ];
}

/** A raw JSON-RPC request on an existing session. */
function rawRpc(url: string, sessionId: string, body: Record<string, unknown>, extra: Record<string, string> = {}): Promise<RawResponse> {
  return rawRequest(url, {
    headers: { ...MCP_POST_HEADERS, "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL, ...extra },
    body: JSON.stringify({ jsonrpc: "2.0", ...body }),
  });
}

function sseIds(res: RawResponse): string[] {
  return res.body
    .split(/\r?\n/)
    .filter((l) => l.startsWith("id:"))
    .map((l) => l.slice(3).trim());
}

/**
 * A GET (standalone SSE stream) with Last-Event-ID: the status and whatever arrives within `forMs` (or until `enough`
 * holds for what arrived), then aborted.
 */
async function resume(
  url: string,
  sessionId: string,
  lastEventId: string,
  forMs = 500,
  enough: (body: string) => boolean = () => false,
): Promise<{ status: number; body: string }> {
  const abort = new AbortController();
  const noHeaders = setTimeout(() => abort.abort(), 15_000);
  let res: Response;
  try {
    res = await fetch(url, {
      method: "GET",
      headers: { accept: "text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL, "last-event-id": lastEventId },
      signal: abort.signal,
    });
  } finally {
    clearTimeout(noHeaders);
  }
  if (!res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return { status: res.status, body: await res.text() };
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let body = "";
  const stop = setTimeout(() => abort.abort(), forMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      body += decoder.decode(value, { stream: true });
      if (enough(body)) break;
    }
  } catch {
    // Aborted after forMs: what arrived so far is the answer.
  } finally {
    clearTimeout(stop);
    abort.abort();
  }
  return { status: res.status, body };
}

// ---------------------------------------------------------------------------

describe("meta face: B cannot read, answer or cancel A's tasks and pending requests", () => {
  let a!: Client;
  let b!: Client;
  const ledA = new EventLedger();
  const ledB = new EventLedger();

  let A!: Caller;
  let B!: Caller;

  before(async () => {
    [a, b] = await Promise.all([pool.open(), pool.open()]);
    A = via(a, ledA);
    B = via(b, ledB);
  });

  test(
    "A's tasks: B's get_task / get_task_result / cancel_task answer as for an id that never existed; list_tasks omits them; A's task runs on",
    LIMIT,
    async () => {
      const done = await promote(a, "slow", "slow", { ms: SHORT_MS }, 0, {}, ledA);
      await eventually("A's short task to end", async () => ((await taskStatus(A, done.taskId)) === "completed" ? true : undefined));
      const running = await promote(a, "slow", "slow", { ms: 3_000 }, 0, {}, ledA);
      const aIds = [done.taskId, running.taskId];

      for (const { tool, args, code } of idTakingCalls("").slice(0, 3)) {
        // What B gets for an id that never existed anywhere...
        const never = ulid();
        const baseline = masked(metaError(await B(tool, { ...args, task_id: never }), code, `${tool}(never)`), never);
        // ...is exactly what B gets for A's ids (completed and working): nothing tells B they exist.
        for (const id of aIds) {
          const r = await B(tool, { ...args, task_id: id });
          assert.equal(masked(metaError(r, code, `${tool}(A's ${id})`), id), baseline, `${tool} answers A's id differently from an unknown one`);
          assert.equal(pendingAction(r), undefined, "B has nothing pending");
        }
      }
      // get_task_result without timeout_ms (it would wait for the whole TTL of a task of B's) fails at once too.
      metaError(await B("get_task_result", { task_id: running.taskId }), "EMCP_UNKNOWN_TASK", "get_task_result without timeout");

      assert.deepEqual(await listTaskIds(B, { include_completed: true }), [], "B's list_tasks (include_completed)");
      assert.deepEqual(await listTaskIds(B, { status: "working" }), []);
      assert.deepEqual(await listTaskIds(B, { status: "completed" }), []);
      assert.deepEqual(await listTaskIds(B, { server: "slow", include_completed: true }), []);
      const servers = field<Array<{ name: string; working_tasks: number }>>(await B("list_servers"), "servers") ?? [];
      assert.deepEqual(
        servers.map((s) => [s.name, s.working_tasks]),
        [
          ["everything", 0],
          ["slow", 0],
        ],
        "B's list_servers counts no working task",
      );
      const activity = await ledB.await(b, 0);
      assert.deepEqual(activity.pending_server, [], "B's await_activity shows no working task");

      // A's task was not touched: A still sees it (working, or completed if it already ran its 3 s) and gets its real result.
      const status = await taskStatus(A, running.taskId);
      assert.ok(status === "working" || status === "completed", `A's task is ${status} after B's attempts`);
      assert.deepEqual((await listTaskIds(A, { include_completed: true })).sort(), [...aIds].sort());
      const result = await A("get_task_result", { task_id: running.taskId, timeout_ms: 30_000 });
      assert.notEqual(result.isError, true, allText(result));
      assert.equal(payloadText(result), "slept 3000ms");
      assert.ok(!ledA.has((e) => e.type === "task_cancelled"), "no task of A was cancelled");

      assertNoneOf(ledB.all, aIds, "B's events");
    },
  );

  test("A's pending elicitation and sampling request: B cannot list or answer them; A answers and its calls complete", LIMIT, async () => {
    const el = await promote(a, "everything", "trigger-elicitation-request", {}, 0, {}, ledA);
    const sm = await promote(a, "everything", "trigger-sampling-request", { prompt: "A's private prompt", maxTokens: 16 }, 0, {}, ledA);
    const elicitationId = await eventually("A's pending elicitation", async () => (await pendingIds(A, "elicitations", "everything"))[0]);
    const samplingId = await eventually("A's pending sampling request", async () => (await pendingIds(A, "sampling_requests"))[0]);
    const aIds = [el.taskId, sm.taskId, elicitationId, samplingId];

    // B sees nothing pending.
    assert.deepEqual(await pendingIds(B, "elicitations"), []);
    assert.deepEqual(await pendingIds(B, "elicitations", "everything"), []);
    assert.deepEqual(await pendingIds(B, "sampling_requests"), []);
    assert.deepEqual(await pendingIds(B, "sampling_requests", "everything"), []);
    const quiet = await B("list_servers");
    assert.equal(pendingAction(quiet), undefined, `B's envelope shows pending requests: ${allText(quiet)}`);
    const activity = await ledB.await(b, 0);
    assert.deepEqual(activity.pending_client, { elicitations: [], sampling_requests: [] });

    // B's answers with A's ids are refused exactly like answers to ids that never existed.
    const never = ulid();
    const elicitationAnswers: Array<Record<string, unknown>> = [
      { action: "accept", content: { name: "Mallory", check: true, integer: 1 } },
      { action: "decline" },
      { action: "cancel" },
    ];
    for (const answer of elicitationAnswers) {
      const baseline = masked(metaError(await B("respond_to_elicitation", { request_id: never, ...answer }), "EMCP_UNKNOWN_REQUEST", "baseline"), never);
      const r = await B("respond_to_elicitation", { request_id: elicitationId, ...answer });
      assert.equal(masked(metaError(r, "EMCP_UNKNOWN_REQUEST", `respond_to_elicitation ${String(answer.action)}`), elicitationId), baseline);
    }
    const samplingAnswers: Array<Record<string, unknown>> = [
      { text: "hijacked by B" },
      { content: { type: "text", text: "hijacked by B" } },
      { error: "rejected by B" },
    ];
    for (const answer of samplingAnswers) {
      const baseline = masked(metaError(await B("respond_to_sampling", { request_id: never, ...answer }), "EMCP_UNKNOWN_REQUEST", "baseline"), never);
      const r = await B("respond_to_sampling", { request_id: samplingId, ...answer });
      assert.equal(masked(metaError(r, "EMCP_UNKNOWN_REQUEST", `respond_to_sampling ${JSON.stringify(answer)}`), samplingId), baseline);
    }
    // Crossing the kinds does not help either.
    metaError(await B("respond_to_sampling", { request_id: elicitationId, text: "x" }), "EMCP_UNKNOWN_REQUEST", "sampling answer to A's elicitation");
    metaError(await B("respond_to_elicitation", { request_id: samplingId, action: "decline" }), "EMCP_UNKNOWN_REQUEST", "elicitation answer to A's sampling");

    // Still pending for A, untouched.
    assert.deepEqual(await pendingIds(A, "elicitations"), [elicitationId]);
    assert.deepEqual(await pendingIds(A, "sampling_requests"), [samplingId]);
    // Each still runs, waiting for A's answer: input_required when its request could be attributed to it
    // (on stdio only while one call is in flight, ADR 0002 §8), else working.
    for (const t of [el, sm]) assert.ok(["working", "input_required"].includes(await taskStatus(A, t.taskId)));

    // A answers; the upstream gets A's answers (not B's decline / hijack / rejection).
    const e = await A("respond_to_elicitation", { request_id: elicitationId, action: "accept", content: { name: "Alice", check: true, integer: 3 } });
    assert.notEqual(e.isError, true, allText(e));
    const s = await A("respond_to_sampling", { request_id: samplingId, text: "answer from A" });
    assert.notEqual(s.isError, true, allText(s));
    const elResult = await A("get_task_result", { task_id: el.taskId, timeout_ms: 30_000 });
    assert.notEqual(elResult.isError, true, allText(elResult));
    assert.match(payloadText(elResult), /- Name: Alice/);
    const smResult = await A("get_task_result", { task_id: sm.taskId, timeout_ms: 30_000 });
    assert.notEqual(smResult.isError, true, allText(smResult));
    assert.match(payloadText(smResult), /answer from A/);
    assert.doesNotMatch(payloadText(smResult), /hijacked/);

    // A's events about them reached A, and none of them (nor the ids) ever reached B.
    assert.ok(ledA.has((ev) => ev.type === "elicitation_request" && ev.data.requestId === elicitationId));
    assert.ok(ledA.has((ev) => ev.type === "sampling_request" && ev.data.requestId === samplingId));
    await ledB.await(b, 0);
    assertNoneOf(ledB.all, aIds, "B's events");
    const bTypes = new Set(ledB.all.map((ev) => ev.type));
    for (const type of ["elicitation_request", "sampling_request", "task_created", "task_completed"]) assert.ok(!bTypes.has(type), `B got a ${type} event`);
  });

  test("A's events never wake B's await_activity and never reach B's notifications, logs or envelope", LIMIT, async () => {
    const sessionB = metaSessionOf(gw, b);
    await ledB.await(b, 0); // nothing undelivered in B
    let settled = false;
    const waiting = ledB.await(b, 60_000).then((act) => {
      settled = true;
      return act;
    });
    await eventually("B's await_activity to be waiting", () => (sessionB.events.waiterCount === 1 ? true : undefined), 30_000, 10);

    // A makes events of every kind: a notification (resources/list_changed), task events, log messages.
    const gz = await A("execute_tool", {
      server: "everything",
      tool: "gzip-file-as-resource",
      args: { name: "isolation-a.txt.gz", data: "data:text/plain;base64,aXNvbGF0aW9u" },
    });
    assert.notEqual(gz.isError, true, allText(gz));
    const short = await promote(a, "slow", "slow", { ms: SHORT_MS }, 0, {}, ledA);
    assert.equal(payloadText(await A("get_task_result", { task_id: short.taskId, timeout_ms: 30_000 })), `slept ${SHORT_MS}ms`);
    const simulated = (l: { logger?: string; data: unknown }) =>
      l.logger !== "stderr" && typeof l.data === "string" && /level message|level-message/.test(l.data);
    assert.notEqual((await A("execute_tool", { server: "everything", tool: "toggle-simulated-logging", args: {} })).isError, true);
    let aNotifications: Array<{ method: string }> = [];
    try {
      aNotifications = await eventually("A's resources/list_changed notification", async () => {
        const list = field<Array<{ method: string }>>(await A("get_notifications"), "notifications") ?? [];
        return list.some((n) => n.method === "notifications/resources/list_changed") ? list : undefined;
      });
      await eventually("a simulated log message in A's get_logs", async () => {
        const logs = field<Array<{ logger?: string; data: unknown }>>(await A("get_logs"), "logs") ?? [];
        return logs.some(simulated) ? true : undefined;
      });
    } finally {
      await A("execute_tool", { server: "everything", tool: "toggle-simulated-logging", args: {} });
    }
    assert.ok(aNotifications.length > 0);
    assert.ok(
      ledA.has((e) => e.type === "task_completed" && e.data.taskId === short.taskId),
      "A saw its own task events",
    );

    // Every event of A has been added (A has read it); none of them woke B.
    assert.equal(settled, false, "B's await_activity was woken by A's activity");
    assert.equal(sessionB.events.waiterCount, 1, "B is still waiting");

    // B's own event wakes it, and it delivers only B's own events.
    const mine = await promote(b, "slow", "slow", { ms: SHORT_MS }, 0, {}, ledB);
    const woke: Activity = await waiting;
    assert.ok(!woke.triggers.some((t) => t.type === "timeout"), `B woke on its timeout: ${JSON.stringify(woke.triggers)}`);
    const bEvents: WireEvent[] = activityEvents(woke);
    assert.ok(bEvents.length > 0);
    for (const e of bEvents) {
      assert.equal(e.server, "slow", `B got an event of ${e.server}: ${JSON.stringify(e)}`);
      assert.equal(e.data.taskId, mine.taskId, `B got an event about another task: ${JSON.stringify(e)}`);
    }
    assert.equal(payloadText(await B("get_task_result", { task_id: mine.taskId, timeout_ms: 30_000 })), `slept ${SHORT_MS}ms`);

    // B's buffers hold nothing of A's.
    const bNotifications = field<Array<{ method: string; params?: unknown }>>(await B("get_notifications"), "notifications") ?? [];
    assert.ok(!bNotifications.some((n) => n.method === "notifications/resources/list_changed"), `B got A's notification: ${JSON.stringify(bNotifications)}`);
    const bLogs = field<Array<{ logger?: string; data: unknown }>>(await B("get_logs"), "logs") ?? [];
    assert.deepEqual(bLogs.filter(simulated), [], "B got A's simulated log messages");
    await ledB.await(b, 0);

    const aEventIds = new Set(ledA.all.map((e) => e.id));
    assert.deepEqual(
      ledB.all.filter((e) => aEventIds.has(e.id)),
      [],
      "events delivered in both sessions",
    );
    assertNoneOf(ledB.all, [short.taskId, "isolation-a.txt.gz"], "B's events");
  });
});

describe("native tasks on the transparent faces: B on any face cannot get, fetch, cancel or list A's tasks", () => {
  test(
    "A's tasks (gateway-owned and upstream) from /servers/everything/mcp and /all/mcp are unknown to B on /servers, /all and the meta face",
    LIMIT,
    async () => {
      const [pa, paAll, pb, pbAll, bMeta] = await Promise.all([
        face("/servers/everything/mcp"),
        face("/all/mcp"),
        face("/servers/everything/mcp"),
        face("/all/mcp"),
        pool.open(),
      ]);
      const echo = await startTask(pa.client, "echo", { message: "A only" });
      const research = await startTask(pa.client, RESEARCH, { topic: "isolation" });
      const viaAll = await startTask(paAll.client, "everything__echo", { message: "A only, via /all" });
      await pollTask(pa.client, echo.taskId, (t) => t.status === "completed", "completed");
      await pollTask(paAll.client, viaAll.taskId, (t) => t.status === "completed", "completed");
      const aIds = [echo.taskId, research.taskId, viaAll.taskId];

      for (const [name, peer] of [
        ["B on /servers/everything/mcp", pb],
        ["B on /all/mcp", pbAll],
      ] as const) {
        const never = ulid();
        const baseline = {
          get: masked(await notFound(getTask(peer.client, never), `${name} tasks/get (never)`), never),
          result: masked(await notFound(taskResult(peer.client, never), `${name} tasks/result (never)`), never),
          cancel: masked(await notFound(peer.client.experimental.tasks.cancelTask(never, LONG), `${name} tasks/cancel (never)`), never),
        };
        for (const id of aIds) {
          assert.equal(masked(await notFound(getTask(peer.client, id), `${name} tasks/get`), id), baseline.get);
          assert.equal(masked(await notFound(taskResult(peer.client, id), `${name} tasks/result`), id), baseline.result);
          assert.equal(masked(await notFound(peer.client.experimental.tasks.cancelTask(id, LONG), `${name} tasks/cancel`), id), baseline.cancel);
        }
        assert.deepEqual((await peer.client.experimental.tasks.listTasks(undefined, LONG)).tasks, [], `${name}: tasks/list`);
        // Apart from B's own not-found replies (which echo the id B sent), nothing B received names A's tasks:
        // no result, no notifications/tasks/status, no related-task _meta.
        assertNoneOf(
          peer.received.filter((m) => m.error === undefined),
          aIds,
          `what ${name} received`,
        );
      }

      // The meta face of another session (and its envelope) knows nothing of them either.
      for (const id of aIds) {
        for (const { tool, args, code } of idTakingCalls(id).slice(0, 3)) metaError(await call(bMeta, tool, args), code, `meta ${tool}`);
      }
      assert.deepEqual(await listTaskIds(via(bMeta), { include_completed: true }), []);

      // A's tasks are intact, on each face of A.
      assert.equal(text(await taskResult(pa.client, echo.taskId)), "Echo: A only");
      assert.equal(text(await taskResult(paAll.client, viaAll.taskId)), "Echo: A only, via /all");
      const report = await taskResult(pa.client, research.taskId);
      assert.notEqual(report.isError, true, text(report));
      assert.match(text(report), /isolation/);
      assert.deepEqual(
        (await pa.client.experimental.tasks.listTasks(undefined, LONG)).tasks.map((t) => t.taskId).sort(),
        [echo.taskId, research.taskId].sort(),
      );
      // Each of A's sessions sees only its own tasks too.
      assert.deepEqual(
        (await paAll.client.experimental.tasks.listTasks(undefined, LONG)).tasks.map((t) => t.taskId),
        [viaAll.taskId],
      );
    },
  );
});

/** `each` for every item, eight at a time (a failure fails the whole, after the others in flight settle). */
async function eightAtOnce<T>(items: Iterable<T>, each: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const worker = async (): Promise<void> => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await each(item);
  };
  const settled = await Promise.allSettled(Array.from({ length: 8 }, worker));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
}

describe("id guessing: neighbouring, mutated and hostile ids get clean not-found errors", () => {
  test("get_task, get_task_result, cancel_task, respond_to_* and tasks/get|result|cancel with guessed ids", LIMIT, async () => {
    const [a, b] = await Promise.all([pool.open(), pool.open()]);
    const [pa, pb, pbAll] = await Promise.all([face("/servers/everything/mcp"), face("/servers/everything/mcp"), face("/all/mcp")]);

    // A has live things of every kind: a working task, a pending elicitation, a pending sampling request, a native task.
    // Still working at the end however long the guessing takes on a loaded machine (it is cancelled below).
    const running = await promote(a, "slow", "slow", { ms: 600_000 }, 0);
    // The fixture's elicitation and sampling requests wait 10 min for their answers (not the SDK's 60 s): however long
    // the guessing takes on a loaded machine, A's pending items are still there at the end unless a guess ended them.
    const twice = await promote(a, "slow", "elicit-twice", { timeout_ms: 600_000 }, 0);
    const sampling = await promote(a, "slow", "sample", { timeout_ms: 600_000 }, 0);
    const elicitationId = await eventually("A's pending elicitation", async () => (await pendingIds(via(a), "elicitations", "slow"))[0]);
    const samplingId = await eventually("A's pending sampling request", async () => (await pendingIds(via(a), "sampling_requests"))[0]);
    const native = await startTask(pa.client, RESEARCH, { topic: "guessing" });
    const real = [running.taskId, twice.taskId, sampling.taskId, elicitationId, samplingId, native.taskId];
    // Variants of one id of each kind (a lookup by id is the same for A's three meta tasks: what a task waits on is not
    // in its id), each asked of every id-taking call below; until 27 Nov 2026 of all six ids, with ten fresh ULIDs
    // instead of two (about 935 requests then, 650 now; the CPU was the test's cost, issue 21).
    const kinds = [running.taskId, elicitationId, samplingId, native.taskId];

    // Ids are gateway-wide monotonic ULIDs, so B's own new ids are A's close neighbours.
    const next = monotonicFactory();
    const guesses = new Set<string>();
    for (const id of kinds) {
      const last = id.at(-1) ?? "0";
      for (const c of ["0", "1", "Z", last === "0" ? "1" : "0"]) if (c !== last) guesses.add(id.slice(0, -1) + c);
      guesses.add(id.toLowerCase());
      guesses.add(` ${id}`);
      guesses.add(`${id} `);
      guesses.add(`${id}\u0000`);
      guesses.add(encodeURIComponent(`../${id}`));
    }
    // Ids never issued: one random, one from a monotonic generator of its own (B's next id, as it were).
    guesses.add(ulid());
    guesses.add(next());
    for (const hostile of [
      "x".repeat(100_000),
      "../",
      "../../../../etc/passwd",
      "..\\..\\",
      "__proto__",
      "constructor",
      "prototype",
      "toString",
      "hasOwnProperty",
      "valueOf",
      "null",
      "undefined",
      "*",
      "%",
      "%00",
      "\u0000",
      "' OR '1'='1",
      '{"$ne":null}',
      "🙂",
      "\u202e",
    ]) {
      guesses.add(hostile);
    }
    for (const id of real) guesses.delete(id);

    // Meta face: each guess is a well-formed unknown-id error; "" is refused by the input schema. Eight guesses at a time
    // (each one's calls in order): one after another the ~650 requests took 98 s at load 34, past the 60 s that
    // server-everything and the slow fixture wait for A's sampling and elicitation answers, which then were gone.
    await eightAtOnce(guesses, async (guess) => {
      for (const { tool, args, code } of idTakingCalls(guess)) metaError(await call(b, tool, args), code, `${tool}(${JSON.stringify(guess.slice(0, 40))})`);
    });
    for (const { tool, args } of idTakingCalls("")) {
      const r = await call(b, tool, args);
      assert.equal(r.isError, true, `${tool}(""): ${allText(r)}`);
      assert.match(payloadText(r), /task_id|request_id/, `${tool}("") names the field`);
    }

    // Transparent faces: each guess (and "") is a JSON-RPC not-found error.
    for (const [name, peer] of [
      ["/servers/everything/mcp", pb],
      ["/all/mcp", pbAll],
    ] as const) {
      await eightAtOnce([...guesses, ""], async (guess) => {
        const what = `${name} ${JSON.stringify(guess.slice(0, 40))}`;
        await notFound(getTask(peer.client, guess), `tasks/get ${what}`);
        await notFound(taskResult(peer.client, guess), `tasks/result ${what}`);
        await notFound(peer.client.experimental.tasks.cancelTask(guess, LONG), `tasks/cancel ${what}`);
      });
      assert.deepEqual((await peer.client.experimental.tasks.listTasks(undefined, LONG)).tasks, []);
    }

    // Nothing crashed or changed: B still works, A's things are all still there and still A's to end.
    assert.deepEqual(await listTaskIds(via(b), { include_completed: true }), []);
    assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, "polluted"), false);
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(await taskStatus(via(a), running.taskId), "working");
    assert.deepEqual(await pendingIds(via(a), "elicitations"), [elicitationId]);
    assert.deepEqual(await pendingIds(via(a), "sampling_requests"), [samplingId]);
    const nativeNow = await getTask(pa.client, native.taskId);
    assert.ok(nativeNow.status === "working" || nativeNow.status === "input_required" || nativeNow.status === "completed", nativeNow.status);
    for (const id of [running.taskId, twice.taskId, sampling.taskId]) {
      const r = await call(a, "cancel_task", { task_id: id });
      assert.equal(field(r, "success"), true, `A cancels its own task: ${allText(r)}`);
    }
    if (nativeNow.status !== "completed") {
      // The research task may end on its own between the look above and this cancel (CI saw it, 2026-11-28):
      // then the cancel is refused as ended, and the task is A's, completed.
      const ended = await pa.client.experimental.tasks.cancelTask(native.taskId, LONG).then(
        (t) => t.status,
        async (err: unknown) => {
          assert.match(String(err), /EMCP_TASK_ENDED/, "a refused cancel says the task ended");
          return (await getTask(pa.client, native.taskId)).status;
        },
      );
      assert.ok(ended === "cancelled" || ended === "completed", `A's native task ends cancelled or completed: ${ended}`);
    }
  });
});

describe("attach (POST /mcp?session=<id>) and the session id as the credential", () => {
  test("attaching to a session that does not exist is refused (404) and creates nothing", LIMIT, async () => {
    const pa = await face("/servers/everything/mcp");
    const attachedToA = await attach(pa.sessionId);
    const attachmentId = (attachedToA.transport as StreamableHTTPClientTransport).sessionId;
    assert.ok(attachmentId && attachmentId !== pa.sessionId, "an attachment has its own Mcp-Session-Id");

    const before = gw.gateway.context.sessions.size;
    for (const [label, id] of [
      ["a random UUID", randomUUID()],
      ["A's id with its last character changed", pa.sessionId.slice(0, -1) + (pa.sessionId.endsWith("0") ? "1" : "0")],
      ["A's id in upper case", pa.sessionId.toUpperCase()],
      ["the Mcp-Session-Id of an attachment (not a session)", attachmentId],
      ["a ULID", ulid()],
    ] as const) {
      const res = await rawRequest(`${base}/mcp?session=${encodeURIComponent(id)}`, { headers: { ...MCP_POST_HEADERS }, body: initializeBody() });
      assert.equal(res.status, 404, `${label}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
      assert.equal(res.headers["mcp-session-id"], undefined, `${label}: no session id is handed out`);
      const [msg] = jsonRpcMessages(res);
      assert.equal(msg?.error?.code, -32001, label);
      assert.match(String(msg?.error?.message), /Session not found: cannot attach/, label);
    }
    assert.equal(gw.gateway.context.sessions.size, before, "refused attaches leave no session behind");
  });

  test("?session= only attaches on the meta face; a session id only works on the endpoint that created it", LIMIT, async () => {
    const pa = await face("/servers/everything/mcp");
    const mine = await startTask(pa.client, "echo", { message: "A's" });

    // On the transparent faces the parameter is ignored: the client gets a new, empty session of its own.
    for (const path of ["/servers/everything/mcp", "/all/mcp"]) {
      const other = await face(`${path}?session=${encodeURIComponent(pa.sessionId)}`);
      assert.notEqual(other.sessionId, pa.sessionId, `${path}: a new session`);
      assert.deepEqual((await other.client.experimental.tasks.listTasks(undefined, LONG)).tasks, [], `${path}: sees none of A's tasks`);
      await notFound(getTask(other.client, mine.taskId), `${path} tasks/get`);
    }

    // A's Mcp-Session-Id presented to another endpoint is unknown there (404), whatever the request.
    const metaA = await pool.open();
    const metaId = (metaA.transport as StreamableHTTPClientTransport).sessionId;
    assert.ok(metaId);
    for (const [path, id] of [
      ["/mcp", pa.sessionId],
      ["/all/mcp", pa.sessionId],
      ["/servers/slow/mcp", pa.sessionId],
      ["/servers/everything/mcp", metaId],
      ["/all/mcp", metaId],
    ] as const) {
      for (const body of [
        { id: 1, method: "tasks/get", params: { taskId: mine.taskId } },
        { id: 2, method: "tools/call", params: { name: "list_tasks", arguments: { include_completed: true } } },
      ]) {
        const res = await rawRpc(`${base}${path}`, id, body);
        assert.equal(res.status, 404, `${path} with a session id of another endpoint: HTTP ${res.status} ${res.body.slice(0, 200)}`);
        assert.match(res.body, /Session not found/);
        assert.ok(!res.body.includes(mine.taskId), `the 404 names A's task: ${res.body}`);
      }
      // Nor can it end that session from there.
      const del = await rawRequest(`${base}${path}`, { method: "DELETE", headers: { "mcp-session-id": id, "mcp-protocol-version": PROTOCOL } });
      assert.equal(del.status, 404, `DELETE on ${path} with a session id of another endpoint: HTTP ${del.status}`);
    }
    assert.ok(gw.gateway.context.sessions.get(pa.sessionId) && gw.gateway.context.sessions.get(metaId), "both sessions still exist");
    assert.deepEqual(
      (await pa.client.experimental.tasks.listTasks(undefined, LONG)).tasks.map((t) => t.taskId),
      [mine.taskId],
      "A's session is intact",
    );
    assert.notEqual((await call(metaA, "list_servers")).isError, true);
  });

  test("security model: knowing a session id is what grants access — attaching with A's id is being A (documented behaviour)", LIMIT, async () => {
    // Whoever knows the id may attach, exactly as whoever knows it may send it in
    // Mcp-Session-Id. The gateway's guarantees are that ids are unguessable
    // (random UUIDs, see the 404 test above) and never shown to another session.
    const pa = await face("/servers/everything/mcp");
    const task = await startTask(pa.client, "echo", { message: "visible to A's attachments" });
    const attached = await attach(pa.sessionId);
    assert.deepEqual(await listTaskIds(via(attached), { include_completed: true }), [task.taskId], "the attachment is A's session");

    // The lookup is gateway-wide, so a meta-face session can be attached too (current behaviour).
    const metaA = await pool.open();
    const metaTask = await promote(metaA, "slow", "slow", { ms: SHORT_MS }, 0);
    const metaId = (metaA.transport as StreamableHTTPClientTransport).sessionId;
    assert.ok(metaId);
    const attachedMeta = await attach(metaId);
    assert.deepEqual(await listTaskIds(via(attachedMeta), { include_completed: true }), [metaTask.taskId]);

    // A session never learns another session's id: nothing B receives carries A's ids.
    const b = await pool.open();
    const bSaw: unknown[] = [];
    for (const tool of ["list_servers", "list_tasks", "get_elicitations", "get_sampling_requests", "get_notifications", "get_logs"])
      bSaw.push(await call(b, tool));
    bSaw.push(await awaitActivity(b, 0));
    const health = await fetch(`${base}/healthz`);
    bSaw.push(await health.json());
    assertNoneOf(bSaw, [pa.sessionId, metaId], "what B can read");
  });

  test("with gateway.token set, every request without the right bearer token is refused (401) and ends nothing", LIMIT, async () => {
    const TOKEN = "isolation-test-token-0123456789";
    const tgw = await startInProcessGateway({ gateway: { token: TOKEN } });
    try {
      const tbase = tgw.url.replace(/\/mcp$/, "");
      const auth = { authorization: `Bearer ${TOKEN}` };
      // A legitimate session, made with the token.
      const init = await rawRequest(`${tbase}/servers/everything/mcp`, { headers: { ...MCP_POST_HEADERS, ...auth }, body: initializeBody() });
      assert.equal(init.status, 200, init.body);
      const sessionId = String(init.headers["mcp-session-id"]);
      const sessions = tgw.gateway.context.sessions.size;

      const badAuth: Array<[string, Record<string, string>]> = [
        ["no Authorization", {}],
        ["a wrong token", { authorization: "Bearer isolation-test-token-WRONG-000000" }],
        ["the token without 'Bearer'", { authorization: TOKEN }],
        ["Basic auth", { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString("base64")}` }],
        ["an empty bearer", { authorization: "Bearer " }],
      ];
      for (const [label, headers] of badAuth) {
        const attempts: Array<[string, Promise<RawResponse>]> = [
          ["initialize /mcp", rawRequest(`${tbase}/mcp`, { headers: { ...MCP_POST_HEADERS, ...headers }, body: initializeBody() })],
          ["initialize /all/mcp", rawRequest(`${tbase}/all/mcp`, { headers: { ...MCP_POST_HEADERS, ...headers }, body: initializeBody() })],
          [
            "initialize /servers/everything/mcp",
            rawRequest(`${tbase}/servers/everything/mcp`, { headers: { ...MCP_POST_HEADERS, ...headers }, body: initializeBody() }),
          ],
          [
            "attach /mcp?session=<live id>",
            rawRequest(`${tbase}/mcp?session=${encodeURIComponent(sessionId)}`, { headers: { ...MCP_POST_HEADERS, ...headers }, body: initializeBody() }),
          ],
          ["request in the live session", rawRpc(`${tbase}/servers/everything/mcp`, sessionId, { id: 9, method: "tasks/list" }, headers)],
          [
            "GET stream of the live session",
            rawRequest(`${tbase}/servers/everything/mcp`, { method: "GET", headers: { accept: "text/event-stream", "mcp-session-id": sessionId, ...headers } }),
          ],
          [
            "DELETE of the live session",
            rawRequest(`${tbase}/servers/everything/mcp`, {
              method: "DELETE",
              headers: { "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL, ...headers },
            }),
          ],
        ];
        for (const [what, attempt] of attempts) {
          const res = await attempt;
          assert.equal(res.status, 401, `${label}, ${what}: HTTP ${res.status} ${res.body.slice(0, 200)}`);
          assert.match(String(res.headers["www-authenticate"]), /^Bearer/, `${label}, ${what}: WWW-Authenticate`);
          assert.equal(res.headers["mcp-session-id"], undefined);
          assert.equal(jsonRpcMessages(res)[0]?.error?.code, -32000);
        }
      }
      assert.equal(tgw.gateway.context.sessions.size, sessions, "no session created or ended without the token");

      // With the token, the same session works and can be attached.
      const ok = await rawRpc(`${tbase}/servers/everything/mcp`, sessionId, { id: 10, method: "tasks/list" }, auth);
      assert.equal(ok.status, 200, ok.body);
      assert.deepEqual(jsonRpcMessages(ok)[0]?.result, { tasks: [] });
      const attached = await rawRequest(`${tbase}/mcp?session=${encodeURIComponent(sessionId)}`, {
        headers: { ...MCP_POST_HEADERS, ...auth },
        body: initializeBody(),
      });
      assert.equal(attached.status, 200, attached.body);
      const del = await rawRequest(`${tbase}/servers/everything/mcp`, {
        method: "DELETE",
        headers: { "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL, ...auth },
      });
      assert.equal(del.status, 200, del.body);
    } finally {
      await tgw.close();
    }
  });
});

describe("SSE resumption cannot cross sessions", () => {
  test("B's GET with a Last-Event-ID from A's stream replays nothing of A's", LIMIT, async () => {
    const url = `${base}/servers/everything/mcp`;
    const initA = await rawRequest(url, { headers: { ...MCP_POST_HEADERS }, body: initializeBody() });
    const initB = await rawRequest(url, { headers: { ...MCP_POST_HEADERS }, body: initializeBody() });
    assert.equal(initA.status, 200);
    assert.equal(initB.status, 200);
    const idA = String(initA.headers["mcp-session-id"]);
    const idB = String(initB.headers["mcp-session-id"]);
    others.push(
      ...[idA, idB].map((sid) => ({
        close: async () => {
          await rawRequest(url, { method: "DELETE", headers: { "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL } }).catch(() => undefined);
        },
      })),
    );
    for (const sid of [idA, idB]) {
      const r = await rawRequest(url, {
        headers: { ...MCP_POST_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL },
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
      });
      assert.equal(r.status, 202, r.body);
    }
    // A's call streams several messages (progress under a secret token, then the result), each with an SSE event id.
    const secret = `A-secret-${randomUUID()}`;
    const streamed = await rawRpc(url, idA, {
      id: 2,
      method: "tools/call",
      params: { name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 }, _meta: { progressToken: secret } },
    });
    assert.equal(streamed.status, 200, streamed.body);
    const streamIds = sseIds(streamed);
    assert.ok(streamIds.length >= 3 && streamed.body.includes(secret), `A's call streamed progress and its result: ${streamed.body.slice(0, 300)}`);
    const aEventIds = [...sseIds(initA), ...streamIds];

    // Control: A itself may resume that stream after its first event (the rest is replayed).
    const own = await resume(url, idA, streamIds[0]!, 30_000, (body) => body.includes(secret));
    assert.equal(own.status, 200, own.body);
    assert.ok(own.body.includes(secret), `A's own resumption replays its messages: ${own.body.slice(0, 300)}`);

    // B presenting A's event ids replays nothing of A's. Event ids need only be unique within one
    // session's store, so the same id may name one of B's own events (then B's own messages are
    // replayed) or nothing (400); either way nothing of A's stream can come out.
    for (const eventId of aEventIds) {
      const r = await resume(url, idB, eventId);
      assert.ok([200, 400, 409].includes(r.status), `B resuming from A's event ${eventId}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
      assert.ok(!r.body.includes(secret), `B got A's message resuming from ${eventId}: ${r.body.slice(0, 300)}`);
      assert.ok(!r.body.includes(idA), "B learned A's session id");
    }
    // B still works.
    const list = await rawRpc(url, idB, { id: 3, method: "tasks/list" });
    assert.equal(list.status, 200);
    assert.deepEqual(jsonRpcMessages(list)[0]?.result, { tasks: [] });
  });
});
