/**
 * Receiver tasks (seed 001): when an upstream sends a task-augmented
 * `sampling/createMessage` or `elicitation/create`, the gateway — the client
 * of that upstream — answers with a task at once and serves the upstream's
 * `tasks/get|result|list|cancel` from this store while the request waits for
 * the downstream client. It implements the SDK's TaskStore (the SDK's
 * Protocol answers the task requests and sends notifications/tasks/status)
 * over the gateway's TaskRecordStore, scoped to one session and one upstream.
 * Each task has one TTL timer; at expiry its forwarded request is aborted and
 * the record deleted. close() clears everything.
 *
 * The SDK answers the upstream with whatever these methods throw, so their
 * GatewayErrors go through the one JSON-RPC boundary (`rpc()`) first.
 */
import type { TaskStore, CreateTaskOptions } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js";
import { ErrorCode, type Request, type RequestId, type Result, type Task } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../errors.js";
import type { ProxyTaskRecord, TaskRecordStore } from "../store/task-store.js";
import { toMcpTask } from "./mcp-task.js";

export interface ReceiverTaskOptions {
  sessionId: string;
  server: string;
  store: TaskRecordStore;
  clock: Clock;
  newId: IdGenerator;
  /** TTL when the upstream asks for none, and the cap on what it asks. */
  defaultTtlMs: number;
  maxTtlMs: number;
  /** Live receiver tasks this upstream may hold at once (beyond it, the request is refused). @default gateway.tasks.maxTasksPerSession */
  maxLive?: number | undefined;
}

interface Runtime {
  ttlTimer: TimerHandle;
  abort: AbortController;
}

const PAGE_SIZE = 100;

export class ReceiverTaskStore implements TaskStore {
  private readonly runtime = new Map<string, Runtime>();

  constructor(private readonly o: ReceiverTaskOptions) {}

  /** Aborted when the task is cancelled, expires or the store closes. */
  signalFor(taskId: string): AbortSignal {
    const rt = this.runtime.get(taskId);
    if (!rt) return AbortSignal.abort("task no longer exists");
    return rt.abort.signal;
  }

  async createTask(params: CreateTaskOptions, _requestId: RequestId, request: Request): Promise<Task> {
    return rpc(() => this.create(params, request));
  }

  private create(params: CreateTaskOptions, request: Request): Task {
    const max = this.o.maxLive ?? DEFAULT_SETTINGS.tasks.maxTasksPerSession;
    const live = [...this.runtime.keys()].filter((id) => {
      const r = this.o.store.get(id);
      return r !== undefined && !isDone(r);
    }).length;
    if (live >= max) {
      throw new GatewayError(ErrorCodes.LIMIT_REACHED, `this client already holds ${max} tasks for '${this.o.server}'; wait for some to end`, {
        details: { server: this.o.server, max },
        rpcCode: ErrorCode.InvalidRequest,
      });
    }
    const now = this.o.clock.now();
    const ttlMs = Math.min(params.ttl ?? this.o.defaultTtlMs, this.o.maxTtlMs);
    const record: ProxyTaskRecord = {
      taskId: this.o.newId(),
      sessionId: this.o.sessionId,
      kind: "receiver",
      server: this.o.server,
      toolName: request.method,
      toolArgs: {},
      // Tasks start `working` (spec); `input_required` would mean the gateway needs input from the upstream.
      status: "working",
      statusMessage: "waiting for the gateway's client to answer",
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs,
      expiresAt: now + ttlMs,
      ...(params.pollInterval !== undefined ? { pollIntervalMs: params.pollInterval } : {}),
    };
    this.o.store.put(record);
    this.runtime.set(record.taskId, {
      ttlTimer: this.o.clock.setTimeout(() => this.expire(record.taskId), ttlMs),
      abort: new AbortController(),
    });
    return toMcpTask(record);
  }

  async getTask(taskId: string): Promise<Task | null> {
    const record = this.find(taskId);
    return record ? toMcpTask(record) : null;
  }

  async storeTaskResult(taskId: string, status: "completed" | "failed", result: Result): Promise<void> {
    return rpc(() => {
      const record = this.requireWorking(taskId);
      const { statusMessage: _waiting, ...rest } = record;
      this.o.store.put({ ...rest, status, result: result, lastUpdatedAt: this.o.clock.now() });
    });
  }

  async getTaskResult(taskId: string): Promise<Result> {
    return rpc(() => {
      const record = this.require(taskId);
      if (record.result) return record.result;
      throw new GatewayError(ErrorCodes.TASK_NOT_COMPLETED, `task ${taskId} ${record.status}: ${record.statusMessage ?? "it has no result"}`, {
        details: { taskId, status: record.status },
      });
    });
  }

  async updateTaskStatus(taskId: string, status: Task["status"], statusMessage?: string): Promise<void> {
    return rpc(() => this.update(taskId, status, statusMessage));
  }

  private update(taskId: string, status: Task["status"], statusMessage: string | undefined): void {
    const record = this.requireWorking(taskId);
    this.o.store.put({
      ...record,
      status,
      lastUpdatedAt: this.o.clock.now(),
      ...(statusMessage !== undefined ? { statusMessage } : {}),
    });
    if (status === "cancelled" || status === "failed") this.runtime.get(taskId)?.abort.abort(statusMessage ?? `task ${status}`);
  }

  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const all = this.o.store.listBySession(this.o.sessionId).filter((r) => r.kind === "receiver" && r.server === this.o.server);
    const start = cursor ? all.findIndex((r) => r.taskId > cursor) : 0;
    if (cursor && start < 0) return { tasks: [] };
    const page = all.slice(start, start + PAGE_SIZE);
    const next = start + PAGE_SIZE < all.length ? page.at(-1)?.taskId : undefined;
    return { tasks: page.map(toMcpTask), ...(next ? { nextCursor: next } : {}) };
  }

  /** Live receiver tasks (for tests and list_servers). */
  get size(): number {
    return this.runtime.size;
  }

  close(): void {
    for (const taskId of [...this.runtime.keys()]) this.forget(taskId, "the session closed");
  }

  private expire(taskId: string): void {
    this.forget(taskId, "task expired: its TTL ran out before the client answered");
  }

  private forget(taskId: string, reason: string): void {
    const rt = this.runtime.get(taskId);
    if (rt) {
      this.o.clock.clearTimeout(rt.ttlTimer);
      rt.abort.abort(reason);
    }
    this.runtime.delete(taskId);
    this.o.store.delete(taskId);
  }

  private find(taskId: string): ProxyTaskRecord | undefined {
    const r = this.o.store.get(taskId);
    return r && r.sessionId === this.o.sessionId && r.kind === "receiver" && r.server === this.o.server ? r : undefined;
  }

  private require(taskId: string): ProxyTaskRecord {
    const r = this.find(taskId);
    // The SDK's own wording for an unknown task (spec: -32602).
    if (!r) throw new GatewayError(ErrorCodes.UNKNOWN_TASK, `Task not found: ${taskId}`, { details: { taskId } });
    return r;
  }

  private requireWorking(taskId: string): ProxyTaskRecord {
    const r = this.require(taskId);
    if (isDone(r)) throw new GatewayError(ErrorCodes.TASK_ENDED, `task ${taskId} already ended (${r.status})`, { details: { taskId, status: r.status } });
    return r;
  }
}

/** Runs a store operation for the SDK: what it throws leaves as a JSON-RPC error (the one boundary). */
function rpc<T>(operation: () => T): Promise<T> {
  try {
    return Promise.resolve(operation());
  } catch (err) {
    return Promise.reject(toJsonRpcError(err));
  }
}

function isDone(r: ProxyTaskRecord): boolean {
  return r.status === "completed" || r.status === "failed" || r.status === "cancelled" || r.status === "expired";
}
