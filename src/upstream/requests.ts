/**
 * The request surface of one upstream connection: every request the gateway
 * sends an upstream, through the one request() where timeouts apply. See
 * docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { ProgressCallback, RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { AnySchema, SchemaOutput } from "@modelcontextprotocol/sdk/server/zod-compat.js";
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  CompleteResultSchema,
  CreateTaskResultSchema,
  EmptyResultSchema,
  GetPromptResultSchema,
  GetTaskResultSchema,
  ListPromptsResultSchema,
  ListResourceTemplatesResultSchema,
  ListResourcesResultSchema,
  ListToolsResultSchema,
  ReadResourceResultSchema,
  type CallToolRequest,
  type CallToolResult,
  type CancelTaskResult,
  type ClientRequest,
  type CompleteRequest,
  type CompleteResult,
  type EmptyResult,
  type GetPromptResult,
  type ListPromptsRequest,
  type ListPromptsResult,
  type ListResourceTemplatesRequest,
  type ListResourceTemplatesResult,
  type ListResourcesRequest,
  type ListResourcesResult,
  type ListToolsRequest,
  type ListToolsResult,
  type LoggingLevel,
  type Prompt,
  type ReadResourceResult,
  type RequestMeta,
  type Resource,
  type ResourceTemplate,
  type ServerCapabilities,
  type Task,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { createHash } from "node:crypto";
import type { RequestAttribution } from "../mcp/request-attribution.js";
import { releaseTaskProgressHandler } from "../mcp/task-progress.js";
import { sdkLeavesCallUnchecked } from "../mcp/tool-call-checks.js";
import type { CallOrigin } from "./origin.js";
import type { RawCalls } from "./raw-calls.js";

/** How an upstream runs a tool: as given by its `execution.taskSupport` and its `tasks` capability. */
export type TaskSupport = "forbidden" | "optional" | "required";

export type ListKind = "tools" | "resources" | "prompts";

/** Options of one upstream request (see request()). */
export interface SendOptions {
  /** @default the connection's requestTimeoutMs (gateway.upstream.requestTimeoutMs) */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  /** Asks the upstream for progress (the request carries a progress token of the gateway's own). */
  onprogress?: ProgressCallback | undefined;
  /** Each progress notification restarts the timeout. @default false */
  resetTimeoutOnProgress?: boolean | undefined;
  /** Task-augments the request (the upstream answers with CreateTaskResult). */
  task?: { ttl: number } | undefined;
  /** What caused the request (attribution of the upstream's server→client requests meanwhile). */
  origin?: CallOrigin | undefined;
  /** A plain tools/call may be written raw, past the SDK Client (raw-calls.ts, docs/adr/0037 §2). @default false */
  raw?: boolean | undefined;
}

/** A plain (not task-augmented) tools/call. */
export interface CallToolOptions {
  /** Bounds the call; between progress notifications when resetTimeoutOnProgress. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  onprogress?: ProgressCallback | undefined;
  /** @default true */
  resetTimeoutOnProgress?: boolean | undefined;
  /** The request's `_meta`, forwarded as given (with onprogress, its progress token becomes the gateway's own). */
  _meta?: RequestMeta | undefined;
  /** What caused the call (see SendOptions.origin). */
  origin?: CallOrigin | undefined;
  /** Forwarded raw when the tool allows it (see SendOptions.raw; gateway.transparent.fastPath). @default false */
  raw?: boolean | undefined;
}

type ToolCallParams = Pick<CallToolRequest["params"], "name" | "arguments" | "_meta">;
export type ParamsOf<M extends ClientRequest["method"]> = Extract<ClientRequest, { method: M }>["params"];

/** Bound on the pages followed for one full list, so a looping cursor cannot wedge us. */
const MAX_PAGES = 1000;

export abstract class UpstreamRequests {
  /** A digest of each list as last fetched in full (for reconciliation after a reconnect). */
  readonly listDigests: Partial<Record<ListKind, string>> = {};
  private toolsCache: Promise<Tool[]> | undefined;
  /** Upstream tasks/cancel requests not yet settled (a closing connection waits for them). */
  private readonly cancels = new Set<Promise<unknown>>();
  /** Requests sent so far, and those not settled yet (idle release: session/upstream-pool.ts; the liveness check: connection.ts). */
  private sent = 0;
  private active = 0;

  protected constructor(private readonly defaultTimeoutMs: number) {}

  /** What the upstream declared at initialize (undefined until connected). */
  abstract get capabilities(): ServerCapabilities | undefined;

  /** The SDK client while the connection is up, else undefined. */
  protected abstract connectedClient(): Client | undefined;

  /** The error every request fails with while the connection is not up. */
  protected abstract unavailable(): Error;

  /** Attributes the live connection's calls (undefined while not connected). */
  protected abstract attribution(): RequestAttribution<CallOrigin> | undefined;

  /** The live connection's raw-send seam (raw-calls.ts), when it has one. */
  protected rawCalls(): RawCalls | undefined {
    return undefined;
  }

  /** Throws EMCP_UPSTREAM_UNAVAILABLE unless connected (to refuse work before anything is recorded for it). */
  assertConnected(): void {
    this.live();
  }

  /**
   * The one way a request reaches the upstream. tools/list and plain
   * tools/call go through the SDK's own listTools/callTool, so the SDK keeps
   * validating structured tool output against the listed outputSchema (MCP:
   * clients SHOULD validate it); everything else is a plain Client.request.
   */
  protected async request<M extends ClientRequest["method"], S extends AnySchema>(
    method: M,
    params: ParamsOf<M>,
    resultSchema: S,
    o: SendOptions = {},
  ): Promise<SchemaOutput<S>> {
    const client = this.live();
    this.sent++;
    this.active++;
    // Every call counts as in flight for attribution, with or without an origin.
    const call = this.attribution()?.begin(o.origin);
    const options: RequestOptions = {
      timeout: o.timeoutMs ?? this.defaultTimeoutMs,
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.onprogress ? { onprogress: o.onprogress } : {}),
      ...(o.resetTimeoutOnProgress ? { resetTimeoutOnProgress: true } : {}),
      ...(o.task ? { task: o.task } : {}),
      ...call?.options,
    };
    try {
      // The SDK methods return exactly what resultSchema parses (the callers pass the matching schema).
      if (method === "tools/list") return (await client.listTools(params, options)) as SchemaOutput<S>;
      if (method === "tools/call" && !o.task) {
        const raw = o.raw ? this.rawCalls() : undefined;
        if (raw && sdkLeavesCallUnchecked(client, (params as ToolCallParams).name)) {
          return (await raw.call(params as ToolCallParams, {
            timeoutMs: options.timeout!,
            signal: o.signal,
            onprogress: o.onprogress,
            resetTimeoutOnProgress: o.resetTimeoutOnProgress,
            sendOptions: call?.options,
          })) as SchemaOutput<S>;
        }
        return (await client.callTool(params as ParamsOf<"tools/call">, CallToolResultSchema, options)) as SchemaOutput<S>;
      }
      return await client.request({ method, params }, resultSchema, options);
    } catch (err) {
      throw await this.requestFailed(err);
    } finally {
      this.active--;
      call?.end();
    }
  }

  /** What a failed request throws: `err`, unless the connection knows better (a lost connection says so). */
  protected requestFailed(err: unknown): Promise<unknown> {
    return Promise.resolve(err);
  }

  /** Whether no request is in flight and none was sent since `since` (a requestCount read earlier). */
  idleSince(since: number): boolean {
    return this.active === 0 && this.sent === since;
  }

  /** Requests sent so far (compare with idleSince()). */
  get requestCount(): number {
    return this.sent;
  }

  private live(): Client {
    const client = this.connectedClient();
    if (!client) throw this.unavailable();
    return client;
  }

  // --- tools and tasks ---

  /** A plain tools/call: the meta face's execute_tool, the transparent face's tools/call and gateway-owned tasks all use it. */
  async callTool(name: string, args: Record<string, unknown> | undefined, opts: CallToolOptions): Promise<CallToolResult> {
    const params = { name, ...(args ? { arguments: args } : {}), ...(opts._meta ? { _meta: opts._meta } : {}) };
    return this.request("tools/call", params, CallToolResultSchema, {
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
      onprogress: opts.onprogress,
      resetTimeoutOnProgress: opts.resetTimeoutOnProgress ?? true,
      origin: opts.origin,
      raw: opts.raw,
    });
  }

  /**
   * A task-augmented tools/call: the upstream answers with its own task at
   * once. Requests the upstream later sends inside that task (naming it in
   * related-task `_meta`) are attributed to `origin` until releaseUpstreamTask().
   */
  async callToolAsTask(
    params: ToolCallParams,
    ttlMs: number,
    opts: { signal?: AbortSignal | undefined; onprogress?: ProgressCallback | undefined; origin?: CallOrigin | undefined } = {},
  ): Promise<Task> {
    const result = await this.request("tools/call", params, CreateTaskResultSchema, { task: { ttl: ttlMs }, ...opts });
    if (opts.origin) this.attribution()?.relateTask(result.task.taskId, opts.origin);
    return result.task;
  }

  /** A poll (lazy tasks/get, emulation keep-alive), bounded by `timeoutMs` (gateway.upstream.taskPollTimeoutMs). */
  async getTask(taskId: string, opts: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined } = {}): Promise<Task> {
    return this.request("tasks/get", { taskId }, GetTaskResultSchema, opts);
  }

  /** Blocks until the upstream task ends; queued elicitations/sampling arrive meanwhile (attributed to `origin`). */
  async getTaskResult(taskId: string, opts: { signal?: AbortSignal | undefined; timeoutMs: number; origin?: CallOrigin | undefined }): Promise<CallToolResult> {
    return this.request("tasks/result", { taskId }, CallToolResultSchema, opts);
  }

  /** Kept until settled: a closing connection waits for it (settleCancels). */
  async cancelTask(taskId: string, timeoutMs: number): Promise<CancelTaskResult> {
    const cancel = this.request("tasks/cancel", { taskId }, CancelTaskResultSchema, { timeoutMs });
    const settled = cancel.then(
      () => undefined,
      () => undefined,
    );
    this.cancels.add(settled);
    void settled.then(() => this.cancels.delete(settled));
    return cancel;
  }

  /** Resolves once every upstream tasks/cancel sent so far has settled (each is bounded by its timeout). */
  protected async settleCancels(): Promise<void> {
    while (this.cancels.size) await Promise.allSettled([...this.cancels]);
  }

  /**
   * Forgets what the connection keeps for one of this upstream's tasks: its
   * progress handler (src/mcp/task-progress.ts) and its call's origin. The
   * gateway calls it when the task ends for it. A closed connection has
   * dropped both already.
   */
  releaseUpstreamTask(taskId: string): void {
    this.attribution()?.releaseTask(taskId);
    const client = this.connectedClient();
    if (client) releaseTaskProgressHandler(client, taskId);
  }

  /** How this upstream runs `tool`, from its tool list and its `tasks` capability. */
  async taskSupport(tool: string): Promise<TaskSupport> {
    if (!this.capabilities?.tasks?.requests?.tools?.call) return "forbidden";
    const found = (await this.cachedTools()).find((t) => t.name === tool);
    return found?.execution?.taskSupport ?? "forbidden";
  }

  // --- lists: one page verbatim (single-server face), or every page ---

  async listToolsPage(params?: ListToolsRequest["params"]): Promise<ListToolsResult> {
    return this.request("tools/list", params, ListToolsResultSchema);
  }

  async listResourcesPage(params?: ListResourcesRequest["params"]): Promise<ListResourcesResult> {
    return this.request("resources/list", params, ListResourcesResultSchema);
  }

  async listResourceTemplatesPage(params?: ListResourceTemplatesRequest["params"]): Promise<ListResourceTemplatesResult> {
    return this.request("resources/templates/list", params, ListResourceTemplatesResultSchema);
  }

  async listPromptsPage(params?: ListPromptsRequest["params"]): Promise<ListPromptsResult> {
    return this.request("prompts/list", params, ListPromptsResultSchema);
  }

  async listTools(): Promise<Tool[]> {
    return this.digest("tools", await this.paginate((cursor) => this.listToolsPage(cursor).then((r) => ({ items: r.tools, next: r.nextCursor }))));
  }

  /** The tool list, cached until the upstream says it changed; as toolReview lets the gateway use it. */
  cachedTools(): Promise<Tool[]> {
    if (!this.toolsCache) {
      const p = this.listTools();
      this.toolsCache = p;
      p.catch(() => {
        if (this.toolsCache === p) this.toolsCache = undefined;
      });
    }
    const review = this.toolReview;
    return review ? this.toolsCache.then(review) : this.toolsCache;
  }

  /** Sees each tool list before the gateway uses it: pinned definitions (src/governance/pins.ts); set by the factory. */
  toolReview: ((tools: Tool[]) => Promise<Tool[]>) | undefined;

  /** `tools` (a page read verbatim) as toolReview lets the gateway use them. */
  reviewTools(tools: Tool[]): Promise<Tool[]> {
    return this.toolReview ? this.toolReview(tools) : Promise.resolve(tools);
  }

  /** The upstream sent notifications/tools/list_changed. */
  protected toolsChanged(): void {
    this.toolsCache = undefined;
  }

  async listResources(): Promise<Resource[]> {
    if (!this.capabilities?.resources) return this.digest("resources", []);
    const all = await this.paginate((cursor) => this.listResourcesPage(cursor).then((r) => ({ items: r.resources, next: r.nextCursor })));
    return this.digest("resources", all);
  }

  async listResourceTemplates(): Promise<ResourceTemplate[]> {
    if (!this.capabilities?.resources) return [];
    return this.paginate((cursor) => this.listResourceTemplatesPage(cursor).then((r) => ({ items: r.resourceTemplates, next: r.nextCursor })));
  }

  async listPrompts(): Promise<Prompt[]> {
    if (!this.capabilities?.prompts) return this.digest("prompts", []);
    return this.digest("prompts", await this.paginate((cursor) => this.listPromptsPage(cursor).then((r) => ({ items: r.prompts, next: r.nextCursor }))));
  }

  // --- resources, prompts, completions, logging ---

  async readResource(uri: string, _meta?: RequestMeta): Promise<ReadResourceResult> {
    return this.request("resources/read", { uri, ...(_meta ? { _meta } : {}) }, ReadResourceResultSchema);
  }

  async subscribeResource(uri: string, _meta?: RequestMeta): Promise<EmptyResult> {
    const result = await this.request("resources/subscribe", { uri, ...(_meta ? { _meta } : {}) }, EmptyResultSchema);
    this.subscriptionChanged(uri, true);
    return result;
  }

  async unsubscribeResource(uri: string, _meta?: RequestMeta): Promise<EmptyResult> {
    const result = await this.request("resources/unsubscribe", { uri, ...(_meta ? { _meta } : {}) }, EmptyResultSchema);
    this.subscriptionChanged(uri, false);
    return result;
  }

  async getPrompt(name: string, args: Record<string, string> | undefined, _meta?: RequestMeta): Promise<GetPromptResult> {
    return this.request("prompts/get", { name, ...(args ? { arguments: args } : {}), ...(_meta ? { _meta } : {}) }, GetPromptResultSchema);
  }

  async complete(params: CompleteRequest["params"]): Promise<CompleteResult> {
    return this.request("completion/complete", params, CompleteResultSchema);
  }

  async setLoggingLevel(level: LoggingLevel): Promise<EmptyResult> {
    const result = await this.request("logging/setLevel", { level }, EmptyResultSchema);
    this.loggingLevelSet(level);
    return result;
  }

  /** The upstream accepted a resources/subscribe (true) or unsubscribe (false): the owner may keep it. */
  protected subscriptionChanged(_uri: string, _subscribed: boolean): void {}

  /** The upstream accepted a logging/setLevel: the owner may keep it. */
  protected loggingLevelSet(_level: LoggingLevel): void {}

  /** A notification, not a request: nothing to time out or answer. */
  async sendRootsListChanged(): Promise<void> {
    await this.live().sendRootsListChanged();
  }

  private digest<T>(kind: ListKind, items: T[]): T[] {
    this.listDigests[kind] = createHash("sha256").update(JSON.stringify(items)).digest("base64url");
    return items;
  }

  /** Follows nextCursor to the end (bounded by MAX_PAGES). */
  private async paginate<T>(page: (params: { cursor: string } | undefined) => Promise<{ items: T[]; next?: string | undefined }>): Promise<T[]> {
    const all: T[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < MAX_PAGES; i++) {
      const { items, next } = await page(cursor === undefined ? undefined : { cursor });
      all.push(...items);
      if (!next || next === cursor) break;
      cursor = next;
    }
    return all;
  }
}
