/**
 * Helpers for the MCP tasks integration tests: clients that record every
 * message the gateway sends them (to check which task ids they ever saw), a
 * task store that remembers every gateway and upstream task id, thin wrappers
 * over the tasks/* requests, and a client connected straight to
 * server-everything for side-by-side comparison.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { CallToolResultSchema, CreateTaskResultSchema, McpError, type CallToolResult, type Task } from "@modelcontextprotocol/sdk/types.js";
import { systemClock } from "../../src/clock.js";
import type { Store, TaskRecord, TaskStore, TaskTransition } from "../../src/store/contracts.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import type { Session } from "../../src/session/session.js";
import type { TestGateway } from "./gateway.js";
import { connectDirect as connectTransparentDirect, connectFace as connectTransparentFace, type Peer, type PeerOptions } from "./transparent.js";

/** Generous per-request timeout: the research tool takes ~4 s, receiver tasks poll every second. */
export const LONG = { timeout: 60_000 };

export type { Peer, PeerOptions, WireMessage } from "./transparent.js";

/**
 * A memory store whose task store remembers every gateway task id and every
 * upstream task id it was given. Inject `bundle` (`{ store: recording.bundle }`).
 */
export class RecordingTaskStore implements TaskStore {
  readonly gatewayIds = new Set<string>();
  readonly upstreamIds = new Set<string>();
  /** The whole store to inject into a gateway, with this as its task store. */
  readonly bundle: Store;
  private readonly inner: TaskStore;

  constructor() {
    const memory = createMemoryStore(systemClock);
    this.inner = memory.tasks;
    this.bundle = { ...memory, tasks: this };
  }

  private note(record: { taskId: string; upstreamTaskId?: string }): void {
    this.gatewayIds.add(record.taskId);
    if (record.upstreamTaskId !== undefined) this.upstreamIds.add(record.upstreamTaskId);
  }

  create(record: TaskRecord): Promise<void> {
    this.note(record);
    return this.inner.create(record);
  }

  async transition(taskId: string, change: TaskTransition): Promise<TaskRecord | undefined> {
    const r = await this.inner.transition(taskId, change);
    if (r) this.note(r);
    return r;
  }

  async patch(...args: Parameters<TaskStore["patch"]>): Promise<TaskRecord | undefined> {
    const r = await this.inner.patch(...args);
    if (r) this.note(r);
    return r;
  }

  get(taskId: string) {
    return this.inner.get(taskId);
  }
  delete(taskId: string) {
    return this.inner.delete(taskId);
  }
  listBySession(...args: Parameters<TaskStore["listBySession"]>) {
    return this.inner.listBySession(...args);
  }
  findByUpstreamTask(...args: Parameters<TaskStore["findByUpstreamTask"]>) {
    return this.inner.findByUpstreamTask(...args);
  }
  listWorking() {
    return this.inner.listWorking();
  }
  deleteExpired(now: number) {
    return this.inner.deleteExpired(now);
  }
  enforceRetention(...args: Parameters<TaskStore["enforceRetention"]>) {
    return this.inner.enforceRetention(...args);
  }
  deleteBySession(sessionId: string) {
    return this.inner.deleteBySession(sessionId);
  }
}

/**
 * The recording peer of the transparent-face tests, declaring no client
 * capabilities unless asked (the task tests opt in per case).
 */
export function connectFace(url: string, options: PeerOptions = {}): Promise<Peer> {
  return connectTransparentFace(url, { name: "tasks-test", capabilities: {}, ...options });
}

/** A peer connected straight to a fresh server-everything over stdio. */
export function connectDirect(options: PeerOptions = {}): Promise<Peer> {
  return connectTransparentDirect({ capabilities: {}, ...options });
}

/** The gateway session behind a peer (white-box). */
export function sessionOf(gw: TestGateway, peer: Peer): Session {
  const session = gw.gateway.context.sessions.get(peer.sessionId);
  if (!session) throw new Error(`the gateway has no session ${peer.sessionId}`);
  return session;
}

/** The upstream task id the gateway keeps for one of its tasks (never shown downstream). */
export async function upstreamIdOf(gw: TestGateway, peer: Peer, taskId: string): Promise<string | undefined> {
  return (await sessionOf(gw, peer).tasks.get(taskId)).upstreamTaskId;
}

// ---------------------------------------------------------------------------
// tasks/* requests

/** A task-augmented tools/call: the CreateTaskResult's task. */
export async function startTask(client: Client, name: string, args: Record<string, unknown>, ttl = 60_000): Promise<Task> {
  const created = await client.request({ method: "tools/call", params: { name, arguments: args } }, CreateTaskResultSchema, { task: { ttl }, ...LONG });
  return created.task;
}

export function getTask(client: Client, taskId: string): Promise<Task> {
  return client.experimental.tasks.getTask(taskId, LONG);
}

export async function taskResult(client: Client, taskId: string): Promise<CallToolResult> {
  return client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, LONG);
}

/** Polls tasks/get until `done` holds; returns every status seen (the last one satisfies `done`). */
export async function pollTask(client: Client, taskId: string, done: (t: Task) => boolean, what: string, timeoutMs = 30_000): Promise<Task[]> {
  const seen: Task[] = [];
  const end = Date.now() + timeoutMs;
  for (;;) {
    const t = await getTask(client, taskId);
    seen.push(t);
    if (done(t)) return seen;
    if (Date.now() > end) throw new Error(`task ${taskId} never became ${what}; statuses: ${JSON.stringify(seen.map((s) => [s.status, s.statusMessage]))}`);
    await sleep(150);
  }
}

export const isTerminalTask = (t: Task): boolean => t.status === "completed" || t.status === "failed" || t.status === "cancelled";

/** The JSON-RPC error a request failed with (fails the test if it succeeded). */
export async function rpcError(request: Promise<unknown>): Promise<McpError> {
  let value: unknown;
  try {
    value = await request;
  } catch (err) {
    if (err instanceof McpError) return err;
    throw err;
  }
  throw new Error(`expected a JSON-RPC error, got ${JSON.stringify(value)}`);
}

// ---------------------------------------------------------------------------
// misc

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Resolves with the first non-undefined value of `probe`, polled. */
export async function waitFor<T>(probe: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await sleep(100);
  }
}

/** The text blocks of a tool result, joined. */
export function text(result: CallToolResult): string {
  return result.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join("\n");
}

/** A result without its `_meta` (where the spec requires related-task metadata). */
export function withoutMeta(result: CallToolResult): Omit<CallToolResult, "_meta"> {
  const { _meta: _dropped, ...rest } = result;
  return rest;
}

/** The final result of a task-augmented call driven by the SDK's own callToolStream. */
export async function streamedResult(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task: { ttl: 60_000 }, ...LONG });
  for await (const message of stream) {
    if (message.type === "result") return message.result;
    if (message.type === "error") throw message.error;
  }
  throw new Error(`callToolStream(${name}) ended without a result`);
}
