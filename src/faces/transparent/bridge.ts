/**
 * The transparent face's DownstreamBridge: forwards an upstream's
 * server→client requests and notifications to this session's own client.
 * Where a request goes follows the call it belongs to (its CallOrigin, when
 * the connection could attribute it, ADR 0002 §8):
 * - a call serving a request of this client still being answered: that
 *   request's stream (`relatedRequestId`), as MCP asks;
 * - a call owned by a task of this face (a gateway-owned task's background
 *   call): the stream of the client's tasks/result for that task, with the
 *   task's related-task metadata — queued until the client asks (spec
 *   2025-11-25: the requestor that sees `input_required` calls tasks/result);
 * - otherwise (unknown, or a call of another face): the standalone stream,
 *   once the client has it open (over Streamable HTTP the SDK only stores
 *   what is sent while it is not, for a replay no first GET asks for): the
 *   request waits for it up to `gateway.http.standaloneStreamWaitMs`, then
 *   the upstream gets EMCP_CLIENT_UNREACHABLE (docs/adr/0047).
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListRootsResultSchema,
  type ClientCapabilities,
  type RequestId,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { AnySchema, SchemaOutput } from "@modelcontextprotocol/sdk/server/zod-compat.js";
import { systemClock, within, type Clock } from "../../clock.js";
import { DEFAULT_SETTINGS } from "../../config/schema.js";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../../errors.js";
import type { Logger } from "../../logging.js";
import { standaloneListenerOf, type StandaloneListener } from "../../mcp/standalone-listener.js";
import type { DownstreamBridge } from "../../session/bridge.js";
import type { CallOrigin } from "../../upstream/origin.js";
import type { Catalog } from "./catalog.js";

interface Queued {
  send(relatedRequestId: RequestId): void;
  reject(err: Error): void;
}

/**
 * The client's requests still being answered on this face, the tasks/result
 * requests waiting for each task, and the server→client requests queued for
 * a task until its tasks/result comes.
 */
export class DownstreamRoutes {
  private readonly inflight = new Set<RequestId>();
  private readonly resultRequests = new Map<string, RequestId[]>();
  private readonly queued = new Map<string, Set<Queued>>();
  /** Requests waiting for the client's standalone stream: how each gives up when the face closes. */
  private readonly awaitingStream = new Set<(err: Error) => void>();

  constructor(
    private readonly clock: Clock = systemClock,
    private readonly logger?: Logger,
  ) {}

  /** Request `id` is being answered until the returned function is called. */
  track(id: RequestId): () => void {
    this.inflight.add(id);
    return () => this.inflight.delete(id);
  }

  has(id: RequestId): boolean {
    return this.inflight.has(id);
  }

  /**
   * The client's tasks/result `id` waits for task `taskId`: what is queued for
   * the task goes out on its stream now, and what comes later too, until the
   * returned function is called.
   */
  consume(taskId: string, id: RequestId): () => void {
    const waiting = this.resultRequests.get(taskId) ?? [];
    waiting.push(id);
    this.resultRequests.set(taskId, waiting);
    const queued = this.queued.get(taskId);
    this.queued.delete(taskId);
    for (const q of queued ?? []) q.send(id);
    return () => {
      const i = waiting.indexOf(id);
      if (i >= 0) waiting.splice(i, 1);
      if (!waiting.length && this.resultRequests.get(taskId) === waiting) this.resultRequests.delete(taskId);
    };
  }

  /**
   * Runs `send` with the id of a tasks/result waiting for `taskId` — the
   * latest, now, or the next one to come (bounded by `timeoutMs` and `signal`).
   */
  viaTaskResult<T>(taskId: string, signal: AbortSignal, timeoutMs: number, send: (relatedRequestId: RequestId) => Promise<T>): Promise<T> {
    const current = this.resultRequests.get(taskId)?.at(-1);
    if (current !== undefined) return send(current);
    return new Promise<T>((resolve, reject) => {
      const set = this.queued.get(taskId) ?? new Set<Queued>();
      this.queued.set(taskId, set);
      const leave = () => {
        this.clock.clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        set.delete(entry);
        if (!set.size && this.queued.get(taskId) === set) this.queued.delete(taskId);
      };
      const entry: Queued = {
        send: (id) => {
          leave();
          send(id).then(resolve, reject);
        },
        reject: (err) => {
          leave();
          reject(err);
        },
      };
      const onAbort = () => entry.reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? "cancelled")));
      // As long as a forwarded request waits for its answer (pendingRequests.timeoutMs).
      const timer = this.clock.setTimeout(
        () => entry.reject(new Error(`the client did not call tasks/result for task ${taskId} within ${timeoutMs}ms`)),
        timeoutMs,
      );
      set.add(entry);
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Runs `send` once the client's standalone stream is open — now, or when its
   * GET comes (bounded by `timeoutMs` and `signal`). Without a watched stream
   * (stdio) it runs at once. Past the bound the upstream gets a JSON-RPC error
   * naming the setting, instead of waiting for its own timeout.
   */
  viaStandalone<T>(stream: StandaloneListener | undefined, method: string, signal: AbortSignal, timeoutMs: number, send: () => Promise<T>): Promise<T> {
    if (!stream || stream.open) return send();
    this.logger?.debug({ method }, "client_stream_wait");
    return new Promise<T>((resolve, reject) => {
      const leave = () => {
        this.clock.clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        unsubscribe();
        this.awaitingStream.delete(fail);
      };
      const fail = (err: Error) => {
        leave();
        reject(err);
      };
      const unsubscribe = stream.onOpen(() => {
        if (!stream.open) return;
        leave();
        send().then(resolve, reject);
      });
      const onAbort = () => fail(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? "cancelled")));
      const timer = this.clock.setTimeout(() => {
        this.logger?.warn({ method, waitedMs: timeoutMs }, "client_stream_missing");
        fail(
          toJsonRpcError(
            new GatewayError(
              ErrorCodes.CLIENT_UNREACHABLE,
              `emceepee could not send ${method} to its client: the client did not open its standalone GET stream (the only way a request that belongs to no call of the client's can reach it over Streamable HTTP) within ${timeoutMs}ms (gateway.http.standaloneStreamWaitMs)`,
              { details: { method, waitedMs: timeoutMs } },
            ),
          ),
        );
      }, timeoutMs);
      this.awaitingStream.add(fail);
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** The face closed: nothing queued can reach its client any more. */
  close(reason: string): void {
    for (const fail of [...this.awaitingStream]) fail(new GatewayError(ErrorCodes.CLOSED, reason));
    for (const set of [...this.queued.values()]) for (const q of [...set]) q.reject(new GatewayError(ErrorCodes.CLOSED, reason));
    this.queued.clear();
    this.resultRequests.clear();
    this.inflight.clear();
  }
}

export function createBridge(
  server: Server,
  clientCapabilities: ClientCapabilities,
  catalog: Catalog,
  routes: DownstreamRoutes,
  requestTimeoutMs: number,
  /** Resolves once the client has sent `initialized`; nothing is sent to it before (see whenInitialized). */
  initialized: Promise<void> = Promise.resolve(),
  clock: Clock = systemClock,
  /** How long a request for the standalone stream waits for the client to open it (gateway.http.standaloneStreamWaitMs). */
  standaloneWaitMs: number = DEFAULT_SETTINGS.http.standaloneStreamWaitMs,
): DownstreamBridge {
  let ready = false;
  void initialized.then(() => (ready = true));
  const send = (upstream: string, method: string, params: Record<string, unknown> | undefined) => {
    let forwarded = params;
    if (method === "notifications/message" && catalog.target.kind === "all" && params) {
      forwarded = {
        ...params,
        logger: params.logger ? `${upstream}/${typeof params.logger === "string" ? params.logger : JSON.stringify(params.logger)}` : upstream,
      };
    }
    // Capabilities the client was not offered make the SDK throw: such notifications are not for it.
    try {
      void server.notification({ method, ...(forwarded ? { params: forwarded } : {}) }).catch(() => undefined);
    } catch {
      /* not advertised on this face */
    }
  };
  /** Sends one server→client request where the call it belongs to lives (see the header). */
  const ask = <S extends AnySchema>(
    request: ServerRequest,
    schema: S,
    signal: AbortSignal,
    origin: CallOrigin | undefined,
    /** @default the SDK's request timeout */
    timeout?: number,
  ): Promise<SchemaOutput<S>> => {
    const send = (relatedRequestId?: RequestId) =>
      server.request(request, schema, {
        signal,
        ...(timeout !== undefined ? { timeout } : {}),
        ...(relatedRequestId !== undefined ? { relatedRequestId } : {}),
      });
    // Read when sent: the face is built before the endpoint connects its transport.
    const standalone = () => routes.viaStandalone(standaloneListenerOf(server.transport), request.method, signal, standaloneWaitMs, () => send());
    if (origin?.downstream !== server) return standalone();
    if (origin.requestId !== undefined && routes.has(origin.requestId)) return send(origin.requestId);
    if (origin.taskId !== undefined) return routes.viaTaskResult(origin.taskId, signal, timeout ?? requestTimeoutMs, send);
    return standalone();
  };
  return {
    clientCapabilities,
    // A virtual face serves several upstreams too: a server added or removed may change its lists.
    aggregate: catalog.target.kind !== "server",
    serves: (upstream) => (catalog.target.kind === "server" ? catalog.target.server === upstream : catalog.servers().includes(upstream)),
    whenInitialized: (signal, timeoutMs) => (ready ? Promise.resolve(true) : within(initialized, signal, timeoutMs, clock)),
    // Humans answer these: they wait as long as queued ones do (pendingRequests.timeoutMs).
    elicit: (_upstream, params, signal, origin) => ask({ method: "elicitation/create", params }, ElicitResultSchema, signal, origin, requestTimeoutMs),
    sample: (_upstream, params, signal, origin) =>
      ask({ method: "sampling/createMessage", params }, CreateMessageResultSchema, signal, origin, requestTimeoutMs),
    listRoots: (signal, origin) => ask({ method: "roots/list" }, ListRootsResultSchema, signal, origin),
    notify(upstream, method, params) {
      // Nothing goes to a client before it is initialized (the session's buffers still have it).
      if (ready) send(upstream, method, params);
    },
  };
}
