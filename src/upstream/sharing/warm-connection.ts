/**
 * WarmConnection (docs/adr/0044): a session connection the warm pool makes
 * before any session asks — its process spawned, the upstream's `initialize`
 * done with the capabilities of the last session that took one, its tool
 * list fetched — so that a session's first call is one round trip. Until a
 * session takes it, what the upstream sends waits here: notifications, log
 * messages and stderr lines are kept (bounded) and handed to the taking
 * session in order; a request (roots/list, elicitation, sampling) waits for
 * the session; a task-augmented request fails (no session holds tasks yet).
 * Nothing reaches a session before it takes the connection, and only the
 * session that takes it: it brings its own handlers, logger, persistence and
 * receiver-task store.
 */
import type { CreateTaskOptions } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js";
import type {
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult,
  ListRootsResult,
  LoggingMessageNotification,
  Request,
  RequestId,
  Result,
  Task,
} from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { Logger } from "../../logging.js";
import type { ClientTaskStore, UpstreamHandlers } from "../client-handlers.js";
import type { CallOrigin } from "../origin.js";
import type { ReceiverTaskStore } from "../receiver-tasks.js";
import type { UpstreamConnection, UpstreamConnectionOptions } from "../connection.js";
import type { Ahead } from "./warm-pool.js";

/** What the upstream sent before the take that is kept for the session: at most this many (the oldest dropped, counted). */
const KEPT = 100;

/** The parts a session brings when it takes a warm connection. */
export type TakeParts = Pick<UpstreamConnectionOptions, "handlers" | "logger" | "persistence"> & { receiverTasks: ReceiverTaskStore };

export class WarmConnection implements Ahead {
  readonly connection: UpstreamConnection;
  private readonly pending: PendingHandlers;
  private readonly tasks = new LateTaskStore();

  /**
   * `make` builds the connection with these handlers and task store (the rest is the pool's: roots of the key,
   * no child slot of its own); it is connected at once. `lost`: it failed or its process ended before a take.
   */
  constructor(make: (parts: { handlers: UpstreamHandlers; clientTaskStore: ClientTaskStore }) => UpstreamConnection, lost: () => void, logger: Logger) {
    this.pending = new PendingHandlers(lost, logger);
    this.connection = make({ handlers: this.pending, clientTaskStore: this.tasks });
    this.ready = this.connection.connectAhead();
    this.ready.catch(() => lost());
  }

  /** Settles when the connect made ahead is done (initialize and the tool list) or failed. */
  readonly ready: Promise<void>;

  /** Connecting or connected: a session may take it. */
  get alive(): boolean {
    const s = this.connection.status;
    return s === "connecting" || s === "connected";
  }

  /** A session takes the connection: from its connect() on, what the upstream sends is the session's (what waited first). */
  take(parts: TakeParts, releaseChild: () => void): UpstreamConnection {
    this.tasks.bind(parts.receiverTasks);
    const { handlers: _handlers, ...rest } = parts;
    this.connection.adopt(rest, releaseChild, () => {
      this.pending.bind(parts.handlers);
      // The upstream gave up on a roots/list between the take and now (before it, the connection is not handed out):
      // tell it the list changed, which a server that cares about roots answers by asking again.
      if (this.pending.rootsMissed) void this.connection.sendRootsListChanged().catch(() => undefined);
    });
    return this.connection;
  }

  close(): Promise<void> {
    return this.connection.close();
  }
}

type Kept =
  | { kind: "notification"; method: string; params: Record<string, unknown> | undefined }
  | { kind: "log"; params: LoggingMessageNotification["params"] }
  | { kind: "stderr"; line: string };

/** The handlers of a warm connection: kept until bind(), then the session's. */
class PendingHandlers implements UpstreamHandlers {
  private target: UpstreamHandlers | undefined;
  private readonly kept: Kept[] = [];
  private dropped = 0;
  private readonly waiters = new Set<() => void>();
  /** A roots/list the upstream gave up waiting for before any session took the connection. */
  rootsMissed = false;

  constructor(
    private readonly lost: () => void,
    private readonly logger: Logger,
  ) {}

  /** The session's handlers from now on; what waited reaches them first, in order. */
  bind(target: UpstreamHandlers): void {
    if (this.dropped > 0) this.logger.info({ dropped: this.dropped, kept: this.kept.length }, "warm_connection_messages_dropped");
    for (const k of this.kept.splice(0)) {
      if (k.kind === "notification") target.onNotification(k.method, k.params);
      else if (k.kind === "log") target.onLog(k.params);
      else target.onStderr(k.line);
    }
    this.target = target;
    for (const wake of [...this.waiters]) wake();
  }

  private keep(k: Kept): void {
    this.kept.push(k);
    if (this.kept.length > KEPT) {
      this.kept.shift();
      this.dropped++;
    }
  }

  /** The session's handlers, once one took the connection (a request before that waits, as long as the upstream lets it). */
  private session(signal: AbortSignal): Promise<UpstreamHandlers> {
    if (this.target) return Promise.resolve(this.target);
    return new Promise((resolve, reject) => {
      const wake = () => {
        this.waiters.delete(wake);
        signal.removeEventListener("abort", abort);
        resolve(this.target!);
      };
      const abort = () => {
        this.waiters.delete(wake);
        reject(signal.reason instanceof Error ? signal.reason : new Error("the upstream cancelled the request"));
      };
      this.waiters.add(wake);
      signal.addEventListener("abort", abort, { once: true });
    });
  }

  async onElicit(params: ElicitRequest["params"], signal: AbortSignal, origin: CallOrigin | undefined): Promise<ElicitResult> {
    return (await this.session(signal)).onElicit(params, signal, origin);
  }

  async onSample(params: CreateMessageRequest["params"], signal: AbortSignal, origin: CallOrigin | undefined): Promise<CreateMessageResult> {
    return (await this.session(signal)).onSample(params, signal, origin);
  }

  /**
   * A server may ask for roots once, right after `initialized` (server-filesystem does), and give up after its own
   * timeout while the connection waits for a session: then the taking session's roots would never reach it. Such a
   * connection is not handed out (lost: the pool ends it and makes another), whatever the roots capability says —
   * not every server asks again on `roots/list_changed`.
   */
  async onListRoots(signal: AbortSignal, origin: CallOrigin | undefined): Promise<ListRootsResult> {
    const target = await this.session(signal).catch((err: unknown) => {
      this.rootsMissed = true;
      this.lost();
      throw err;
    });
    return target.onListRoots(signal, origin);
  }

  onNotification(method: string, params: Record<string, unknown> | undefined): void {
    if (this.target) this.target.onNotification(method, params);
    else this.keep({ kind: "notification", method, params });
  }

  onLog(params: LoggingMessageNotification["params"]): void {
    if (this.target) this.target.onLog(params);
    else this.keep({ kind: "log", params });
  }

  onStderr(line: string): void {
    if (this.target) this.target.onStderr(line);
    else this.keep({ kind: "stderr", line });
  }

  onDisconnect(reason: string): void {
    if (this.target) this.target.onDisconnect(reason);
    else this.lost();
  }
}

/** The SDK client's task store: the taking session's receiver tasks; before a take, no task can be made. */
class LateTaskStore implements ClientTaskStore {
  private store: ReceiverTaskStore | undefined;

  bind(store: ReceiverTaskStore): void {
    this.store = store;
  }

  private get target(): ReceiverTaskStore {
    if (this.store) return this.store;
    throw new GatewayError(ErrorCodes.BAD_REQUEST_STATE, "no session has taken this connection yet: it holds no tasks");
  }

  signalFor(taskId: string): AbortSignal {
    return this.target.signalFor(taskId);
  }

  createTask(params: CreateTaskOptions, requestId: RequestId, request: Request): Promise<Task> {
    return this.target.createTask(params, requestId, request);
  }

  getTask(taskId: string): Promise<Task | null> {
    return this.target.getTask(taskId);
  }

  storeTaskResult(taskId: string, status: "completed" | "failed", result: Result): Promise<void> {
    return this.target.storeTaskResult(taskId, status, result);
  }

  getTaskResult(taskId: string): Promise<Result> {
    return this.target.getTaskResult(taskId);
  }

  updateTaskStatus(taskId: string, status: Task["status"], statusMessage?: string): Promise<void> {
    return this.target.updateTaskStatus(taskId, status, statusMessage);
  }

  listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    return this.target.listTasks(cursor);
  }
}
