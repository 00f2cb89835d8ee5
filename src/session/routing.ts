/**
 * ClientRouting: a session's policy for what its upstreams send towards the
 * client. Server→client requests and notifications go natively through the
 * bridge when the client's face shows that server and the client can take
 * them, otherwise into the pending queue / buffers (never dropped). A
 * server→client request comes with the origin of the call it belongs to when
 * the connection could attribute it: the bridge then sends it where that call
 * lives (its downstream request's stream, or its task's tasks/result), and the
 * gateway task owning the call reads `input_required` while the request waits
 * for the client (ADR 0002 §8). A face that will install a bridge says so when
 * it starts (BridgeSlot below): a request its upstreams send before (roots/list
 * on `initialized`) waits for it (docs/adr/0060). Upstream task ids are
 * translated to the gateway's (or hidden). When a connection drops, the work
 * that depended on it is failed (design UP-5) and the pool reconnects it.
 */
import { RELATED_TASK_META_KEY } from "@modelcontextprotocol/sdk/types.js";
import { within, type Clock } from "../clock.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { TaskRecord } from "../store/contracts.js";
import { relatedTaskId, toMcpTask, withRelatedTask } from "../mcp/task-object.js";
import type { TaskManager } from "../tasks/task-manager.js";
import type { UpstreamHandlers } from "../upstream/client-handlers.js";
import type { ListKind } from "../upstream/requests.js";
import type { CallOrigin } from "../upstream/origin.js";
import { canElicit, type DownstreamBridge } from "./bridge.js";
import type { BufferManager } from "./buffers.js";
import type { EventSystem } from "./event-system.js";
import type { PendingRequests } from "./pending-requests.js";

/** How long a server→client request waits for a connecting client's face and its `initialized`, together. */
const CLIENT_INITIALIZE_WAIT_MS = 10_000;

/** What routing reads and feeds in its session. */
export interface RoutingHost {
  readonly tasks: TaskManager;
  readonly pending: PendingRequests;
  readonly buffers: BufferManager;
  readonly events: EventSystem;
  readonly logger: Logger;
  readonly clock: Clock;
  isClosed(): boolean;
  /** The connection to `server` dropped and its work was failed: reconnect it. */
  dropped(server: string, counts: { failedTasks: number; rejectedRequests: number }): void;
}

export class ClientRouting {
  /** The session's native route to its client (its face installs it). */
  readonly bridge: BridgeSlot;

  constructor(private readonly host: RoutingHost) {
    this.bridge = new BridgeSlot(host.clock);
  }

  /** The handlers a connection to `server` answers and records its traffic with. */
  handlersFor(server: string): UpstreamHandlers {
    const { pending, buffers } = this.host;
    return {
      onElicit: (upstreamParams, signal, origin) =>
        this.waitingForClient(origin, async () => {
          const params = this.relate(server, upstreamParams, origin);
          const mode = (params as { mode?: string }).mode ?? "form";
          const bridge = await this.initializedBridgeFor(server, signal);
          if (bridge && canElicit(bridge.clientCapabilities, mode)) return bridge.elicit(server, params, signal, origin);
          return pending.add("elicitation", server, params, signal);
        }),
      onSample: (upstreamParams, signal, origin) =>
        this.waitingForClient(origin, async () => {
          const params = this.relate(server, upstreamParams, origin);
          const bridge = await this.initializedBridgeFor(server, signal);
          if (bridge?.clientCapabilities.sampling) return bridge.sample(server, params, signal, origin);
          return pending.add("sampling", server, params, signal);
        }),
      onListRoots: async (signal, origin) => {
        const bridge = await this.initializedBridgeFor(server, signal);
        if (bridge?.clientCapabilities.roots) return bridge.listRoots(signal, origin);
        return { roots: [] };
      },
      onNotification: (method, upstreamParams) => {
        if (method === "notifications/tasks/status") {
          this.onUpstreamTaskStatus(server, upstreamParams).catch((err: unknown) =>
            this.host.logger.error({ server, err: errorMessage(err) }, "upstream_task_status_failed"),
          );
          return;
        }
        // Task-related notifications name the upstream's task in _meta: the client sees the gateway's id.
        const params = upstreamParams && this.relate(server, upstreamParams);
        buffers.addNotification(server, method, params);
        this.bridgeFor(server)?.notify(server, method, params);
      },
      onLog: (upstreamParams) => {
        const params = this.relate(server, upstreamParams);
        buffers.addLog(server, params.level, params.data, params.logger);
        this.bridgeFor(server)?.notify(server, "notifications/message", params);
      },
      onStderr: (line) => buffers.addLog(server, "info", line, "stderr"),
      onDisconnect: (reason) => {
        this.onUpstreamDisconnect(server, reason).catch((err: unknown) =>
          this.host.logger.error({ server, err: errorMessage(err) }, "upstream_disconnect_reconciliation_failed"),
        );
      },
    };
  }

  /** A list of `server` changed across a reconnect: tell the client as the upstream would have. */
  listChanged(server: string, kind: ListKind): void {
    const method = `notifications/${kind}/list_changed`;
    this.host.buffers.addNotification(server, method, undefined);
    this.bridgeFor(server)?.notify(server, method, undefined);
  }

  /** A gateway task changed status: the client hears it under the gateway's id. */
  taskStatusChanged(record: TaskRecord): void {
    this.bridge.get()?.notify(record.server, "notifications/tasks/status", toMcpTask(record));
  }

  /** A server was added or removed: the aggregate face's lists changed. */
  serverSetChanged(): void {
    const bridge = this.bridge.get();
    if (!bridge?.aggregate) return;
    for (const kind of ["tools", "resources", "prompts"]) bridge.notify("", `notifications/${kind}/list_changed`, undefined);
  }

  /**
   * The native route to this session's client for what `server` sends — only
   * when the client's face shows that server (an attached meta face may use
   * others; their requests wait in the pending queue instead).
   */
  private bridgeFor(server: string): DownstreamBridge | undefined {
    const bridge = this.bridge.get();
    return bridge?.serves(server) ? bridge : undefined;
  }

  /**
   * The bridge for a server→client request: upstreams may ask before their
   * face has installed its bridge (they connect while it starts) and before
   * the client has sent `initialized`; wait a while for both, then use the
   * pending queue (a client that never initializes must not hold upstream requests).
   */
  private async initializedBridgeFor(server: string, signal: AbortSignal): Promise<DownstreamBridge | undefined> {
    const deadline = this.host.clock.now() + CLIENT_INITIALIZE_WAIT_MS;
    const bridge = await this.bridge.wait(signal, CLIENT_INITIALIZE_WAIT_MS);
    if (!bridge?.serves(server)) return undefined;
    return (await bridge.whenInitialized(signal, Math.max(0, deadline - this.host.clock.now()))) ? bridge : undefined;
  }

  /**
   * While `forward` waits for the client, the gateway task owning the call
   * (if any, now or once promoted) reads `input_required`.
   */
  private async waitingForClient<T>(origin: CallOrigin | undefined, forward: () => Promise<T>): Promise<T> {
    const done = origin?.awaitClient();
    try {
      return await forward();
    } finally {
      done?.();
    }
  }

  /**
   * A request an upstream sends inside one of its tasks names that task in
   * `_meta`: the client sees the gateway's task id instead (or nothing, when
   * the gateway drives that upstream task itself for a blocking call). A
   * request attributed to a call a gateway task owns names that task (spec:
   * task-related requests MUST carry related-task metadata).
   */
  private relate<T extends { _meta?: Record<string, unknown> | undefined }>(server: string, params: T, origin?: CallOrigin): T {
    const upstreamId = relatedTaskId(params._meta);
    // From memory (running tasks only): what the upstream sends keeps its order.
    const taskId = upstreamId === undefined ? undefined : this.host.tasks.runningByUpstreamId(server, upstreamId);
    if (taskId !== undefined) return withRelatedTask(params, taskId);
    if (origin?.taskId !== undefined) return withRelatedTask(params, origin.taskId);
    if (upstreamId === undefined) return params;
    const { [RELATED_TASK_META_KEY]: _hidden, ...meta } = params._meta ?? {};
    const { _meta: _replaced, ...rest } = params;
    return (Object.keys(meta).length ? { ...rest, _meta: meta } : rest) as T;
  }

  /**
   * An upstream's notifications/tasks/status about one of its tasks: the
   * gateway task mapped onto it takes the news (terminal failures end it) and
   * the client hears about it under the gateway's task id. Upstream ids never
   * reach the client; notices about tasks the gateway does not map are dropped.
   */
  private async onUpstreamTaskStatus(server: string, params: Record<string, unknown> | undefined): Promise<void> {
    const { tasks } = this.host;
    const upstreamId = typeof params?.taskId === "string" ? params.taskId : undefined;
    const record = upstreamId === undefined ? undefined : await tasks.findByUpstreamId(server, upstreamId);
    if (!record || record.status !== "working") return;
    const message = typeof params?.statusMessage === "string" ? params.statusMessage : undefined;
    switch (params?.status) {
      case "completed":
      case "failed":
      case "cancelled":
        await tasks.endUpstream(record.taskId, params.status, message);
        return;
      default:
        await tasks.noteUpstreamStatus(record.taskId, message);
        this.bridge.get()?.notify(server, "notifications/tasks/status", {
          ...toMcpTask(await tasks.get(record.taskId)),
          status: params?.status === "input_required" ? "input_required" : "working",
        });
    }
  }

  /**
   * Invalidation at the drop (design UP-5), not after the reconnect: a closed
   * transport can carry no answer, so working tasks fail and pending
   * elicitations/sampling are rejected now ("state unknown": the upstream may
   * or may not have acted). Then the pool reconnects in the background
   * (reconnection.ts).
   */
  private async onUpstreamDisconnect(server: string, reason: string): Promise<void> {
    const { host } = this;
    if (host.isClosed()) return;
    const why = `upstream '${server}' disconnected (${reason}); the call's state is unknown — it may or may not have completed upstream`;
    // One change for the client: the failed tasks, rejected requests and server_disconnected are seen together.
    await host.events.batch(async () => {
      const rejected = host.pending.rejectServer(server, why);
      const failedTasks = await host.tasks.failWorkingForServer(server, why);
      if (host.isClosed()) return;
      host.dropped(server, { failedTasks: failedTasks.length, rejectedRequests: rejected });
      host.events.add("server_disconnected", server, { reason, failedTasks, rejectedRequests: rejected });
      host.logger.warn({ server, reason, failedTasks: failedTasks.length }, "session_upstream_disconnected");
    });
  }
}

/**
 * Where a session's bridge lives. The transparent face connects its upstreams
 * before it can build the bridge (its server's capabilities come from them),
 * and an upstream may ask the instant it gets `initialized` (roots/list, as
 * server-filesystem does). So the face says a bridge is coming when it starts
 * (expect()), and wait() gives such a request the bridge once installed, not
 * "none". Installing a bridge, or undefined (none is coming after all, or the
 * face closed), ends every wait. A session no face expects one for (the
 * meta-tools face) waits for nothing.
 */
export class BridgeSlot {
  private current: DownstreamBridge | undefined;
  /** Resolved by install() while a bridge is expected. */
  private coming: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(private readonly clock: Clock) {}

  get(): DownstreamBridge | undefined {
    return this.current;
  }

  install(bridge: DownstreamBridge | undefined): void {
    this.current = bridge;
    this.coming?.resolve();
    this.coming = undefined;
  }

  /** A face that will install a bridge is starting. */
  expect(): void {
    if (!this.coming) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.coming = { promise, resolve };
    }
  }

  /** The bridge now or, while one is expected, once installed (undefined after `timeoutMs`); rejects if `signal` aborts first. */
  async wait(signal: AbortSignal, timeoutMs: number): Promise<DownstreamBridge | undefined> {
    if (!this.current && this.coming) await within(this.coming.promise, signal, timeoutMs, this.clock);
    return this.current;
  }
}
