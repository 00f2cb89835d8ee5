/**
 * The public emceepee's other meta tools (issue 26, design MF-22..MF-25), in
 * process against server-everything: timers on a manual clock (fire, wake
 * await_activity, repeat, delete, bound, cleared with the session, no clock
 * timer left), subscribe_resource (updates wake await_activity; unsubscribe
 * stops them), cancel_elicitation_request / cancel_sampling_request (the
 * upstream gets cancel / an error, the queue empties, the call ends), and
 * reconnect_server (a fresh connection; running work fails, state unknown).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { call, connectClient, drainEvents, type TestGateway } from "../helpers/gateway.js";
import {
  activityEvents,
  activityOf,
  allText,
  elicitations,
  envelopeEvents,
  errorCodeOf,
  eventually,
  field,
  promote,
  sessionOf,
  waitTerminal,
} from "../helpers/async-extra.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import { ManualClock } from "../fixtures/manual-clock.js";

interface TimerView {
  id: string;
  timerId: string;
  message: string;
  durationMs: number;
  interval: boolean;
  status: string;
  fireCount: number;
  createdAt: string;
  expiresAt: string;
}

const ok = (r: CallToolResult): CallToolResult => {
  assert.notEqual(r.isError, true, allText(r));
  return r;
};

describe("timers (manual clock)", () => {
  let clock: ManualClock;
  let gw: TestGateway;
  let client: Client;

  before(async () => {
    clock = new ManualClock(Date.now());
    gw = await startInProcessGateway({ gateway: { timers: { maxPerSession: 3 } } }, { clock });
    client = await connectClient(gw.url);
  });

  after(async () => {
    await client.close();
    await gw.close();
  });

  test("set_timer fires a timer_expired event that wakes a waiting await_activity; get/list show it expired", async () => {
    await drainEvents(client);
    const set = ok(await call(client, "set_timer", { duration_ms: 60_000, message: "check the build" }));
    const timer = set.structuredContent as unknown as TimerView;
    assert.equal(timer.status, "active");
    assert.equal(timer.expiresAt, new Date(clock.now() + 60_000).toISOString());
    assert.equal(timer.timerId, timer.id);
    // await_activity waits on the same manual clock: it returns only when the timer's event wakes it.
    const waiting = call(client, "await_activity", { timeout_ms: 600_000 });
    const session = sessionOf(gw, client);
    await eventually("await_activity waiting", () => (session.events.waiterCount > 0 ? true : undefined));
    clock.advance(59_999);
    assert.equal(session.timers.get(timer.id).status, "active");
    clock.advance(1);
    const activity = activityOf(await waiting);
    assert.deepEqual(activity.triggers, [{ type: "event", server: "emceepee", eventType: "timer_expired" }]);
    const [event] = activityEvents(activity);
    assert.equal(event?.type, "timer_expired");
    assert.deepEqual(event?.data, { timerId: timer.id, message: "check the build", fireCount: 1, interval: false });
    const got = ok(await call(client, "get_timer", { timer_id: timer.id })).structuredContent as unknown as TimerView;
    assert.equal(got.status, "expired");
    assert.equal(got.fireCount, 1);
    assert.deepEqual(field(ok(await call(client, "list_timers")), "timers"), []);
    const all = field<TimerView[]>(ok(await call(client, "list_timers", { include_inactive: true })), "timers") ?? [];
    assert.deepEqual(
      all.map((t) => [t.id, t.status]),
      [[timer.id, "expired"]],
    );
  });

  test("an interval timer repeats until delete_timer; then nothing fires and no clock timer is left", async () => {
    await drainEvents(client);
    const session = sessionOf(gw, client);
    const before = clock.pendingTimers;
    const timer = ok(await call(client, "set_timer", { duration_ms: 10_000, message: "tick", interval: true })).structuredContent as unknown as TimerView;
    assert.equal(clock.pendingTimers, before + 1);
    clock.advance(30_000);
    await session.events.flushed();
    const r = ok(await call(client, "get_timer", { timer_id: timer.id }));
    assert.equal((r.structuredContent as unknown as TimerView).fireCount, 3);
    const deleted = ok(await call(client, "delete_timer", { timer_id: timer.id }));
    assert.equal(field(deleted, "deleted"), true);
    assert.equal(clock.pendingTimers, before);
    clock.advance(60_000);
    await session.events.flushed();
    assert.deepEqual(
      envelopeEvents(await call(client, "list_servers")).filter((e) => e.type === "timer_expired"),
      [],
      "no tick after the delete",
    );
    const ended = field<TimerView[]>(ok(await call(client, "list_timers", { include_inactive: true })), "timers")?.find((t) => t.id === timer.id);
    assert.deepEqual([ended?.status, ended?.fireCount], ["deleted", 3]);
    assert.equal(errorCodeOf(await call(client, "delete_timer", { timer_id: timer.id })), "EMCP_UNKNOWN_TIMER");
    assert.equal(errorCodeOf(await call(client, "get_timer", { timer_id: "nope" })), "EMCP_UNKNOWN_TIMER");
  });

  test("bounds: per session, duration range, interval minimum; a closed session leaves no clock timer", async () => {
    const other = await connectClient(gw.url);
    const session = sessionOf(gw, other);
    const before = clock.pendingTimers;
    for (let i = 0; i < 3; i++) ok(await call(other, "set_timer", { duration_ms: 3_600_000, message: `t${i}` }));
    const fourth = await call(other, "set_timer", { duration_ms: 1000, message: "one too many" });
    assert.equal(errorCodeOf(fourth), "EMCP_LIMIT_REACHED");
    assert.match(allText(fourth), /gateway\.timers\.maxPerSession is 3/);
    for (const args of [
      { duration_ms: 0, message: "x" },
      { duration_ms: 86_400_001, message: "x" },
      { duration_ms: 1000, message: "" },
      { duration_ms: 1.5, message: "x" },
      { duration_ms: 1000, message: "x", every: true },
    ]) {
      assert.equal((await call(other, "set_timer", args)).isError, true, JSON.stringify(args));
    }
    assert.match(allText(await call(other, "delete_timer", { timer_id: "x".repeat(101) })), /100/);
    const fast = await call(other, "set_timer", { duration_ms: 999, message: "x", interval: true });
    assert.equal(errorCodeOf(fast), "EMCP_BAD_ARGUMENTS");
    assert.equal(session.timers.running, 3);
    assert.equal(clock.pendingTimers, before + 3);
    await (other.transport as StreamableHTTPClientTransport).terminateSession();
    await other.close();
    await eventually("session closed", () => (session.isClosed ? true : undefined));
    assert.equal(session.timers.running, 0);
    assert.equal(clock.pendingTimers, before, "the session's three clock timers are cleared");
  });
});

describe("subscriptions, cancelling requests, reconnecting", () => {
  let gw: TestGateway;
  let client: Client;

  before(async () => {
    gw = await startInProcessGateway();
    client = await connectClient(gw.url);
  });

  after(async () => {
    await client.close();
    await gw.close();
  });

  test("subscribe_resource: the upstream's resources/updated wakes await_activity; unsubscribe_resource stops it", async () => {
    const resources = field<Array<{ server: string; resources: Array<{ uri: string }> }>>(
      ok(await call(client, "list_resources", { server: "everything" })),
      "servers",
    );
    const uri = resources?.[0]?.resources[0]?.uri;
    assert.ok(uri, "server-everything lists resources");
    const sub = ok(await call(client, "subscribe_resource", { server: "everything", uri }));
    assert.deepEqual(sub.structuredContent, { subscribed: true, server: "everything", uri });
    ok(await call(client, "execute_tool", { server: "everything", tool: "toggle-subscriber-updates", args: {} }));
    await drainEvents(client);
    // server-everything sends an update every 5 s; generous bound for a loaded machine.
    const updated = await eventually(
      "resources/updated event",
      async () => {
        const a = activityOf(await call(client, "await_activity", { timeout_ms: 10_000 }));
        return activityEvents(a).find((e) => e.type === "notification" && (e.data as { method?: string }).method === "notifications/resources/updated");
      },
      60_000,
    );
    assert.equal((updated.data as { params?: { uri?: string } }).params?.uri, uri);
    ok(await call(client, "unsubscribe_resource", { server: "everything", uri }));
    ok(await call(client, "execute_tool", { server: "everything", tool: "toggle-subscriber-updates", args: {} }));
    assert.equal(errorCodeOf(await call(client, "subscribe_resource", { server: "nope", uri })), "EMCP_UNKNOWN_SERVER");
  });

  test("cancel_elicitation_request: the server gets action cancel, the request leaves the queue, the call ends", async () => {
    await drainEvents(client);
    const { taskId } = await promote(client, "everything", "trigger-elicitation-request", {}, 50);
    const [pending] = await eventually("an elicitation", async () => {
      const list = await elicitations(client, "everything");
      return list.length ? list : undefined;
    });
    const r = ok(await call(client, "cancel_elicitation_request", { request_id: pending!.requestId, reason: "not now" }));
    assert.equal(field(r, "action"), "cancel");
    assert.deepEqual(await elicitations(client), []);
    const task = await waitTerminal(client, taskId);
    assert.equal(task.status, "completed");
    const result = await call(client, "get_task_result", { task_id: taskId });
    assert.match(allText(result), /cancel/i, "the tool saw the cancel action");
    assert.equal(errorCodeOf(await call(client, "cancel_elicitation_request", { request_id: pending!.requestId })), "EMCP_UNKNOWN_REQUEST");
  });

  test("cancel_sampling_request: the server gets an error with the reason; the request leaves the queue", async () => {
    await drainEvents(client);
    const { taskId } = await promote(client, "everything", "trigger-sampling-request", { prompt: "loop?", maxTokens: 10 }, 50);
    const requestId = await eventually("a sampling request", async () => {
      const list = field<Array<{ requestId: string }>>(ok(await call(client, "get_sampling_requests")), "sampling_requests") ?? [];
      return list[0]?.requestId;
    });
    ok(await call(client, "cancel_sampling_request", { request_id: requestId, reason: "looks like a loop" }));
    assert.deepEqual(field(ok(await call(client, "get_sampling_requests")), "sampling_requests"), []);
    await waitTerminal(client, taskId);
    const result = await call(client, "get_task_result", { task_id: taskId });
    assert.match(allText(result), /looks like a loop/);
    assert.equal(errorCodeOf(await call(client, "cancel_sampling_request", { request_id: requestId })), "EMCP_UNKNOWN_REQUEST");
  });

  test("reconnect_server: a fresh connection; a call still running on the old one fails with state unknown", async () => {
    const session = sessionOf(gw, client);
    const old = await session.connection("everything");
    const { taskId } = await promote(client, "everything", "trigger-long-running-operation", { duration: 30, steps: 3 }, 50);
    const r = ok(await call(client, "reconnect_server", { name: "everything" }));
    assert.equal(field(r, "status"), "connected");
    assert.equal(field(r, "previous_status"), "connected");
    const now = await session.connection("everything");
    assert.notEqual(now, old, "a new connection");
    assert.equal(old.status, "closed");
    const task = await waitTerminal(client, taskId);
    assert.equal(task.status, "failed");
    assert.match(task.error ?? task.status_message ?? "", /reconnect/);
    ok(await call(client, "execute_tool", { server: "everything", tool: "echo", args: { message: "still here" } }));
    assert.equal(errorCodeOf(await call(client, "reconnect_server", { name: "nope" })), "EMCP_UNKNOWN_SERVER");
  });
});
