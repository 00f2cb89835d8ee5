/**
 * Helpers for the async meta-tool integration tests (tasks, elicitations,
 * sampling, await_activity). Built on test/helpers/gateway.ts; everything
 * here is black-box except sessionOf(), which reads the gateway's own session
 * object to synchronise on "N await_activity calls are now waiting".
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Session } from "../../src/session/session.js";
import { blocks, call, connectClient, drainEvents, everythingStdio, slowServerStdio, startGateway, waitConnected, type TestGateway } from "./gateway.js";

export interface WireEvent {
  id: string;
  type: string;
  server: string;
  created_at?: string;
  data: Record<string, unknown>;
}

export interface Trigger {
  type: string;
  server?: string;
  eventType?: string;
}

export interface Activity {
  triggers: Trigger[];
  events: Array<{ server: string; events: WireEvent[] }>;
  pending_server: Array<{ server: string; working_tasks: Array<{ taskId: string; toolName: string; status: string }> }>;
  pending_client: {
    elicitations: Array<{ requestId: string; server: string; message: string }>;
    sampling_requests: Array<{ requestId: string; server: string }>;
  };
  lastEventId?: string;
}

export interface PendingClientAction {
  elicitations: Array<{ requestId: string; server: string; mode: string; message: string; url?: string; expires_at?: string }>;
  sampling_requests: Array<{ requestId: string; server: string; expires_at?: string }>;
}

export interface TaskView {
  task_id: string;
  status: string;
  server: string;
  tool: string;
  created_at?: string;
  last_updated_at?: string;
  ttl_ms?: number;
  expires_at?: string;
  status_message?: string;
  error?: string;
}

/** A gateway with the real server-everything plus the slow-server fixture. */
export function startAsyncGateway(): Promise<TestGateway> {
  return startGateway({ mcpServers: { everything: everythingStdio(), slow: slowServerStdio() } });
}

/** Tracks clients so the suite can close every one of them in after(). */
export class ClientPool {
  private readonly clients = new Set<Client>();

  constructor(private readonly gw: () => TestGateway) {}

  /**
   * A new session with every configured server connected (waitConnected uses
   * each: upstreams connect on first use) and the connect-time events drained, so that a test
   * starts with nothing undelivered.
   */
  async open(t?: { after(fn: () => Promise<void>): void }): Promise<Client> {
    const client = await connectClient(this.gw().url, { name: "meta-async-test" });
    this.clients.add(client);
    t?.after(() => this.close(client));
    for (const s of this.gw().gateway.context.registry.names()) await waitConnected(client, s, 60_000);
    // One round trip to each upstream: notifications it sent on initialization
    // (e.g. tools/list_changed) are handled before its answer arrives.
    const tools = await call(client, "list_tools");
    assert.notEqual(tools.isError, true, "list_tools failed while opening a session");
    await drainEvents(client);
    return client;
  }

  /** Ends the session (DELETE, so the gateway frees its upstreams) and closes the client. */
  async close(client: Client): Promise<void> {
    if (!this.clients.delete(client)) return;
    await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
    await client.close().catch(() => undefined);
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.clients].map((c) => this.close(c)));
  }
}

/** The gateway's Session object behind a client (white-box, for synchronisation only). */
export function sessionOf(gw: TestGateway, client: Client): Session {
  const id = (client.transport as StreamableHTTPClientTransport | undefined)?.sessionId;
  assert.ok(id, "client has no Mcp-Session-Id");
  const session = gw.gateway.context.sessions.get(id);
  assert.ok(session, `gateway has no session ${id}`);
  return session;
}

function isEnvelopeBlock(b: unknown): boolean {
  return !!b && typeof b === "object" && ("events_since_last_response" in b || "pending_client_action" in b);
}

/** The result's own content, without the session envelope blocks. */
export function payload(result: CallToolResult): CallToolResult["content"] {
  const parsed = blocks(result);
  return result.content.filter((_, i) => !isEnvelopeBlock(parsed[i]));
}

/** All text of the result's own content (envelope excluded). */
export function payloadText(result: CallToolResult): string {
  return payload(result)
    .map((c) => (c.type === "text" ? c.text : ""))
    .join("\n");
}

/** All text of the whole result, envelope included. */
export function allText(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

/** The first JSON object of the result's own content that has `key`. */
export function field<T>(result: CallToolResult, key: string): T | undefined {
  for (const b of blocks({ ...result, content: payload(result) })) {
    if (b && typeof b === "object" && key in b) return (b as Record<string, T>)[key];
  }
  return undefined;
}

/** The envelope's events_since_last_response ([] when the block is absent). */
export function envelopeEvents(result: CallToolResult): WireEvent[] {
  const found = blocks(result).filter(
    (b): b is { events_since_last_response: WireEvent[] } => !!b && typeof b === "object" && "events_since_last_response" in b,
  );
  assert.ok(found.length <= 1, "more than one events_since_last_response block");
  return found[0]?.events_since_last_response ?? [];
}

/** The envelope's pending_client_action, or undefined when the block is absent. */
export function pendingAction(result: CallToolResult): PendingClientAction | undefined {
  const found = blocks(result).filter((b): b is { pending_client_action: PendingClientAction } => !!b && typeof b === "object" && "pending_client_action" in b);
  assert.ok(found.length <= 1, "more than one pending_client_action block");
  return found[0]?.pending_client_action;
}

/** Parses an await_activity result (one JSON block, no envelope). */
export function activityOf(result: CallToolResult): Activity {
  assert.notEqual(result.isError, true, `await_activity failed: ${allText(result)}`);
  const parsed = blocks(result);
  assert.equal(parsed.length, 1, "await_activity returns exactly one block");
  const a = parsed[0] as Activity;
  assert.ok(Array.isArray(a.triggers), "triggers is an array");
  assert.ok(Array.isArray(a.events), "events is an array (present, not omitted)");
  return a;
}

export function activityEvents(a: Activity): WireEvent[] {
  return a.events.flatMap((g) => {
    for (const e of g.events) assert.equal(e.server, g.server, "events are grouped by their server");
    return g.events;
  });
}

export async function awaitActivity(client: Client, timeoutMs: number): Promise<Activity> {
  return activityOf(await call(client, "await_activity", { timeout_ms: timeoutMs }));
}

/**
 * Records the id of every event seen in any response and fails on the second
 * sighting of an id (exactly-once delivery).
 */
export class EventLedger {
  readonly seen = new Map<string, { type: string; where: string }>();
  readonly all: WireEvent[] = [];

  record(events: WireEvent[], where: string): WireEvent[] {
    for (const e of events) {
      const prev = this.seen.get(e.id);
      assert.equal(prev, undefined, `event ${e.id} (${e.type}) delivered twice: first in ${prev?.where}, again in ${where}`);
      this.seen.set(e.id, { type: e.type, where });
      this.all.push(e);
    }
    return events;
  }

  /** Calls a meta-tool and records the envelope's events. */
  async call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
    const result = await call(client, name, args);
    this.record(envelopeEvents(result), name);
    return result;
  }

  async await(client: Client, timeoutMs: number): Promise<Activity> {
    const a = await awaitActivity(client, timeoutMs);
    this.record(activityEvents(a), "await_activity");
    return a;
  }

  has(pred: (e: WireEvent) => boolean): boolean {
    return this.all.some(pred);
  }
}

/**
 * Calls await_activity repeatedly until `done(ledger)` holds, collecting every
 * trigger; fails after `deadlineMs`. Each wait is capped at the remaining time.
 */
export async function awaitUntil(
  client: Client,
  ledger: EventLedger,
  done: (ledger: EventLedger, triggers: Trigger[]) => boolean,
  deadlineMs = 30_000,
): Promise<Trigger[]> {
  const end = Date.now() + deadlineMs;
  const triggers: Trigger[] = [];
  while (!done(ledger, triggers)) {
    const left = end - Date.now();
    assert.ok(
      left > 0,
      `condition not met within ${deadlineMs}ms; triggers so far: ${JSON.stringify(triggers)}; events: ${JSON.stringify(ledger.all.map((e) => `${e.server}:${e.type}`))}`,
    );
    const a = await ledger.await(client, Math.min(left, 10_000));
    triggers.push(...a.triggers);
  }
  return triggers;
}

export interface Promoted {
  taskId: string;
  result: CallToolResult;
  task: TaskView;
  pendingOnServer: { tasks: TaskView[]; elicitations_for_server: PendingClientAction["elicitations"] };
}

/** execute_tool that must be promoted to a task; checks the response shape. */
export async function promote(
  client: Client,
  server: string,
  tool: string,
  args: Record<string, unknown>,
  timeoutMs: number,
  extra: Record<string, unknown> = {},
  ledger?: EventLedger,
): Promise<Promoted> {
  const result = ledger
    ? await ledger.call(client, "execute_tool", { server, tool, args, timeout_ms: timeoutMs, ...extra })
    : await call(client, "execute_tool", { server, tool, args, timeout_ms: timeoutMs, ...extra });
  assert.notEqual(result.isError, true, `execute_tool failed: ${allText(result)}`);
  const first = result.content[0];
  assert.ok(first && first.type === "text", "first block is text");
  assert.match(first.text, /timeout/i, "first block is a human summary of the promotion");
  assert.throws(() => JSON.parse(first.text), "the summary block is prose, not JSON");
  const task = field<TaskView>(result, "proxy_task");
  assert.ok(task, `no proxy_task block in ${allText(result)}`);
  const pendingOnServer = field<Promoted["pendingOnServer"]>(result, "pending_on_server");
  assert.ok(pendingOnServer, "no pending_on_server block");
  assert.ok(Array.isArray(pendingOnServer.tasks), "pending_on_server.tasks is an array");
  assert.ok(Array.isArray(pendingOnServer.elicitations_for_server), "pending_on_server.elicitations_for_server is an array");
  assert.equal(typeof task.task_id, "string");
  // input_required when the call already waits for an elicitation or sampling request (ADR 0002 §8).
  assert.ok(task.status === "working" || task.status === "input_required", `a promoted task is running, not ${task.status}`);
  assert.equal(task.server, server);
  assert.equal(task.tool, tool);
  assert.ok(first.text.includes(task.task_id), "the summary names the task id");
  return { taskId: task.task_id, result, task, pendingOnServer };
}

export async function getTask(
  client: Client,
  taskId: string,
  ledger?: EventLedger,
): Promise<{ task: TaskView; pending_elicitations_for_server: PendingClientAction["elicitations"] }> {
  const r = ledger ? await ledger.call(client, "get_task", { task_id: taskId }) : await call(client, "get_task", { task_id: taskId });
  assert.notEqual(r.isError, true, `get_task failed: ${allText(r)}`);
  const task = field<TaskView>(r, "task");
  const pending = field<PendingClientAction["elicitations"]>(r, "pending_elicitations_for_server");
  assert.ok(task && pending, `bad get_task response: ${allText(r)}`);
  return { task, pending_elicitations_for_server: pending };
}

/**
 * Waits until the task reaches a terminal status (via get_task_result's blocking wait) and returns its view. With `ledger`,
 * the events in these calls' envelopes are recorded there (without, they are drained unseen).
 */
export async function waitTerminal(client: Client, taskId: string, timeoutMs = 30_000, ledger?: EventLedger): Promise<TaskView> {
  const args = { task_id: taskId, timeout_ms: timeoutMs };
  if (ledger) await ledger.call(client, "get_task_result", args);
  else await call(client, "get_task_result", args);
  const { task } = await getTask(client, taskId, ledger);
  assert.ok(task.status !== "working" && task.status !== "input_required", `task ${taskId} still ${task.status} after ${timeoutMs}ms`);
  return task;
}

/** Polls until `check` returns a value (not undefined); fails after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000, everyMs = 25): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) assert.fail(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The pending elicitations of a session, from get_elicitations. */
export async function elicitations(
  client: Client,
  server?: string,
): Promise<Array<Record<string, unknown> & { requestId: string; server: string; mode: string }>> {
  const r = await call(client, "get_elicitations", server ? { server } : {});
  assert.notEqual(r.isError, true, allText(r));
  const list = field<Array<Record<string, unknown> & { requestId: string; server: string; mode: string }>>(r, "elicitations");
  assert.ok(list, "no elicitations field");
  return list;
}

export function errorCodeOf(result: CallToolResult): string | undefined {
  return /\b(EMCP_[A-Z_]+)\b/.exec(payloadText(result))?.[1];
}
