/**
 * Receiver tasks (design TK-17): the SDK TaskStore from which an upstream
 * connection serves its task-augmented sampling/elicitation requests, over the
 * gateway's durable TaskStore. See docs/design/tasks.md, "How the code keeps it".
 */
import type { GatewaySettings } from "../config/schema.js";
import type { TaskStore as SdkTaskStore, CreateTaskOptions } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js";
import { ErrorCode, type Request, type RequestId, type Result, type Task } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage, toJsonRpcError } from "../errors.js";
import type { Logger } from "../logging.js";
import type { TaskRecord, TaskStore } from "../store/contracts.js";
import { ACTIVE_STATUSES, isActive } from "../store/policy.js";
import { toMcpTask } from "../mcp/task-object.js";

export interface ReceiverTaskOptions {
  sessionId: string;
  server: string;
  store: TaskStore;
  clock: Clock;
  newId: IdGenerator;
  /** TTL when the upstream asks for none, and the cap on what it asks. */
  defaultTtlMs: number;
  maxTtlMs: number;
  /** Live receiver tasks this upstream may hold at once (beyond it, the request is refused). @default gateway.tasks.maxTasksPerSession */
  maxLive?: number | undefined;
  /** Ended receiver tasks the session keeps (the oldest rows go first beyond it). @default gateway.tasks.maxRetainedPerSession */
  maxRetained?: number | undefined;
  /** Bytes of ended receiver tasks' results the session keeps (oldest first beyond it). @default gateway.tasks.maxRetainedResultBytes */
  maxRetainedBytes?: number | undefined;
  /** Where failed background deletes are reported. */
  logger?: Logger | undefined;
}

/** The options of one connection's receiver tasks, from the gateway's task settings. */
export function receiverTaskOptions(
  tasks: GatewaySettings["tasks"],
  scope: Pick<ReceiverTaskOptions, "sessionId" | "server" | "store" | "clock" | "newId" | "logger">,
): ReceiverTaskOptions {
  return {
    ...scope,
    defaultTtlMs: tasks.defaultTtlMs,
    maxTtlMs: tasks.maxTtlMs,
    maxLive: tasks.maxTasksPerSession,
    maxRetained: tasks.maxRetainedPerSession,
    maxRetainedBytes: tasks.maxRetainedResultBytes,
  };
}

interface Runtime {
  ttlTimer: TimerHandle;
  abort: AbortController;
  /** Not ended yet (counts toward maxLive). */
  live: boolean;
}

const PAGE_SIZE = 100;

export class ReceiverTaskStore implements SdkTaskStore {
  private readonly runtime = new Map<string, Runtime>();
  /** Deletes in flight (expiry), awaited by close(). */
  private readonly deletes = new Set<Promise<void>>();

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

  private async create(params: CreateTaskOptions, request: Request): Promise<Task> {
    const max = this.o.maxLive ?? DEFAULT_SETTINGS.tasks.maxTasksPerSession;
    const live = [...this.runtime.values()].filter((rt) => rt.live).length;
    if (live >= max) {
      throw new GatewayError(ErrorCodes.LIMIT_REACHED, `this client already holds ${max} tasks for '${this.o.server}'; wait for some to end`, {
        details: { server: this.o.server, max },
        rpcCode: ErrorCode.InvalidRequest,
      });
    }
    const now = this.o.clock.now();
    const ttlMs = Math.min(params.ttl ?? this.o.defaultTtlMs, this.o.maxTtlMs);
    const record: TaskRecord = {
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
      retainUntil: now + ttlMs,
      ...(params.pollInterval !== undefined ? { pollIntervalMs: params.pollInterval } : {}),
    };
    // Counted at once, so concurrent creates cannot pass the limit together.
    const rt: Runtime = { ttlTimer: this.o.clock.setTimeout(() => this.expire(record.taskId), ttlMs), abort: new AbortController(), live: true };
    this.runtime.set(record.taskId, rt);
    try {
      await this.o.store.create(record);
    } catch (err) {
      this.o.clock.clearTimeout(rt.ttlTimer);
      this.runtime.delete(record.taskId);
      throw err;
    }
    return toMcpTask(record);
  }

  async getTask(taskId: string): Promise<Task | null> {
    return rpc(async () => {
      const record = await this.find(taskId);
      return record ? toMcpTask(record) : null;
    });
  }

  async storeTaskResult(taskId: string, status: "completed" | "failed", result: Result): Promise<void> {
    return rpc(async () => {
      await this.requireWorking(taskId);
      const ended = await this.o.store.transition(taskId, {
        from: ACTIVE_STATUSES,
        to: status,
        patch: { result, resultBytes: Buffer.byteLength(JSON.stringify(result)), lastUpdatedAt: this.o.clock.now() },
        unset: ["statusMessage"],
      });
      if (!ended) throw await this.alreadyEnded(taskId);
      this.ended(taskId);
    });
  }

  async getTaskResult(taskId: string): Promise<Result> {
    return rpc(async () => {
      const record = await this.require(taskId);
      if (record.result) return record.result;
      throw new GatewayError(ErrorCodes.TASK_NOT_COMPLETED, `task ${taskId} ${record.status}: ${record.statusMessage ?? "it has no result"}`, {
        details: { taskId, status: record.status },
      });
    });
  }

  async updateTaskStatus(taskId: string, status: Task["status"], statusMessage?: string): Promise<void> {
    return rpc(async () => {
      await this.requireWorking(taskId);
      const patch = { lastUpdatedAt: this.o.clock.now(), ...(statusMessage !== undefined ? { statusMessage } : {}) };
      const updated = isActive(status)
        ? await this.o.store.patch(taskId, patch, { ifStatus: ACTIVE_STATUSES })
        : await this.o.store.transition(taskId, { from: ACTIVE_STATUSES, to: status, patch });
      if (!updated) throw await this.alreadyEnded(taskId);
      if (isActive(status)) return;
      this.ended(taskId);
      if (status === "cancelled" || status === "failed") this.runtime.get(taskId)?.abort.abort(statusMessage ?? `task ${status}`);
    });
  }

  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    return rpc(async () => {
      const page = (
        await this.o.store.listBySession(this.o.sessionId, {
          kind: "receiver",
          server: this.o.server,
          ...(cursor ? { afterTaskId: cursor } : {}),
          limit: PAGE_SIZE + 1,
        })
      ).filter((r) => this.visible(r));
      const more = page.length > PAGE_SIZE;
      const tasks = page.slice(0, PAGE_SIZE);
      return { tasks: tasks.map(toMcpTask), ...(more ? { nextCursor: tasks.at(-1)!.taskId } : {}) };
    });
  }

  /** Receiver tasks with a TTL timer here (for tests and list_servers). */
  get size(): number {
    return this.runtime.size;
  }

  /** The connection is gone (or the session ended): every task is aborted and its row deleted. */
  async close(): Promise<void> {
    const ids = [...this.runtime.keys()];
    for (const taskId of ids) this.dropRuntime(taskId, "the connection to the upstream closed");
    await Promise.allSettled([...this.deletes, ...ids.map((id) => this.o.store.delete(id))]);
  }

  private expire(taskId: string): void {
    this.dropRuntime(taskId, "task expired: its TTL ran out before the client answered");
    const done = this.o.store.delete(taskId).then(
      () => undefined,
      (err: unknown) => this.o.logger?.error({ taskId, err: errorMessage(err) }, "task_store_write_failed"),
    );
    this.deletes.add(done);
    void done.then(() => this.deletes.delete(done));
  }

  private dropRuntime(taskId: string, reason: string): void {
    const rt = this.runtime.get(taskId);
    if (!rt) return;
    this.o.clock.clearTimeout(rt.ttlTimer);
    rt.abort.abort(reason);
    this.runtime.delete(taskId);
  }

  /** The task ended: it no longer counts as live, and the session's ended receiver tasks stay bounded in the store. */
  private ended(taskId: string): void {
    const rt = this.runtime.get(taskId);
    if (rt) rt.live = false;
    const retention = {
      maxCount: this.o.maxRetained ?? DEFAULT_SETTINGS.tasks.maxRetainedPerSession,
      maxBytes: this.o.maxRetainedBytes ?? DEFAULT_SETTINGS.tasks.maxRetainedResultBytes,
      keep: taskId,
      kind: "receiver" as const,
    };
    const done = this.o.store.enforceRetention(this.o.sessionId, retention).then(
      () => undefined,
      (err: unknown) => this.o.logger?.error({ taskId, err: errorMessage(err) }, "task_store_write_failed"),
    );
    this.deletes.add(done);
    void done.then(() => this.deletes.delete(done));
  }

  private async alreadyEnded(taskId: string): Promise<GatewayError> {
    const r = await this.require(taskId);
    return new GatewayError(ErrorCodes.TASK_ENDED, `task ${taskId} already ended (${r.status})`, { details: { taskId, status: r.status } });
  }

  /** This session's and upstream's receiver task, not past its expiry. */
  private visible(r: TaskRecord): boolean {
    return (
      r.sessionId === this.o.sessionId &&
      r.kind === "receiver" &&
      r.server === this.o.server &&
      (r.retainUntil === undefined || r.retainUntil > this.o.clock.now())
    );
  }

  private async find(taskId: string): Promise<TaskRecord | undefined> {
    const r = await this.o.store.get(taskId);
    return r && this.visible(r) ? r : undefined;
  }

  private async require(taskId: string): Promise<TaskRecord> {
    const r = await this.find(taskId);
    // The SDK's own wording for an unknown task (spec: -32602).
    if (!r) throw new GatewayError(ErrorCodes.UNKNOWN_TASK, `Task not found: ${taskId}`, { details: { taskId } });
    return r;
  }

  private async requireWorking(taskId: string): Promise<TaskRecord> {
    const r = await this.require(taskId);
    if (!isActive(r.status))
      throw new GatewayError(ErrorCodes.TASK_ENDED, `task ${taskId} already ended (${r.status})`, { details: { taskId, status: r.status } });
    return r;
  }
}

/** Runs a store operation for the SDK: what it throws leaves as a JSON-RPC error (the one boundary). */
async function rpc<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw toJsonRpcError(err);
  }
}
