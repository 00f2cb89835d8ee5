/**
 * The SDK Client of one UpstreamConnection, with its server→client side set
 * up: the capabilities the gateway declares to the upstream, the handlers for
 * the upstream's elicitation, sampling and roots requests (a task-augmented
 * one answered at once with a receiver task, seed 001), its logging and other
 * notifications, and the origin of each request — the call it belongs to,
 * when the connection's attribution can tell (src/mcp/request-attribution.ts),
 * else undefined. The connection's lifecycle stays in connection.ts.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  type ClientCapabilities,
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
  type RequestId,
  type Task,
} from "@modelcontextprotocol/sdk/types.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { TaskStore as SdkTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js";
import { errorMessage } from "../errors.js";
import { acceptCancelOfRequestZero } from "../mcp/cancel-request-zero.js";
import { jsonSchemaValidator } from "../mcp/json-schema-validator.js";
import type { RequestAttribution } from "../mcp/request-attribution.js";
import { relatedTaskId } from "../mcp/task-object.js";
import type { CallOrigin } from "./origin.js";
import type { ReceiverTaskStore } from "./receiver-tasks.js";

/**
 * How the owning session answers and records what the upstream sends. A
 * server→client request comes with the origin of the call it belongs to
 * (undefined: unknown, e.g. sent on a Streamable HTTP upstream's standalone
 * stream, or while several calls are in flight on a stdio upstream).
 */
export interface UpstreamHandlers {
  onElicit(params: ElicitRequest["params"], signal: AbortSignal, origin: CallOrigin | undefined): Promise<ElicitResult>;
  onSample(params: CreateMessageRequest["params"], signal: AbortSignal, origin: CallOrigin | undefined): Promise<CreateMessageResult>;
  /** Every notification except logging messages and progress. */
  onNotification(method: string, params: Record<string, unknown> | undefined): void;
  onLog(params: LoggingMessageNotification["params"]): void;
  /** A line the stdio child wrote to stderr. */
  onStderr(line: string): void;
  /** Only asked when the connection declares `roots`. */
  onListRoots(signal: AbortSignal, origin: CallOrigin | undefined): Promise<ListRootsResult>;
  /** The connection closed without close() being called. */
  onDisconnect(reason: string): void;
}

export interface UpstreamClientOptions {
  clientInfo: Implementation;
  handlers: UpstreamHandlers;
  /** Declare `roots` to the upstream (only when the downstream client has roots). */
  roots?: ClientCapabilities["roots"] | undefined;
  /** Serves the upstream's task-augmented sampling/elicitation requests (seed 001). */
  receiverTasks?: ClientTaskStore | undefined;
  /** The connection's current attribution (a new one per transport), read per request. */
  attribution(): RequestAttribution<CallOrigin> | undefined;
  /** notifications/tools/list_changed arrived (before the handlers hear it). */
  toolsChanged(): void;
}

/** What the SDK client keeps the upstream's task-augmented requests in (a ReceiverTaskStore, or a warm connection's stand-in for one). */
export type ClientTaskStore = SdkTaskStore & Pick<ReceiverTaskStore, "signalFor">;

/** An SDK client with the connection's capabilities and server→client handlers, and the capabilities it declares. */
export function newUpstreamClient(options: UpstreamClientOptions): { client: Client; declared: ClientCapabilities } {
  const { handlers } = options;
  const receiver = options.receiverTasks;
  const originOf = (requestId: RequestId, meta: Record<string, unknown> | undefined) => originOfRequest(options.attribution(), requestId, meta);
  const capabilities: ClientCapabilities = { elicitation: { form: {}, url: {} }, sampling: {} };
  if (options.roots) capabilities.roots = options.roots;
  if (receiver) {
    capabilities.tasks = { list: {}, cancel: {}, requests: { elicitation: { create: {} }, sampling: { createMessage: {} } } };
  }
  // The shared validator: the SDK client would build an Ajv of its own, compiling every output schema again at each tools/list.
  const client = new Client(options.clientInfo, { capabilities, jsonSchemaValidator, ...(receiver ? { taskStore: receiver } : {}) });
  // The upstream's first request has id 0: its cancellation (or timeout on its side) must still end the wait here.
  acceptCancelOfRequestZero(client);
  if (options.roots) {
    client.setRequestHandler(ListRootsRequestSchema, (req, extra) => handlers.onListRoots(extra.signal, originOf(extra.requestId, req.params?._meta)));
  }
  client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
    const { task, ...params } = req.params;
    const origin = originOf(extra.requestId, params._meta);
    if (task && receiver && extra.taskStore)
      return startReceiverTask(receiver, extra.taskStore, task.ttl, (signal) => handlers.onElicit(params, signal, origin));
    return handlers.onElicit(req.params, extra.signal, origin);
  });
  client.setRequestHandler(CreateMessageRequestSchema, (req, extra) => {
    const { task, ...params } = req.params;
    const origin = originOf(extra.requestId, params._meta);
    if (task && receiver && extra.taskStore)
      return startReceiverTask(receiver, extra.taskStore, task.ttl, (signal) => handlers.onSample(params, signal, origin));
    return handlers.onSample(req.params, extra.signal, origin);
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    handlers.onLog(n.params);
  });
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === "notifications/tools/list_changed") options.toolsChanged();
    handlers.onNotification(n.method, n.params);
  };
  return { client, declared: capabilities };
}

/**
 * Answers a task-augmented request at once with a task; the request itself
 * goes to the downstream client in the background and its answer (or
 * failure) is stored for the upstream's tasks/result. The SDK's request
 * task store sends notifications/tasks/status on each change.
 */
async function startReceiverTask(
  receiver: ClientTaskStore,
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

/**
 * The call a server→client request belongs to: for a request the upstream
 * sends inside one of its tasks (related-task `_meta`), the call that created
 * that task — the request says so itself, whatever else is in flight; else
 * by the attribution's rules.
 */
function originOfRequest(
  calls: RequestAttribution<CallOrigin> | undefined,
  requestId: RequestId,
  meta: Record<string, unknown> | undefined,
): CallOrigin | undefined {
  const upstreamTask = relatedTaskId(meta);
  return (upstreamTask === undefined ? undefined : calls?.taskOrigin(upstreamTask)) ?? calls?.attribute(requestId);
}
