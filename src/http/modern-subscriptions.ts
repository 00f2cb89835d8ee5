/**
 * `subscriptions/listen` for 2026-07-28 clients (SEP-2575; the tasks
 * extension's `notifications/tasks`, SEP-2663; ADR 0032 "Listening"): one
 * SSE response per listen request that stays open, fed by the principal's
 * host on the face (modern-tasks.ts). The host's session holds the upstream
 * connections, so list changes and resource updates of both kinds of upstream
 * reach it as they reach a 2025 session, and its tasks are the principal's
 * only. Closing the response ends the listener, its subscriptions and its
 * keep-alive timer. The stdio face serves the same listen through a sink of
 * its own (notifications on the wire, ended by the request's cancellation).
 */
import type { ServerResponse } from "node:http";
import type { Implementation } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../auth/principal.js";
import type { TimerHandle } from "../clock.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY } from "../mcp/modern/envelope.js";
import { TASKS_EXTENSION } from "../mcp/modern/tasks-extension.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { hostFor, type HostEvent, type TaskHost, type TaskHostFace } from "./modern-tasks.js";

export const SUBSCRIPTION_ID_META_KEY = "io.modelcontextprotocol/subscriptionId";
const SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo";
/** A comment line this often keeps proxies from closing an idle stream, and keeps the host's session alive. */
export const LISTEN_KEEPALIVE_MS = 15_000;
/** Open listen streams one principal may hold on one face. */
export const MAX_LISTENS_PER_HOST = 16;
/** URIs or task ids one listen request may name (each costs the face a request). */
export const MAX_LISTEN_ENTRIES = 100;

/** SEP-2575's SubscriptionFilter, with the tasks extension's `taskIds`. */
export interface ListenFilter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
  taskIds?: string[];
}

const FLAGS = ["toolsListChanged", "promptsListChanged", "resourcesListChanged"] as const;
const LIST_METHOD: Record<(typeof FLAGS)[number], string> = {
  toolsListChanged: "notifications/tools/list_changed",
  promptsListChanged: "notifications/prompts/list_changed",
  resourcesListChanged: "notifications/resources/list_changed",
};
const CAPABILITY: Record<(typeof FLAGS)[number], string> = { toolsListChanged: "tools", promptsListChanged: "prompts", resourcesListChanged: "resources" };

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === "string");
}

/** The request's filter, or why it is not one (EMCP_BAD_ARGUMENTS). */
export function parseListenFilter(params: Record<string, unknown>): ListenFilter {
  const n = params.notifications;
  const bad = (why: string) =>
    new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `subscriptions/listen needs params.notifications, a filter object (${why}), e.g. {"toolsListChanged":true,"resourceSubscriptions":["file:///a"],"taskIds":["<id>"]}`,
    );
  if (typeof n !== "object" || n === null || Array.isArray(n)) throw bad("it is missing or not an object");
  const filter = n as Record<string, unknown>;
  for (const flag of FLAGS) if (filter[flag] !== undefined && typeof filter[flag] !== "boolean") throw bad(`${flag} must be a boolean`);
  for (const list of ["resourceSubscriptions", "taskIds"] as const) {
    if (filter[list] !== undefined && !isStringArray(filter[list])) throw bad(`${list} must be an array of strings`);
    if (((filter[list] as unknown[] | undefined)?.length ?? 0) > MAX_LISTEN_ENTRIES) {
      throw bad(`${list} names more than ${MAX_LISTEN_ENTRIES} entries; open a second stream for the rest`);
    }
  }
  return filter;
}

/** What the host's face can deliver of `requested` (the acknowledged filter narrows it, as SEP-2575 says). */
function honoredFlags(requested: ListenFilter, capabilities: Record<string, unknown>): ListenFilter {
  const honored: ListenFilter = {};
  for (const flag of FLAGS) {
    const capability = capabilities[CAPABILITY[flag]] as { listChanged?: boolean } | undefined;
    if (requested[flag] === true && capability?.listChanged === true) honored[flag] = true;
  }
  return honored;
}

/** The principal's tasks among `taskIds` (another's, or an unknown id, is left out of the acknowledgement: nothing about it is said). */
async function ownTasks(host: TaskHost, taskIds: readonly string[]): Promise<string[]> {
  if (!host.supportsTasks) return [];
  const own: string[] = [];
  for (const taskId of new Set(taskIds)) if (await host.owns(taskId)) own.push(taskId);
  return own;
}

function frame(message: Record<string, unknown>): string {
  return `event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", ...message })}\n\n`;
}

/** Where a listen's messages go: an SSE response (HTTP) or the stdio wire. */
export interface ListenSink {
  /** The stream has begun (HTTP: its headers are sent); until then an error is answered by the caller instead. */
  readonly started: boolean;
  /** The transport is gone or ended: nothing more can be written. */
  readonly finished: boolean;
  /** Begins the stream (before its first message). */
  start(): void;
  /** One JSON-RPC message (without `jsonrpc`). */
  write(message: Record<string, unknown>): void;
  /** The keep-alive's write, if the transport has one (an SSE comment line). */
  keepAlive?(): void;
  /** Ends the stream (after its last message). */
  end(): void;
  /** Calls `gone` once the client is gone (closed the response, cancelled the request, the wire ended); returns the function that stops watching. */
  onGone(gone: () => void): () => void;
}

/** An SSE response as a listen sink. */
export function sseListenSink(res: ServerResponse): ListenSink {
  return {
    get started() {
      return res.headersSent;
    },
    get finished() {
      return res.writableEnded || res.destroyed;
    },
    start: () =>
      void res.writeHead(200, {
        "Content-Type": "text/event-stream",
        "Cache-Control": "no-cache, no-transform",
        Connection: "keep-alive",
        "X-Accel-Buffering": "no",
      }),
    write: (message) => void res.write(frame(message)),
    keepAlive: () => void res.write(": keepalive\n\n"),
    end: () => void res.end(),
    onGone(gone) {
      res.once("close", gone);
      return () => res.off("close", gone);
    },
  };
}

/** Open listen streams per host (by host session id), for the per-host bound and for tests. */
const open = new WeakMap<GatewayContext, Map<string, Set<() => void>>>();

function openOf(gateway: GatewayContext, hostId: string): Set<() => void> {
  let byHost = open.get(gateway);
  if (!byHost) open.set(gateway, (byHost = new Map<string, Set<() => void>>()));
  let streams = byHost.get(hostId);
  if (!streams) byHost.set(hostId, (streams = new Set()));
  return streams;
}

/** How many listen streams are open on the gateway (read-only, for tests and diagnostics). */
export function openListenCount(gateway: GatewayContext): number {
  let n = 0;
  for (const streams of open.get(gateway)?.values() ?? []) n += streams.size;
  return n;
}

export interface ListenRequest {
  id: string | number;
  params: Record<string, unknown>;
  principal: Principal | undefined;
  clientInfo: Implementation;
  /** The envelope declared the tasks extension (only then are `taskIds` honored). */
  tasksDeclared: boolean;
}

/** A classified 2026-07-28 subscriptions/listen request (whatever carried it) as the listen it asks for. */
export function listenRequestOf(request: { id: string | number; params: Record<string, unknown> }, principal: Principal | undefined): ListenRequest {
  const meta = (request.params._meta ?? {}) as Record<string, unknown>;
  const capabilities = (meta[CLIENT_CAPABILITIES_META_KEY] ?? {}) as { extensions?: Record<string, unknown> };
  const clientInfo = (meta[CLIENT_INFO_META_KEY] ?? { name: "modern-client", version: "0" }) as Implementation;
  return { id: request.id, params: request.params, principal, clientInfo, tasksDeclared: capabilities.extensions?.[TASKS_EXTENSION] !== undefined };
}

/**
 * Answers a subscriptions/listen: throws (a GatewayError) before anything is
 * written when the filter is bad or the principal has too many streams open;
 * otherwise the sink becomes the stream, ended when the client goes away or
 * the host's session ends.
 */
export async function serveListen(gateway: GatewayContext, face: TaskHostFace, request: ListenRequest, sink: ListenSink): Promise<void> {
  const requested = parseListenFilter(request.params);
  // A client that hangs up while the host opens is seen here: nothing is kept for it.
  let gone = false;
  const offGone = sink.onGone(() => (gone = true));
  const host = await hostFor(gateway, face, request.principal, request.clientInfo);
  const taskIds = request.tasksDeclared ? await ownTasks(host, requested.taskIds ?? []) : [];
  offGone();
  if (gone) return;
  // From the count to streams.add() below nothing awaits, so concurrent listens cannot pass the limit together.
  const streams = openOf(gateway, host.session.id);
  if (streams.size >= MAX_LISTENS_PER_HOST) {
    throw new GatewayError(
      ErrorCodes.LIMIT_REACHED,
      `this principal already has ${MAX_LISTENS_PER_HOST} subscriptions/listen streams open on this endpoint; close one (one stream can carry every notification kind and many URIs and task ids)`,
    );
  }
  const honored = honoredFlags(requested, host.capabilities);
  const resources = host.capabilities.resources as { subscribe?: boolean } | undefined;
  const wantedUris = resources?.subscribe === true ? (requested.resourceSubscriptions ?? []) : [];
  const wantedTasks = new Set(taskIds);
  const subscriptionId = request.id;
  const stamp = (params: Record<string, unknown> | undefined) => ({
    ...params,
    _meta: { ...(params?._meta as Record<string, unknown> | undefined), [SUBSCRIPTION_ID_META_KEY]: subscriptionId },
  });

  let closed = false;
  let timer: TimerHandle | undefined;
  let stop: (() => void) | undefined;
  const write = (message: Record<string, unknown>) => {
    if (!closed && sink.started && !sink.finished) sink.write(message);
  };
  const teardown = (graceful: boolean) => {
    if (closed) return;
    if (graceful) {
      // SEP-2575: the listen request's result is the server's graceful end of the subscription.
      const serverInfo = { name: "emceepee", version: "0" };
      write({
        id: subscriptionId,
        result: { resultType: "complete", _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId, [SERVER_INFO_META_KEY]: serverInfo } },
      });
    }
    closed = true;
    gateway.clock.clearTimeout(timer);
    stop?.();
    streams.delete(close);
    if (streams.size === 0) open.get(gateway)?.delete(host.session.id);
    if (sink.started && !sink.finished) sink.end(); // before the start, the caller answers with the error
  };
  const close = () => teardown(true);
  const onEvent = (event: HostEvent) => {
    if (event.kind === "closed") return teardown(true);
    if (event.kind === "task") {
      if (wantedTasks.has(event.taskId)) write({ method: "notifications/tasks", params: stamp(event.task) });
      return;
    }
    const flag = FLAGS.find((f) => LIST_METHOD[f] === event.method);
    const wanted =
      flag !== undefined ? honored[flag] === true : event.method === "notifications/resources/updated" && subscribedUris.has(String(event.params?.uri));
    if (wanted) write({ method: event.method, params: stamp(event.params) });
  };
  let subscribedUris = new Set<string>();
  streams.add(close);
  sink.onGone(() => teardown(false));
  try {
    const listening = await host.listen(onEvent, wantedUris);
    if (closed) return listening.stop(); // the client went away while the host subscribed
    stop = listening.stop;
    subscribedUris = new Set(listening.subscribed);
  } catch (err) {
    teardown(false);
    throw err;
  }
  // The host's session connects an upstream on first use: a list makes it connect, so its list changes can come.
  for (const flag of FLAGS) {
    if (honored[flag] === true) void host.request(LIST_METHOD[flag].replace(/^notifications\/(\w+)\/list_changed$/, "$1/list"), {});
  }
  const acknowledged: ListenFilter = { ...honored };
  if (subscribedUris.size > 0) acknowledged.resourceSubscriptions = [...subscribedUris];
  if (request.tasksDeclared && requested.taskIds !== undefined) acknowledged.taskIds = taskIds;
  sink.start();
  write({ method: "notifications/subscriptions/acknowledged", params: stamp({ notifications: acknowledged }) });
  if (Object.keys(acknowledged).length === 0 || (acknowledged.taskIds?.length === 0 && Object.keys(acknowledged).length === 1)) {
    return teardown(true); // nothing it asked for can come
  }
  const keepAlive = () => {
    if (closed) return;
    if (!sink.finished) sink.keepAlive?.();
    host.session.touch(); // an open stream is the principal's activity on the face
    timer = gateway.clock.setTimeout(keepAlive, LISTEN_KEEPALIVE_MS);
  };
  timer = gateway.clock.setTimeout(keepAlive, LISTEN_KEEPALIVE_MS);
}
