/**
 * Integration tests of the async meta-tools (design MF-6..MF-16): execute_tool timeout
 * promotion to tasks, task tools, elicitations (form and URL), sampling,
 * await_activity and the session envelope (exactly-once events, pending
 * client actions), upstream loss, cancellation, TTL expiry and the
 * emceepee://diagrams resource. Upstreams are server-everything and the
 * slow-server fixture in this process (test/helpers/in-process.ts), one set per
 * client session; the tests where the upstream's process dies use the stdio
 * fixture in its own process.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { call, slowServerStdio, startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import {
  ClientPool,
  EventLedger,
  activityEvents,
  allText,
  awaitActivity,
  awaitUntil,
  elicitations,
  envelopeEvents,
  errorCodeOf,
  eventually,
  field,
  getTask,
  payload,
  payloadText,
  pendingAction,
  promote,
  sessionOf,
  waitTerminal,
  type Activity,
  type TaskView,
} from "../helpers/async-extra.js";

const DIAGRAM_NAMES = [
  "proxy_task_states",
  "pending_elicitation_states",
  "pending_sampling_states",
  "tool_call_lifecycle",
  "entity_relationships",
  "mcp_task_states",
  "receiver_task_states",
  "upstream_connection_states",
];

let gw: TestGateway;
const pool = new ClientPool(() => gw);

before(async () => {
  gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything"), slow: inProcess("slow") } });
});

after(async () => {
  await pool.closeAll();
  await gw?.close();
});

async function taskIds(client: Client): Promise<string[]> {
  const r = await call(client, "list_tasks", { include_completed: true });
  assert.notEqual(r.isError, true, allText(r));
  const tasks = field<TaskView[]>(r, "tasks");
  assert.ok(tasks, "list_tasks has a tasks field");
  return tasks.map((t) => t.task_id);
}

/** Answers the one pending elicitation of `server` and returns its id. */
async function onlyElicitation(client: Client, server: string) {
  const list = await elicitations(client, server);
  assert.equal(list.length, 1, `expected one pending elicitation on ${server}, got ${JSON.stringify(list)}`);
  return list[0]!;
}

describe("execute_tool timeout promotion (server-everything trigger-long-running-operation)", () => {
  test("a short timeout_ms promotes the call; await_activity wakes on task_completed; get_task_result gives the real result", async (t) => {
    const c = await pool.open(t);
    const ledger = new EventLedger();
    const args = { duration: 2, steps: 4 };
    const p = await promote(c, "everything", "trigger-long-running-operation", args, 200, {}, ledger);

    assert.ok(
      p.pendingOnServer.tasks.some((t) => t.task_id === p.taskId && t.status === "working"),
      "pending_on_server.tasks lists the new working task",
    );
    assert.deepEqual(p.pendingOnServer.elicitations_for_server, []);
    assert.ok(
      ledger.has((e) => e.type === "task_created" && e.data.taskId === p.taskId),
      "the promotion response delivers the task_created event",
    );
    assert.equal((await getTask(c, p.taskId)).task.status, "working");

    const triggers = await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "task_completed" && e.data.taskId === p.taskId), 60_000);
    assert.ok(
      triggers.some((t) => t.type === "event" && t.server === "everything" && t.eventType === "task_completed"),
      `await_activity woke with a task_completed trigger: ${JSON.stringify(triggers)}`,
    );
    assert.ok(!triggers.some((t) => t.type === "timeout"), "await_activity never timed out while the task was working");

    const { task } = await getTask(c, p.taskId);
    assert.equal(task.status, "completed");

    const fromTask = await call(c, "get_task_result", { task_id: p.taskId });
    assert.notEqual(fromTask.isError, true, allText(fromTask));
    assert.match(payloadText(fromTask), /Long running operation completed\. Duration: 2 seconds, Steps: 4\./);

    const direct = await call(c, "execute_tool", { server: "everything", tool: "trigger-long-running-operation", args, timeout_ms: 60_000 });
    assert.notEqual(direct.isError, true, allText(direct));
    assert.equal(field(direct, "proxy_task"), undefined, "a long timeout_ms returns the result, not a task");
    assert.deepEqual(payload(fromTask), payload(direct), "get_task_result returns the same content as a synchronous call");
  });

  test("a long timeout_ms returns the result directly and creates no task", async (t) => {
    const c = await pool.open(t);
    const before = await taskIds(c);
    const r = await call(c, "execute_tool", {
      server: "everything",
      tool: "trigger-long-running-operation",
      args: { duration: 1, steps: 2 },
      timeout_ms: 60_000,
    });
    assert.notEqual(r.isError, true, allText(r));
    assert.equal(field(r, "proxy_task"), undefined);
    assert.equal(field(r, "pending_on_server"), undefined);
    assert.deepEqual(
      payload(r),
      [{ type: "text", text: "Long running operation completed. Duration: 1 seconds, Steps: 2." }],
      "the upstream result is returned unchanged",
    );
    assert.ok(!envelopeEvents(r).some((e) => e.type.startsWith("task_")), "no task events");
    assert.deepEqual(await taskIds(c), before, "list_tasks (include_completed) shows no new task");
  });
});

describe("elicitations through tasks (server-everything)", () => {
  async function promoteElicitation(c: Client, ledger?: EventLedger) {
    // The elicitation is sent at once by the upstream; 1s lets it arrive before promotion.
    const p = await promote(c, "everything", "trigger-elicitation-request", {}, 1_000, {}, ledger);
    const inServer = p.pendingOnServer.elicitations_for_server;
    const inEnvelope = pendingAction(p.result)?.elicitations ?? [];
    const listed = [...inServer, ...inEnvelope];
    assert.ok(listed.length > 0, `the promotion response lists the pending elicitation: ${allText(p.result)}`);
    const requestId = listed[0]!.requestId;
    for (const e of listed) {
      assert.equal(e.requestId, requestId);
      assert.equal(e.server, "everything");
      assert.equal(e.mode, "form");
      assert.equal(e.message, "Please provide inputs for the following fields:");
    }
    return { ...p, requestId };
  }

  test("form elicitation: listed on promotion, schema via get_elicitations, accept completes the task with the content", async (t) => {
    const c = await pool.open(t);
    const p = await promoteElicitation(c);
    assert.ok(
      pendingAction(p.result)?.elicitations.some((e) => e.requestId === p.requestId),
      "pending_client_action of the promotion response lists the elicitation",
    );

    const el = await onlyElicitation(c, "everything");
    assert.equal(el.requestId, p.requestId);
    assert.equal(el.mode, "form");
    const schema = el.requestedSchema as { type: string; properties: Record<string, { type: string }>; required: string[] };
    assert.equal(schema.type, "object");
    assert.deepEqual(schema.required, ["name"]);
    assert.equal(schema.properties.name?.type, "string");
    assert.equal(schema.properties.integer?.type, "integer");

    const viaTask = await getTask(c, p.taskId);
    assert.equal(viaTask.task.status, "input_required", "the task waits for the elicitation (ADR 0002 §8)");
    assert.deepEqual(
      viaTask.pending_elicitations_for_server.map((e) => e.requestId),
      [p.requestId],
    );

    const answer = await call(c, "respond_to_elicitation", {
      request_id: p.requestId,
      action: "accept",
      content: { name: "Ada Lovelace", check: true, integer: 7 },
    });
    assert.notEqual(answer.isError, true, allText(answer));
    assert.equal(field(answer, "success"), true);

    const task = await waitTerminal(c, p.taskId);
    assert.equal(task.status, "completed");
    const result = await call(c, "get_task_result", { task_id: p.taskId });
    assert.notEqual(result.isError, true, allText(result));
    const text = payloadText(result);
    assert.match(text, /User provided the requested information/);
    assert.match(text, /- Name: Ada Lovelace/);
    assert.match(text, /- Agreed to terms: true/);
    assert.match(text, /- Favorite Integer: 7/);
    assert.deepEqual(await elicitations(c), [], "nothing pending after the answer");
  });

  for (const [action, expected] of [
    ["decline", "❌ User declined to provide the requested information."],
    ["cancel", "⚠️ User cancelled the elicitation dialog."],
  ] as const) {
    test(`form elicitation: ${action} completes the task with server-everything's ${action} text`, async (t) => {
      const c = await pool.open(t);
      const p = await promoteElicitation(c);
      const answer = await call(c, "respond_to_elicitation", { request_id: p.requestId, action });
      assert.notEqual(answer.isError, true, allText(answer));
      const task = await waitTerminal(c, p.taskId);
      assert.equal(task.status, "completed");
      const result = await call(c, "get_task_result", { task_id: p.taskId });
      assert.notEqual(result.isError, true, allText(result));
      const text = payloadText(result);
      assert.ok(text.includes(expected), `result text has ${JSON.stringify(expected)}: ${text}`);
      assert.ok(text.includes(`"action": "${action}"`), "the raw result shows the forwarded action");
      assert.ok(!text.includes("User provided"), "no accepted content");
    });
  }

  test("accept with content that does not match the schema is an error and the elicitation stays answerable", async (t) => {
    const c = await pool.open(t);
    const p = await promoteElicitation(c);

    const wrongType = await call(c, "respond_to_elicitation", { request_id: p.requestId, action: "accept", content: { name: "x", integer: "abc" } });
    assert.equal(wrongType.isError, true, `integer: "abc" must be rejected: ${allText(wrongType)}`);
    assert.equal(errorCodeOf(wrongType), "EMCP_BAD_ARGUMENTS");
    assert.deepEqual(
      pendingAction(wrongType)?.elicitations.map((e) => e.requestId),
      [p.requestId],
      "the error response still lists the elicitation as pending",
    );

    const missingName = await call(c, "respond_to_elicitation", { request_id: p.requestId, action: "accept", content: { check: true } });
    assert.equal(missingName.isError, true, `missing required name must be rejected: ${allText(missingName)}`);
    assert.equal(errorCodeOf(missingName), "EMCP_BAD_ARGUMENTS");

    const noContent = await call(c, "respond_to_elicitation", { request_id: p.requestId, action: "accept" });
    assert.equal(noContent.isError, true, "accept on a form elicitation needs content");

    const contentOnDecline = await call(c, "respond_to_elicitation", { request_id: p.requestId, action: "decline", content: { name: "x" } });
    assert.equal(contentOnDecline.isError, true, "content is only allowed with accept");

    assert.equal((await onlyElicitation(c, "everything")).requestId, p.requestId, "still pending after the bad answers");
    assert.equal((await getTask(c, p.taskId)).task.status, "input_required", "the task still waits for the answer");

    const good = await call(c, "respond_to_elicitation", { request_id: p.requestId, action: "accept", content: { name: "Grace Hopper" } });
    assert.notEqual(good.isError, true, allText(good));
    assert.equal((await waitTerminal(c, p.taskId)).status, "completed");
    const text = payloadText(await call(c, "get_task_result", { task_id: p.taskId }));
    assert.match(text, /- Name: Grace Hopper/);
    assert.doesNotMatch(text, /abc/, "the rejected content never reached the server");

    const again = await call(c, "respond_to_elicitation", { request_id: p.requestId, action: "accept", content: { name: "x" } });
    assert.equal(again.isError, true, "an answered elicitation cannot be answered twice");
    assert.equal(errorCodeOf(again), "EMCP_UNKNOWN_REQUEST");
  });

  test("URL elicitation (trigger-url-elicitation): mode url with the url visible; accept completes it", async (t) => {
    const c = await pool.open(t);
    const url = "https://example.com/x";
    const p = await promote(c, "everything", "trigger-url-elicitation", { url }, 1_000);
    const listed = [...p.pendingOnServer.elicitations_for_server, ...(pendingAction(p.result)?.elicitations ?? [])];
    assert.ok(listed.length > 0, `the promotion response lists the URL elicitation: ${allText(p.result)}`);
    for (const e of listed) {
      assert.equal(e.mode, "url");
      assert.equal(e.url, url);
    }

    const el = await onlyElicitation(c, "everything");
    assert.equal(el.mode, "url");
    assert.equal(el.url, url);
    assert.equal(el.message, "Please open the link to complete this action.");
    assert.equal(typeof el.elicitationId, "string");

    const answer = await call(c, "respond_to_elicitation", { request_id: el.requestId, action: "accept" });
    assert.notEqual(answer.isError, true, allText(answer));
    assert.equal((await waitTerminal(c, p.taskId)).status, "completed");
    const text = payloadText(await call(c, "get_task_result", { task_id: p.taskId }));
    assert.match(text, /User completed the URL elicitation flow/);
    assert.ok(text.includes(`URL: ${url}`), text);
    assert.ok(text.includes(`Elicitation ID: ${String(el.elicitationId)}`), "the upstream's elicitationId is passed through");
  });
});

describe("sampling through tasks (server-everything trigger-sampling-request)", () => {
  test("a pending sampling request shows its messages; respond_to_sampling's text reaches the task result", async (t) => {
    const c = await pool.open(t);
    const ledger = new EventLedger();
    const prompt = "What is the airspeed of an unladen swallow?";
    const p = await promote(c, "everything", "trigger-sampling-request", { prompt, maxTokens: 64 }, 1_000, {}, ledger);

    const req = await eventually("a pending sampling request", async () => {
      const r = await call(c, "get_sampling_requests");
      ledger.record(envelopeEvents(r), "get_sampling_requests");
      const list = field<Array<Record<string, unknown> & { requestId: string; server: string }>>(r, "sampling_requests") ?? [];
      return list[0];
    });
    assert.equal(req.server, "everything");
    assert.equal(req.maxTokens, 64);
    const messages = req.messages as Array<{ role: string; content: { type: string; text: string } }>;
    assert.equal(messages.length, 1);
    assert.equal(messages[0]!.role, "user");
    assert.ok(messages[0]!.content.text.includes(prompt), "the request's message carries the prompt");
    assert.ok(
      ledger.has((e) => e.type === "sampling_request" && e.data.requestId === req.requestId),
      "a sampling_request event was delivered",
    );

    const listedBefore = await call(c, "list_servers");
    assert.deepEqual(
      pendingAction(listedBefore)?.sampling_requests.map((s) => s.requestId),
      [req.requestId],
      "pending_client_action lists the sampling request",
    );

    const answer = await call(c, "respond_to_sampling", { request_id: req.requestId, text: "sampled text 123" });
    assert.notEqual(answer.isError, true, allText(answer));
    assert.equal(pendingAction(answer), undefined, "nothing pending once answered");

    assert.equal((await waitTerminal(c, p.taskId)).status, "completed");
    const result = await call(c, "get_task_result", { task_id: p.taskId });
    assert.notEqual(result.isError, true, allText(result));
    assert.match(payloadText(result), /LLM sampling result/);
    assert.match(payloadText(result), /sampled text 123/);
  });
});

describe("session envelope and await_activity", () => {
  test("exactly once: an event shown in one response never appears in a later one", async (t) => {
    const c = await pool.open(t);
    const ledger = new EventLedger();
    const p = await promote(c, "everything", "trigger-long-running-operation", { duration: 1, steps: 2 }, 100, {}, ledger);
    const created = ledger.all.filter((e) => e.type === "task_created" && e.data.taskId === p.taskId);
    assert.equal(created.length, 1, "task_created delivered in the promotion response");

    // Any tool response after that must not repeat it (the ledger fails on a repeat).
    await ledger.call(c, "list_tasks");
    await ledger.call(c, "get_task", { task_id: p.taskId });
    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "task_completed" && e.data.taskId === p.taskId), 60_000);
    const completed = ledger.all.filter((e) => e.type === "task_completed");
    assert.equal(completed.length, 1);

    // After await_activity delivered task_completed, neither a tool response nor
    // another await_activity shows it again.
    const next = await ledger.call(c, "list_servers");
    assert.deepEqual(envelopeEvents(next), [], "nothing new since await_activity");
    await ledger.call(c, "get_task_result", { task_id: p.taskId });
    const quiet = await ledger.await(c, 300);
    assert.deepEqual(quiet.triggers, [{ type: "timeout" }]);
    assert.deepEqual(quiet.events, []);
  });

  test("await_activity with nothing pending times out with triggers [timeout] and an empty events array", async (t) => {
    const c = await pool.open(t);
    const r = await call(c, "await_activity", { timeout_ms: 300 });
    assert.notEqual(r.isError, true, allText(r));
    const first = r.content[0];
    assert.ok(first && first.type === "text");
    const raw = JSON.parse(first.text) as Record<string, unknown>;
    assert.ok("events" in raw, "events is present, not omitted");
    assert.deepEqual(raw.triggers, [{ type: "timeout" }]);
    assert.deepEqual(raw.events, []);
    assert.deepEqual(raw.pending_server, []);
    assert.deepEqual(raw.pending_client, { elicitations: [], sampling_requests: [] });
    assert.equal(raw.lastEventId, undefined);
  });

  test("await_activity returns at once (trigger immediate) when events are undelivered", async (t) => {
    const c = await pool.open(t);
    // timeout_ms 0 promotes at once; the upstream answers ~200ms later while no call is in flight.
    const q = await promote(c, "slow", "slow", { ms: 200 }, 0);
    assert.ok(
      envelopeEvents(q.result).some((e) => e.type === "task_created"),
      "task_created delivered with the promotion",
    );
    const session = sessionOf(gw, c);
    await eventually("the task to end while no call is in flight", async () => ((await session.tasks.get(q.taskId)).status === "completed" ? true : undefined));
    assert.equal(await session.events.hasNew(), true, "its task_completed event is undelivered");
    const a = await awaitActivity(c, 20_000);
    assert.deepEqual(a.triggers, [{ type: "immediate" }]);
    const events = activityEvents(a);
    assert.ok(
      events.some((e) => e.type === "task_completed" && e.data.taskId === q.taskId),
      JSON.stringify(events),
    );
    assert.equal(a.lastEventId, events.at(-1)!.id);
  });

  test("pending_client_action is in every response while an elicitation is pending and gone after the answer", async (t) => {
    const c = await pool.open(t);
    const ledger = new EventLedger();
    const p = await promote(c, "everything", "trigger-elicitation-request", {}, 1_000, {}, ledger);
    const requestId = (await onlyElicitation(c, "everything")).requestId;
    assert.deepEqual(
      pendingAction(p.result)?.elicitations.map((e) => e.requestId),
      [requestId],
      "in the promotion response",
    );

    const calls: Array<[string, Record<string, unknown>]> = [
      ["list_servers", {}],
      ["list_tasks", {}],
      ["get_task", { task_id: p.taskId }],
      ["get_elicitations", {}],
      ["get_sampling_requests", {}],
      ["get_notifications", {}],
      ["list_tools", { server: "everything" }],
      ["read_resource", { uri: "emceepee://diagrams" }],
      ["get_task_result", { task_id: p.taskId, timeout_ms: 50 }], // an error: still working
      ["get_task", { task_id: "01NOSUCHTASK0000000000000" }], // an error: unknown task
      ["execute_tool", { server: "everything", tool: "echo", args: { message: "hi" } }],
    ];
    for (const [name, args] of calls) {
      const r = await ledger.call(c, name, args);
      const pending = pendingAction(r);
      assert.ok(pending, `${name} response has pending_client_action`);
      assert.deepEqual(
        pending.elicitations.map((e) => [e.requestId, e.server, e.mode]),
        [[requestId, "everything", "form"]],
        `${name} lists the pending elicitation`,
      );
      assert.deepEqual(pending.sampling_requests, []);
    }
    const a = await ledger.await(c, 50);
    assert.deepEqual(
      a.pending_client.elicitations.map((e) => e.requestId),
      [requestId],
      "await_activity shows it in pending_client",
    );

    const answer = await ledger.call(c, "respond_to_elicitation", { request_id: requestId, action: "accept", content: { name: "Alan" } });
    assert.notEqual(answer.isError, true, allText(answer));
    assert.equal(pendingAction(answer), undefined, "the answering response no longer lists it");
    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "task_completed" && e.data.taskId === p.taskId), 30_000);
    const afterwards = await ledger.call(c, "list_servers");
    assert.equal(pendingAction(afterwards), undefined, "no pending_client_action once nothing is pending");
    const quiet = await ledger.await(c, 50);
    assert.deepEqual(quiet.pending_client, { elicitations: [], sampling_requests: [] });
    assert.equal(ledger.all.filter((e) => e.type === "elicitation_request").length, 1, "the elicitation_request event was delivered once");
  });

  test("pending_client_action is also in the error response to a meta-tool call with invalid arguments", async (t) => {
    const c = await pool.open(t);
    const p = await promote(c, "everything", "trigger-elicitation-request", {}, 1_000);
    const requestId = (await onlyElicitation(c, "everything")).requestId;
    for (const [name, args] of [
      ["get_task", {}], // task_id missing
      ["get_task_result", { task_id: p.taskId, timeout_ms: -1 }], // out of range
      ["respond_to_elicitation", { request_id: requestId, action: "maybe" }], // not an action
    ] as const) {
      const r = await call(c, name, args);
      assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} is rejected`);
      assert.deepEqual(
        pendingAction(r)?.elicitations.map((e) => e.requestId),
        [requestId],
        `${name} with invalid arguments still carries pending_client_action (design MF-13: pending client actions are in every tool response): ${allText(r)}`,
      );
    }
    const answer = await call(c, "respond_to_elicitation", { request_id: requestId, action: "cancel" });
    assert.notEqual(answer.isError, true, allText(answer));
    assert.equal((await waitTerminal(c, p.taskId)).status, "completed");
  });

  test("concurrent await_activity waiters all wake on one event, which is delivered once", async (t) => {
    const c = await pool.open(t);
    const session = sessionOf(gw, c);
    const ledger = new EventLedger();
    const waiters = [0, 1, 2].map(() => awaitActivity(c, 30_000));
    await eventually("three await_activity waiters", () => (session.events.waiterCount === 3 ? true : undefined), 30_000, 10);

    const p = await promote(c, "slow", "slow", { ms: 300 }, 0, {}, ledger);
    const woke: Activity[] = await Promise.all(waiters);
    for (const [i, a] of woke.entries()) {
      ledger.record(activityEvents(a), `waiter ${i}`);
      assert.ok(!a.triggers.some((t) => t.type === "timeout"), `waiter ${i} woke on the event, not on its timeout: ${JSON.stringify(a.triggers)}`);
      assert.ok(
        a.triggers.some((t) => t.type === "event" && t.server === "slow" && t.eventType === "task_created"),
        `waiter ${i} reports the task_created trigger: ${JSON.stringify(a.triggers)}`,
      );
    }
    assert.equal(
      ledger.all.filter((e) => e.type === "task_created" && e.data.taskId === p.taskId).length,
      1,
      "task_created reached exactly one of the responses",
    );
    assert.equal(session.events.waiterCount, 0, "no waiter left behind");
    assert.equal((await waitTerminal(c, p.taskId)).status, "completed");
  });
});

describe("task failure, cancellation and expiry (slow-server fixture)", () => {
  // The upstream's process exits mid-call (lifecycle): these two run on the stdio fixture, a process per session.
  // No warm spare: neither case's session takes one (the second session's process starts on its first call; the
  // spare the pool made beside it lived on unused until the gateway closed: ADR 0059).
  let processes: TestGateway;
  const processPool = new ClientPool(() => processes);
  before(async () => {
    processes = await startGateway({ mcpServers: { slow: slowServerStdio() }, gateway: { upstream: { warmPool: 0 } } });
  });
  after(async () => {
    await processPool.closeAll();
    await processes?.close();
  });

  test("killing the upstream fails its working task with a reason and wakes await_activity with server_disconnected", async (t) => {
    const c = await processPool.open(t);
    const ledger = new EventLedger();
    const slow = await promote(c, "slow", "slow", { ms: 60_000 }, 100, {}, ledger);
    // crash exits the upstream 50ms into the call; timeout_ms 0 returns at once.
    const crash = await promote(c, "slow", "crash", {}, 0, {}, ledger);

    const triggers = await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "server_disconnected"), 30_000);
    const disconnected = ledger.all.find((e) => e.type === "server_disconnected");
    assert.ok(disconnected, "a server_disconnected event was delivered");
    if (triggers.some((t) => t.type === "server_disconnected")) {
      assert.ok(
        triggers.some((t) => t.type === "server_disconnected" && t.server === "slow"),
        `server_disconnected trigger names the server: ${JSON.stringify(triggers)}`,
      );
    } else {
      // The disconnect came before the wait began (a loaded machine): await_activity returned it at once (trigger
      // immediate) instead of waking on it; waiting for the trigger then ran out at 30 s.
      assert.equal(ledger.seen.get(disconnected.id)?.where, "await_activity", `delivered by await_activity: ${JSON.stringify(triggers)}`);
    }
    assert.equal(disconnected.server, "slow");
    assert.deepEqual([...(disconnected.data.failedTasks as string[])].sort(), [slow.taskId, crash.taskId].sort());

    for (const id of [slow.taskId, crash.taskId]) {
      const { task } = await getTask(c, id);
      assert.equal(task.status, "failed", `task ${id} failed`);
      assert.match(task.error ?? "", /disconnect/i, `the error says why: ${task.error}`);
      assert.ok(
        ledger.has((e) => e.type === "task_failed" && e.data.taskId === id),
        "task_failed event delivered",
      );
      const r = await call(c, "get_task_result", { task_id: id });
      assert.equal(r.isError, true);
      assert.equal(errorCodeOf(r), "EMCP_TASK_NOT_COMPLETED");
      assert.match(payloadText(r), /failed: .*disconnect/i);
    }

    // The session reconnects on next use.
    const again = await call(c, "execute_tool", { server: "slow", tool: "slow", args: { ms: 1 }, timeout_ms: 30_000 });
    assert.notEqual(again.isError, true, allText(again));
    assert.equal(payloadText(again), "slept 1ms");
  });

  test("an upstream that dies while an elicitation is pending rejects it as server-gone", async (t) => {
    const c = await processPool.open(t);
    const ledger = new EventLedger();
    const p = await promote(c, "slow", "elicit-twice", {}, 1_000, {}, ledger);
    const el = await onlyElicitation(c, "slow");
    await promote(c, "slow", "crash", {}, 0, {}, ledger);
    // The disconnect, however it is delivered: as await_activity's trigger, or in a batch with trigger "immediate" when it
    // came before the wait (a loaded machine; waiting for the trigger then ran out at 30 s).
    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "server_disconnected"), 30_000);

    assert.deepEqual(await elicitations(c), [], "the elicitation is no longer pending");
    assert.equal((await getTask(c, p.taskId)).task.status, "failed");
    const settled = ledger.all.filter((e) => e.data.requestId === el.requestId && e.type !== "elicitation_request");
    assert.deepEqual(
      settled.map((e) => e.type),
      ["elicitation_rejected"],
      `the design's 'pending --> rejected : Final server disconnects'; got ${JSON.stringify(settled)}`,
    );
    const disconnected = ledger.all.find((e) => e.type === "server_disconnected");
    assert.equal(disconnected?.data.rejectedRequests, 1, "server_disconnected counts the rejected elicitation");
  });

  test("cancel_task cancels a working task; its result is EMCP_TASK_NOT_COMPLETED; unknown ids are EMCP_UNKNOWN_TASK", async (t) => {
    const c = await pool.open(t);
    const ledger = new EventLedger();
    const p = await promote(c, "slow", "slow", { ms: 60_000 }, 100, {}, ledger);

    // A get_task_result blocked on the task is woken by the cancellation.
    const blocked = call(c, "get_task_result", { task_id: p.taskId, timeout_ms: 60_000 });
    const cancelled = await ledger.call(c, "cancel_task", { task_id: p.taskId });
    assert.notEqual(cancelled.isError, true, allText(cancelled));
    assert.equal(field(cancelled, "success"), true);

    const woken = await blocked;
    assert.equal(woken.isError, true, allText(woken));
    assert.equal(errorCodeOf(woken), "EMCP_TASK_NOT_COMPLETED", "the blocked get_task_result returns once the task is cancelled");
    ledger.record(envelopeEvents(woken), "get_task_result (blocked)");

    const { task } = await getTask(c, p.taskId);
    assert.equal(task.status, "cancelled");
    const r = await call(c, "get_task_result", { task_id: p.taskId });
    assert.equal(r.isError, true);
    assert.equal(errorCodeOf(r), "EMCP_TASK_NOT_COMPLETED");
    assert.match(payloadText(r), /cancelled/);

    const twice = await call(c, "cancel_task", { task_id: p.taskId });
    assert.notEqual(twice.isError, true);
    assert.equal(field(twice, "success"), false, "an ended task cannot be cancelled again");

    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "task_cancelled" && e.data.taskId === p.taskId), 60_000);
    assert.equal((await getTask(c, p.taskId)).task.status, "cancelled", "the upstream's late answer does not revive it");
    assert.ok((await taskIds(c)).includes(p.taskId), "list_tasks include_completed still shows it");

    for (const [name, args] of [
      ["get_task", { task_id: "01JUNKJUNKJUNKJUNKJUNKJUNK" }],
      ["get_task_result", { task_id: "01JUNKJUNKJUNKJUNKJUNKJUNK" }],
      ["cancel_task", { task_id: "01JUNKJUNKJUNKJUNKJUNKJUNK" }],
    ] as const) {
      const u = await call(c, name, args);
      assert.equal(u.isError, true, `${name} on an unknown id is an error`);
      assert.equal(errorCodeOf(u), "EMCP_UNKNOWN_TASK", `${name}: ${allText(u)}`);
    }
  });

  test("a task whose task_ttl_ms runs out becomes expired", async (t) => {
    const c = await pool.open(t);
    const ledger = new EventLedger();
    const p = await promote(c, "slow", "slow", { ms: 5_000 }, 50, { task_ttl_ms: 300 }, ledger);
    assert.equal(p.task.ttl_ms, 300);

    const triggers = await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "task_expired" && e.data.taskId === p.taskId), 60_000);
    assert.ok(
      triggers.some((t) => t.type === "event" && t.eventType === "task_expired" && t.server === "slow"),
      JSON.stringify(triggers),
    );
    const { task } = await getTask(c, p.taskId);
    assert.equal(task.status, "expired");
    assert.match(task.error ?? "", /TTL/);
    const r = await call(c, "get_task_result", { task_id: p.taskId });
    assert.equal(r.isError, true);
    assert.equal(errorCodeOf(r), "EMCP_TASK_NOT_COMPLETED");
    assert.match(payloadText(r), /expired/);
  });
});

describe("emceepee://diagrams resource", () => {
  function checkDiagrams(text: string) {
    const parsed = JSON.parse(text) as { diagrams: Array<{ name: string; description: string; mermaid: string }> };
    assert.deepEqual(
      parsed.diagrams.map((d) => d.name),
      DIAGRAM_NAMES,
    );
    for (const d of parsed.diagrams) {
      assert.ok(d.description.length > 0, `${d.name} has a description`);
      assert.match(d.mermaid, /^(stateDiagram-v2|flowchart)/, `${d.name} is mermaid source`);
    }
    const byName = new Map(parsed.diagrams.map((d) => [d.name, d.mermaid]));
    assert.match(byName.get("proxy_task_states")!, /working --> expired/);
    assert.match(byName.get("pending_elicitation_states")!, /pending --> rejected/);
    assert.match(byName.get("pending_sampling_states")!, /pending --> completed/);
    assert.match(byName.get("tool_call_lifecycle")!, /in_flight --> promoted_to_task/);
    assert.match(byName.get("entity_relationships")!, /await_activity/);
  }

  test("listed by resources/list and readable by resources/read", async (t) => {
    const c = await pool.open(t);
    const { resources } = await c.listResources();
    const entry = resources.find((r) => r.uri === "emceepee://diagrams");
    assert.ok(entry, `resources/list has emceepee://diagrams: ${JSON.stringify(resources)}`);
    assert.equal(entry.mimeType, "application/json");

    const read = await c.readResource({ uri: "emceepee://diagrams" });
    assert.equal(read.contents.length, 1);
    const content = read.contents[0]!;
    assert.equal(content.uri, "emceepee://diagrams");
    assert.equal(content.mimeType, "application/json");
    assert.ok("text" in content && typeof content.text === "string");
    checkDiagrams(content.text);
  });

  test("readable through the read_resource meta-tool and listed by list_resources", async (t) => {
    const c = await pool.open(t);
    for (const args of [{ uri: "emceepee://diagrams" }, { server: "emceepee", uri: "emceepee://diagrams" }]) {
      const r = await call(c, "read_resource", args);
      assert.notEqual(r.isError, true, allText(r));
      const contents = field<Array<{ uri: string; mimeType: string; text: string }>>(r, "contents");
      assert.ok(contents?.length === 1, allText(r));
      assert.equal(contents[0]!.uri, "emceepee://diagrams");
      assert.equal(contents[0]!.mimeType, "application/json");
      checkDiagrams(contents[0]!.text);
    }
    const unknown = await call(c, "read_resource", { uri: "emceepee://nope" });
    assert.equal(unknown.isError, true);

    const listed = await call(c, "list_resources", { server: "emceepee" });
    const servers = field<Array<{ server: string; resources: Array<{ uri: string }> }>>(listed, "servers");
    assert.ok(
      servers?.[0]?.resources.some((r) => r.uri === "emceepee://diagrams"),
      allText(listed),
    );
  });
});

describe("multi-round elicitation (slow-server elicit-twice)", () => {
  test("both elicitations are answered in turn and the result is 'a,b'", async (t) => {
    const c = await pool.open(t);
    const ledger = new EventLedger();
    const p = await promote(c, "slow", "elicit-twice", {}, 1_000, {}, ledger);

    const first = await onlyElicitation(c, "slow");
    assert.equal(first.message, "first question");
    const r1 = await ledger.call(c, "respond_to_elicitation", { request_id: first.requestId, action: "accept", content: { answer: "a" } });
    assert.notEqual(r1.isError, true, allText(r1));

    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "elicitation_request" && e.data.requestId !== first.requestId), 60_000);
    const second = await onlyElicitation(c, "slow");
    assert.notEqual(second.requestId, first.requestId);
    assert.equal(second.message, "second question");
    assert.equal((await getTask(c, p.taskId)).task.status, "input_required", "the task waits for the second answer");
    const r2 = await ledger.call(c, "respond_to_elicitation", { request_id: second.requestId, action: "accept", content: { answer: "b" } });
    assert.notEqual(r2.isError, true, allText(r2));

    assert.equal((await waitTerminal(c, p.taskId)).status, "completed");
    const result = await call(c, "get_task_result", { task_id: p.taskId });
    assert.notEqual(result.isError, true, allText(result));
    assert.deepEqual(payload(result), [{ type: "text", text: "a,b" }]);
  });
});
