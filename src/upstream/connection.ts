/**
 * UpstreamConnection: one MCP client connection from one downstream session to
 * one upstream server. It owns the SDK Client and its transport, answers the
 * upstream's server→client requests through the injected handlers, and reports
 * an unexpected close exactly once. Lifecycle: connect() → (use) → close().
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  CreateMessageRequestSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  type ClientCapabilities,
  type CallToolResult,
  type ClientNotification,
  type ClientRequest,
  type Result,
  type CreateMessageRequest,
  type CreateMessageResult,
  type ElicitRequest,
  type ElicitResult,
  type Implementation,
  type ListRootsResult,
  type LoggingMessageNotification,
  type Prompt,
  type Resource,
  type ResourceTemplate,
  type ServerCapabilities,
  type Task,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { ProgressCallback, RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { createHash } from "node:crypto";
import type { Logger } from "../logging.js";
import { isStdioConfig, type ServerConfig } from "../config/schema.js";
import type { ChildProcessLimiter } from "./children.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { dispatchProgressInOrder } from "./ordered-progress.js";
import type { CreatedTransport, TransportFactory } from "./transports.js";
import type { ReceiverTaskStore } from "../tasks/receiver-tasks.js";

/** How an upstream runs a tool: as given by its `execution.taskSupport` and its `tasks` capability. */
export type TaskSupport = "forbidden" | "optional" | "required";

export type ConnectionStatus = "idle" | "connecting" | "connected" | "disconnected" | "error" | "closed";

/** How the owning session answers and records what the upstream sends. */
export interface UpstreamHandlers {
  onElicit(params: ElicitRequest["params"], signal: AbortSignal): Promise<ElicitResult>;
  onSample(params: CreateMessageRequest["params"], signal: AbortSignal): Promise<CreateMessageResult>;
  /** Every notification except logging messages and progress. */
  onNotification(method: string, params: Record<string, unknown> | undefined): void;
  onLog(params: LoggingMessageNotification["params"]): void;
  /** A line the stdio child wrote to stderr. */
  onStderr(line: string): void;
  /** Only asked when the connection declares `roots`. */
  onListRoots(signal: AbortSignal): Promise<ListRootsResult>;
  /** The connection closed without close() being called. */
  onDisconnect(reason: string): void;
}

export interface UpstreamConnectionOptions {
  name: string;
  config: ServerConfig;
  handlers: UpstreamHandlers;
  transportFactory: TransportFactory;
  clientInfo: Implementation;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  logger: Logger;
  /** Declare `roots` to the upstream (only when the downstream client has roots). */
  roots?: ClientCapabilities["roots"] | undefined;
  /** Serves the upstream's task-augmented sampling/elicitation requests (seed 001). */
  receiverTasks?: ReceiverTaskStore | undefined;
  /** Caps stdio children gateway-wide. */
  children?: ChildProcessLimiter | undefined;
}

export type ListKind = "tools" | "resources" | "prompts";

const STDERR_TAIL_LINES = 20;

export class UpstreamConnection {
  readonly name: string;
  status: ConnectionStatus = "idle";
  lastError: string | undefined;
  connectedAt: number | undefined;
  private client: Client | undefined;
  private created: CreatedTransport | undefined;
  private readonly stderrTail: string[] = [];
  private closing = false;
  private toolsCache: Promise<Tool[]> | undefined;
  private releaseChild: (() => void) | undefined;
  /** A digest of each list as last fetched (for reconciliation after a reconnect). */
  readonly listDigests: Partial<Record<ListKind, string>> = {};

  constructor(private readonly options: UpstreamConnectionOptions) {
    this.name = options.name;
  }

  get serverInfo(): Implementation | undefined {
    return this.client?.getServerVersion();
  }

  get capabilities(): ServerCapabilities | undefined {
    return this.client?.getServerCapabilities();
  }

  get instructions(): string | undefined {
    return this.client?.getInstructions();
  }

  /** The upstream's own MCP session id (streamable HTTP only). */
  get upstreamSessionId(): string | undefined {
    return this.created?.sessionId?.();
  }

  get pid(): number | null {
    return this.created?.pid?.() ?? null;
  }

  async connect(): Promise<void> {
    const { name, config, handlers, logger } = this.options;
    this.status = "connecting";
    const receiver = this.options.receiverTasks;
    const capabilities: ClientCapabilities = { elicitation: { form: {}, url: {} }, sampling: {} };
    if (this.options.roots) capabilities.roots = this.options.roots;
    if (receiver) {
      capabilities.tasks = { list: {}, cancel: {}, requests: { elicitation: { create: {} }, sampling: { createMessage: {} } } };
    }
    const client = new Client(this.options.clientInfo, { capabilities, ...(receiver ? { taskStore: receiver } : {}) });
    if (this.options.roots) client.setRequestHandler(ListRootsRequestSchema, (_req, extra) => handlers.onListRoots(extra.signal));
    client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
      const { task, ...params } = req.params;
      if (task && receiver && extra.taskStore)
        return this.startReceiverTask(receiver, extra.taskStore, task.ttl, (signal) => handlers.onElicit(params, signal));
      return handlers.onElicit(req.params, extra.signal);
    });
    client.setRequestHandler(CreateMessageRequestSchema, (req, extra) => {
      const { task, ...params } = req.params;
      if (task && receiver && extra.taskStore)
        return this.startReceiverTask(receiver, extra.taskStore, task.ttl, (signal) => handlers.onSample(params, signal));
      return handlers.onSample(req.params, extra.signal);
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      handlers.onLog(n.params);
    });
    client.fallbackNotificationHandler = async (n) => {
      if (n.method === "notifications/tools/list_changed") this.toolsCache = undefined;
      handlers.onNotification(n.method, n.params);
    };
    if (isStdioConfig(config) && this.options.children) {
      try {
        this.releaseChild = this.options.children.acquire(name);
      } catch (err) {
        this.fail(errorMessage(err));
        throw err;
      }
    }
    let created: CreatedTransport;
    try {
      created = this.options.transportFactory(name, config);
    } catch (err) {
      this.fail(`cannot create transport: ${errorMessage(err)}`);
      this.releaseChild?.();
      throw this.unavailable();
    }
    this.created = created;
    created.stderr?.on("data", (chunk: Buffer) => this.captureStderr(chunk));
    client.onclose = () => this.handleClose();
    client.onerror = (err) => logger.debug({ server: name, err: errorMessage(err) }, "upstream_transport_error");
    this.client = client;
    try {
      await client.connect(created.transport, { timeout: this.options.connectTimeoutMs });
    } catch (err) {
      this.fail(this.describeFailure(errorMessage(err)));
      this.closing = true;
      await this.closeClient(client);
      throw this.unavailable();
    }
    dispatchProgressInOrder(client, created.transport);
    this.status = "connected";
    this.connectedAt = Date.now();
    this.lastError = undefined;
    logger.info({ server: name, serverInfo: client.getServerVersion() }, "upstream_connected");
  }

  /**
   * Answers a task-augmented request at once with a task; the request itself
   * goes to the downstream client in the background and its answer (or
   * failure) is stored for the upstream's tasks/result. The SDK's request
   * task store sends notifications/tasks/status on each change.
   */
  private async startReceiverTask(
    receiver: ReceiverTaskStore,
    taskStore: NonNullable<RequestHandlerExtra<ClientRequest, ClientNotification>["taskStore"]>,
    ttl: number | null | undefined,
    forward: (signal: AbortSignal) => Promise<Result>,
  ): Promise<{ task: Task }> {
    const task = await taskStore.createTask(ttl === undefined || ttl === null ? {} : { ttl });
    forward(receiver.signalFor(task.taskId))
      .then(
        (result) => taskStore.storeTaskResult(task.taskId, "completed", result),
        (err) => taskStore.updateTaskStatus(task.taskId, "failed", errorMessage(err)),
      )
      // The task may have been cancelled or expired meanwhile: nothing left to record.
      .catch(() => undefined);
    return { task };
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.status = "closed";
    if (this.client) await this.closeClient(this.client);
  }

  /** Closes the SDK client and waits until the stdio child's whole process group is gone. */
  private async closeClient(client: Client): Promise<void> {
    await client.close().catch(() => undefined);
    await this.created?.terminate?.().catch(() => undefined);
    this.releaseChild?.();
  }

  private handleClose(): void {
    // A close while connecting is reported by connect() itself, not as a disconnect.
    if (this.closing || this.status !== "connected") return;
    this.closing = true;
    const reason = this.describeFailure("connection closed");
    this.fail(reason);
    this.status = "disconnected";
    // The child's group is being reaped (stdio-transport.ts); its slot frees once the group is gone.
    const release = () => this.releaseChild?.();
    if (this.created?.terminate) void this.created.terminate().then(release, release);
    else release();
    this.options.logger.warn({ server: this.name, reason }, "upstream_disconnected");
    this.options.handlers.onDisconnect(reason);
  }

  private fail(reason: string): void {
    this.status = "error";
    this.lastError = reason;
  }

  private describeFailure(base: string): string {
    const tail = this.stderrTail.slice(-3).join(" | ");
    return tail ? `${base} (stderr: ${tail})` : base;
  }

  private unavailable(): GatewayError {
    return new GatewayError(
      ErrorCodes.UPSTREAM_UNAVAILABLE,
      `upstream '${this.name}' is unavailable: ${this.lastError ?? "not connected"}. Check its config with list_servers; it is retried on next use.`,
      { server: this.name },
    );
  }

  private captureStderr(chunk: Buffer): void {
    for (const line of chunk.toString("utf8").split(/\r?\n/)) {
      if (!line.trim()) continue;
      this.stderrTail.push(line.slice(0, 500));
      if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
      this.options.handlers.onStderr(line);
    }
  }

  /** The SDK client, for faces that forward requests verbatim. */
  get sdk(): Client {
    return this.live();
  }

  private live(): Client {
    if (this.status !== "connected" || !this.client) throw this.unavailable();
    return this.client;
  }

  async callTool(
    name: string,
    args: Record<string, unknown> | undefined,
    opts: { signal?: AbortSignal; timeoutMs: number; onprogress?: ProgressCallback },
  ): Promise<CallToolResult> {
    const result = await this.live().callTool({ name, ...(args ? { arguments: args } : {}) }, undefined, {
      timeout: opts.timeoutMs,
      resetTimeoutOnProgress: true,
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.onprogress ? { onprogress: opts.onprogress } : {}),
    });
    return result as CallToolResult;
  }

  /** How this upstream runs `tool`, from its tool list and its `tasks` capability. */
  async taskSupport(tool: string): Promise<TaskSupport> {
    if (!this.capabilities?.tasks?.requests?.tools?.call) return "forbidden";
    const found = (await this.cachedTools()).find((t) => t.name === tool);
    return found?.execution?.taskSupport ?? "forbidden";
  }

  /** A task-augmented tools/call: the upstream answers with its own task at once. */
  async callToolAsTask(
    params: { name: string; arguments?: Record<string, unknown> | undefined; _meta?: Record<string, unknown> | undefined },
    ttlMs: number,
    opts: { signal?: AbortSignal | undefined; onprogress?: ProgressCallback | undefined } = {},
  ): Promise<Task> {
    const result = await this.live().request({ method: "tools/call", params }, CreateTaskResultSchema, {
      task: { ttl: ttlMs },
      ...this.requestOptions,
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.onprogress ? { onprogress: opts.onprogress } : {}),
    });
    return result.task;
  }

  async getTask(taskId: string, signal?: AbortSignal): Promise<Task> {
    return this.live().request({ method: "tasks/get", params: { taskId } }, GetTaskResultSchema, {
      ...this.requestOptions,
      ...(signal ? { signal } : {}),
    });
  }

  /** Blocks until the upstream task ends; queued elicitations/sampling arrive meanwhile. */
  async getTaskResult(taskId: string, opts: { signal?: AbortSignal | undefined; timeoutMs: number }): Promise<CallToolResult> {
    return this.live().request({ method: "tasks/result", params: { taskId } }, CallToolResultSchema, {
      timeout: opts.timeoutMs,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  }

  /**
   * Drops the SDK's progress handler for one of this upstream's tasks. The SDK
   * keeps it for the task's life and, as the requesting side, only removes it
   * when the connection closes; the gateway calls this when the task ends.
   */
  releaseTaskProgress(taskId: string): void {
    const protocol = this.client as unknown as { _cleanupTaskProgressHandler?: (id: string) => void } | undefined;
    protocol?._cleanupTaskProgressHandler?.(taskId);
  }

  async cancelTask(taskId: string, timeoutMs: number): Promise<unknown> {
    return this.live().request({ method: "tasks/cancel", params: { taskId } }, CancelTaskResultSchema, { timeout: timeoutMs });
  }

  private get requestOptions() {
    return { timeout: this.options.requestTimeoutMs };
  }

  async listTools(): Promise<Tool[]> {
    return this.digest(
      "tools",
      await this.paginate((cursor) =>
        this.live()
          .listTools(cursor ? { cursor } : undefined, this.requestOptions)
          .then((r) => ({ items: r.tools, next: r.nextCursor })),
      ),
    );
  }

  /** The tool list, cached until the upstream says it changed. */
  cachedTools(): Promise<Tool[]> {
    if (!this.toolsCache) {
      const p = this.listTools();
      this.toolsCache = p;
      p.catch(() => {
        if (this.toolsCache === p) this.toolsCache = undefined;
      });
    }
    return this.toolsCache;
  }

  async listResources(): Promise<Resource[]> {
    if (!this.capabilities?.resources) return this.digest("resources", []);
    return this.digest(
      "resources",
      await this.paginate((cursor) =>
        this.live()
          .listResources(cursor ? { cursor } : undefined, this.requestOptions)
          .then((r) => ({ items: r.resources, next: r.nextCursor })),
      ),
    );
  }

  async listResourceTemplates(): Promise<ResourceTemplate[]> {
    if (!this.capabilities?.resources) return [];
    return this.paginate((cursor) =>
      this.live()
        .listResourceTemplates(cursor ? { cursor } : undefined, this.requestOptions)
        .then((r) => ({ items: r.resourceTemplates, next: r.nextCursor })),
    );
  }

  async listPrompts(): Promise<Prompt[]> {
    if (!this.capabilities?.prompts) return this.digest("prompts", []);
    return this.digest(
      "prompts",
      await this.paginate((cursor) =>
        this.live()
          .listPrompts(cursor ? { cursor } : undefined, this.requestOptions)
          .then((r) => ({ items: r.prompts, next: r.nextCursor })),
      ),
    );
  }

  private digest<T>(kind: ListKind, items: T[]): T[] {
    this.listDigests[kind] = createHash("sha256").update(JSON.stringify(items)).digest("base64url");
    return items;
  }

  async readResource(uri: string) {
    return this.live().readResource({ uri }, this.requestOptions);
  }

  async getPrompt(name: string, args: Record<string, string> | undefined) {
    return this.live().getPrompt({ name, ...(args ? { arguments: args } : {}) }, this.requestOptions);
  }

  /** Follows nextCursor to the end (bounded, so a looping cursor cannot wedge us). */
  private async paginate<T>(page: (cursor: string | undefined) => Promise<{ items: T[]; next?: string | undefined }>): Promise<T[]> {
    const all: T[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 1000; i++) {
      const { items, next } = await page(cursor);
      all.push(...items);
      if (!next || next === cursor) break;
      cursor = next;
    }
    return all;
  }
}
