/**
 * The tasks extension served to 2026-07-28 clients (SEP-2663; ADR 0032,
 * "Tasks across eras"; design EV-17). A modern request has no session, so the
 * tasks of one principal on one face live in a task host: a gateway-owned
 * session whose id is derived from the face and the principal (the same on
 * every replica), driven over an in-memory 2025 transport pair like the
 * stateless path's, but kept while its tasks are asked about. Its face runs a
 * modern tools/call as a 2025 task-augmented call, so the task is the one the
 * 2025 face would make — stored in the durable task store before the answer,
 * a legacy upstream's own task bridged as on that face — and tasks/get,
 * tasks/update and tasks/cancel are its 2025 tasks/get, tasks/result and
 * tasks/cancel. What the face asks of the client for a task (elicitation,
 * sampling: a 2025 upstream's side-channel requests, delivered while the
 * host's tasks/result waits) is held as the task's `inputRequests` until
 * tasks/update answers it. The host is also where a principal's
 * `subscriptions/listen` streams on the face listen (modern-subscriptions.ts):
 * the face's list changes, resource updates and task statuses reach the host's
 * client, and the host hands them to its listeners.
 */
import { createHash, randomUUID } from "node:crypto";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { RELATED_TASK_META_KEY, type Implementation, type JSONRPCMessage, type Task } from "@modelcontextprotocol/sdk/types.js";
import { refreshInboundToken, type Principal } from "../auth/principal.js";
import type { TimerHandle } from "../clock.js";
import { errorMessage } from "../errors.js";
import { createTaskResult, detailedTask, type InputRequest, type TaskOutcome } from "../mcp/modern/tasks-extension.js";
import type { GatewayContext } from "../session/gateway-context.js";
import type { Session } from "../session/session.js";
import type { FaceRecord } from "../store/contracts.js";
import type { FaceServer } from "./face-server.js";
import { MetaTasks, cancelledNotification } from "./modern-meta-tasks.js";

export interface TaskHostFace {
  face(
    session: Session,
    init: { protocolVersion: string; capabilities: Record<string, unknown>; clientInfo: Implementation },
  ): FaceServer | Promise<FaceServer>;
  kind: FaceRecord;
}

export type RpcAnswer = { result: Record<string, unknown> } | { error: { code: number; message: string; data?: unknown } };

/**
 * How long a tools/call waits for its task to end before answering with the
 * task: a call that ends sooner is answered with its result, as SEP-2663's
 * immediate-result shortcut allows (a quick tool is not made a task the client must poll).
 */
export const IMMEDIATE_RESULT_MS = 200;

/** What the host says it can answer: the requests a task may wait for (roots are not: the face would ask at once, for no task). */
const HOST_CAPABILITIES = { elicitation: { form: {}, url: {} }, sampling: {} };
const INPUT_METHODS = new Set(["elicitation/create", "sampling/createMessage", "roots/list"]);
const INNER_VERSION = "2025-11-25";

/** What the host hears for its listeners: a notification of the face, or a task's new state (a 2026-07-28 DetailedTask). */
export type HostEvent =
  | { kind: "notification"; method: string; params?: Record<string, unknown> }
  | { kind: "task"; taskId: string; task: Record<string, unknown> }
  /** The host closed (its session ended): nothing more comes. */
  | { kind: "closed" };
export type HostListener = (event: HostEvent) => void;
const LIST_CHANGES = new Set([
  "notifications/tools/list_changed",
  "notifications/prompts/list_changed",
  "notifications/resources/list_changed",
  "notifications/resources/updated",
]);

interface HeldInput {
  request: InputRequest;
  /** The face's request id on the in-memory pair. */
  id: string | number;
}

function stripRelated<T extends { _meta?: unknown }>(value: T): T {
  const meta = value._meta as Record<string, unknown> | undefined;
  if (meta === undefined || !(RELATED_TASK_META_KEY in meta)) return value;
  const { [RELATED_TASK_META_KEY]: _related, ...rest } = meta;
  const copy = { ...value };
  if (Object.keys(rest).length > 0) copy._meta = rest;
  else delete copy._meta;
  return copy;
}

function isTerminal(status: Task["status"]): boolean {
  return status === "completed" || status === "failed" || status === "cancelled";
}

/** The host session's id: one per face and principal, the same on every replica. */
export function taskHostSessionId(kind: FaceRecord, principal: Principal | undefined): string {
  const digest = createHash("sha256")
    .update(JSON.stringify(kind))
    .update("\u0000")
    .update(principal?.hash ?? "anonymous")
    .digest("hex");
  return `modern-tasks-${digest.slice(0, 32)}`;
}

export class TaskHost {
  private nextId = 0;
  private readonly pending = new Map<string | number, (answer: RpcAnswer) => void>();
  /** Held requests of the face, per gateway task id, by input key. */
  private readonly inputs = new Map<string, Map<string, HeldInput>>();
  /**
   * The one 2025 tasks/result in flight per running task (single flight). How a
   * task ended is not kept here: the durable task store has it, and the 2025
   * face's tasks/result answers from there when asked again.
   */
  private readonly watching = new Map<string, Promise<TaskOutcome | undefined>>();
  private closed = false;
  /** The principal's open subscriptions/listen streams on this face. */
  private readonly listeners = new Set<HostListener>();
  /** Resource URIs subscribed on the face for the listeners, with how many listeners want each. */
  private readonly subscriptions = new Map<string, { count: number; ready: Promise<boolean> }>();
  /** The last status announced of each running task (so a change is announced once); gone when the task ends. */
  private readonly announced = new Map<string, string>();
  private announcing: Promise<void> = Promise.resolve();
  /** The face's 2025 capabilities (its initialize answer): what a listen filter may be honored for. */
  capabilities: Record<string, unknown> = {};
  /** The face serves task-augmented tools/call (the transparent faces), or this host maps its promotions onto tasks (the meta face). */
  supportsTasks = false;
  /** The meta face's tasks (its promotions and approvals, in this host's session), served directly (modern-meta-tasks.ts). */
  private meta: MetaTasks | undefined;

  private constructor(
    private readonly gateway: GatewayContext,
    readonly session: Session,
    private readonly client: InMemoryTransport,
  ) {
    client.onmessage = (message) => this.onMessage(message);
  }

  static async open(gateway: GatewayContext, face: TaskHostFace, principal: Principal | undefined, clientInfo: Implementation): Promise<TaskHost> {
    const id = taskHostSessionId(face.kind, principal);
    // Stored like a 2025 session: after a restart (or on another replica) it resumes with its upstream sessions, so
    // its upstream tasks can be asked about again (a new upstream session would not know them).
    const resumed = await gateway.sessions.resume(id, face.kind);
    const session = resumed?.session ?? gateway.sessions.create({ id, downstreamCapabilities: HOST_CAPABILITIES, connect: false, oneShot: false, principal });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const host = new TaskHost(gateway, session, clientSide);
    try {
      const init = { protocolVersion: INNER_VERSION, capabilities: HOST_CAPABILITIES, clientInfo };
      const server = await face.face(session, init);
      host.server = server;
      await server.connect(serverSide);
      await clientSide.start();
      const initialized = await host.request("initialize", init);
      if (!("result" in initialized)) throw new Error(`the face refused the task host's initialize: ${JSON.stringify(initialized.error)}`);
      await clientSide.send({ jsonrpc: "2.0", method: "notifications/initialized" });
      if (!resumed) {
        const owner = principal && { issuer: principal.issuer, subject: principal.subject };
        const start = { face: face.kind, protocolVersion: INNER_VERSION, clientInfo, clientCapabilities: HOST_CAPABILITIES, ...(owner ? { owner } : {}) };
        await gateway.sessions.persist(session, start);
      }
      host.capabilities = (initialized.result.capabilities ?? {}) as Record<string, unknown>;
      const tasks = (initialized.result.capabilities as { tasks?: { requests?: { tools?: { call?: unknown } } } } | undefined)?.tasks;
      host.supportsTasks = tasks?.requests?.tools?.call !== undefined;
      if (face.kind.kind === "meta") {
        host.meta = new MetaTasks(gateway, session, (taskId) => host.announce(taskId));
        host.supportsTasks = true;
      }
      return host;
    } catch (err) {
      await host.close();
      await gateway.sessions.destroy(session.id, "task host failed to start");
      throw err;
    }
  }

  private server: FaceServer | undefined;

  /** A JSON-RPC request to the face; resolves with its answer (or an error once the host closes). */
  request(method: string, params: Record<string, unknown>): Promise<RpcAnswer> {
    return this.requestUntil(method, params, undefined) as Promise<RpcAnswer>;
  }

  /**
   * A request to the face on behalf of a caller that may hang up: once `closed`
   * settles first, the face is sent notifications/cancelled for it (its handler's
   * signal aborts, as when a 2025 client cancels) and this resolves undefined.
   */
  requestUntil(method: string, params: Record<string, unknown>, closed: Promise<void> | undefined): Promise<RpcAnswer | undefined> {
    if (this.closed) return Promise.resolve({ error: { code: -32000, message: "the task host closed (its session ended); ask again" } });
    const id = `h${++this.nextId}`;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      void closed?.then(() => {
        if (!this.pending.delete(id)) return;
        void this.client.send(cancelledNotification(id, "the 2026-07-28 caller closed its request")).catch(() => undefined);
        resolve(undefined);
      });
      this.client.send({ jsonrpc: "2.0", id, method, params }).catch((err: unknown) => {
        this.pending.delete(id);
        resolve({ error: { code: -32603, message: `the task host could not reach its face: ${String(err)}` } });
      });
    });
  }

  private onMessage(message: JSONRPCMessage): void {
    if ("id" in message && message.id !== undefined && ("result" in message || "error" in message)) {
      const resolve = this.pending.get(message.id);
      this.pending.delete(message.id);
      resolve?.("result" in message ? { result: message.result } : { error: message.error });
      return;
    }
    if (!("id" in message) && "method" in message) return this.onNotification(message.method, message.params);
    if (!("id" in message && "method" in message)) return;
    const params = (message.params ?? {}) as Record<string, unknown> & { _meta?: Record<string, unknown> };
    const related = params._meta?.[RELATED_TASK_META_KEY] as { taskId?: unknown } | undefined;
    const taskId = typeof related?.taskId === "string" ? related.taskId : undefined;
    if (taskId === undefined || !INPUT_METHODS.has(message.method)) {
      void this.client.send({
        jsonrpc: "2.0",
        id: message.id,
        error: { code: -32601, message: `a 2026-07-28 client is asked only through a task's inputRequests; ${message.method} belongs to no task` },
      });
      return;
    }
    let held = this.inputs.get(taskId);
    if (!held) this.inputs.set(taskId, (held = new Map<string, HeldInput>()));
    held.set(randomUUID(), { id: message.id, request: { method: message.method, params: stripRelated(params) } });
    this.announce(taskId);
  }

  /** A notification of the face: list changes and resource updates go to the listeners as they are, a task's status as its new state. */
  private onNotification(method: string, params: Record<string, unknown> | undefined): void {
    if (this.listeners.size === 0) return;
    if (method === "notifications/tasks/status") {
      const { taskId, status } = params ?? {};
      // A task's end is announced by its watch, with the outcome, when one runs.
      if (typeof taskId === "string" && !(isTerminal(status as Task["status"]) && this.watching.has(taskId))) this.announce(taskId);
      return;
    }
    if (!LIST_CHANGES.has(method)) return; // progress and log messages belong to requests, which the host's are not a client's
    const event: HostEvent = { kind: "notification", method, ...(params !== undefined ? { params: stripRelated(params) } : {}) };
    for (const listener of [...this.listeners]) listener(event);
  }

  /**
   * Tells the listeners a task's state once it changed (its status, or what it
   * waits for), in order: read with tasks/get, the result or error inlined once it ended.
   */
  private announce(taskId: string): void {
    if (this.listeners.size === 0 || this.closed) return;
    this.announcing = this.announcing.then(async () => {
      if (this.listeners.size === 0 || this.closed) return;
      const detailed = await this.getTask(taskId);
      if (!("result" in detailed)) return;
      const { resultType: _hint, ...task } = detailed.result;
      const status = String(task.status);
      const seen = `${status}:${Object.keys((task.inputRequests as object | undefined) ?? {}).join(",")}`;
      if (this.announced.get(taskId) === seen) return;
      if (["completed", "failed", "cancelled"].includes(status)) this.announced.delete(taskId);
      else this.announced.set(taskId, seen);
      const event: HostEvent = { kind: "task", taskId, task };
      for (const listener of [...this.listeners]) listener(event);
    });
    // One failed announcement must not end the chain (nor be an unhandled rejection): later ones still go out.
    this.announcing = this.announcing.catch((err: unknown) => {
      this.gateway.logger.warn({ taskId, err: errorMessage(err) }, "task_announce_failed");
    });
  }

  /**
   * Adds a listener; with `uris`, those resources are subscribed on the face
   * (once for all listeners) and unsubscribed when the last listener that wanted
   * them leaves. Resolves with the URIs the face took and the function that
   * removes the listener (and its subscriptions).
   */
  async listen(listener: HostListener, uris: readonly string[]): Promise<{ subscribed: string[]; stop: () => void }> {
    this.listeners.add(listener);
    const subscribed: string[] = [];
    for (const uri of new Set(uris)) {
      // Counted before the await, so that two listens for one URI subscribe it once and the first to leave does not unsubscribe the other's.
      let entry = this.subscriptions.get(uri);
      if (!entry) {
        const ready = this.request("resources/subscribe", { uri }).then(
          (answer) => !("error" in answer),
          () => false,
        );
        this.subscriptions.set(uri, (entry = { count: 0, ready }));
      }
      entry.count += 1;
      if (await entry.ready) {
        subscribed.push(uri);
        continue;
      }
      entry.count -= 1;
      if (entry.count === 0 && this.subscriptions.get(uri) === entry) this.subscriptions.delete(uri);
    }
    let live = true;
    const stop = () => {
      if (!live) return;
      live = false;
      this.listeners.delete(listener);
      for (const uri of subscribed) {
        const entry = this.subscriptions.get(uri);
        if (entry && --entry.count > 0) continue;
        this.subscriptions.delete(uri);
        void this.request("resources/unsubscribe", { uri });
      }
      if (this.listeners.size === 0) this.announced.clear();
    };
    if (this.closed) stop();
    return { subscribed, stop };
  }

  /** Runs a tools/call as a task: the created task, or the result when it ended within IMMEDIATE_RESULT_MS. */
  async callTool(params: Record<string, unknown>, closed?: Promise<void>): Promise<RpcAnswer | undefined> {
    const { task: _hint, ...plain } = params; // a legacy client's hint: tolerated, the gateway decides (SEP-2663)
    if (this.meta) {
      // A meta tool: execute_tool and run_code promote after IMMEDIATE_RESULT_MS unless the caller chose its timeout_ms.
      const args = (plain.arguments ?? {}) as Record<string, unknown>;
      const promoting = (plain.name === "execute_tool" || plain.name === "run_code") && args.timeout_ms === undefined;
      const call = promoting ? { ...plain, arguments: { ...args, timeout_ms: IMMEDIATE_RESULT_MS } } : plain;
      const answer = await this.requestUntil("tools/call", call, closed);
      return answer && this.meta.answer(plain.name, answer);
    }
    const created = await this.request("tools/call", { ...plain, task: {} });
    if ("error" in created) return created;
    const task = created.result.task as Task | undefined;
    if (task === undefined) return { result: { ...stripRelated(created.result), resultType: "complete" } };
    const ended = this.watch(task.taskId, true);
    const outcome = await this.within(ended, IMMEDIATE_RESULT_MS);
    if (outcome !== undefined && "result" in outcome) return { result: { ...outcome.result, resultType: "complete" } };
    if (outcome !== undefined) return { error: outcome.error };
    return { result: createTaskResult(task) };
  }

  /** tasks/get: the 2025 task, with what it waits for and, once it ended, its result or error inlined. */
  async getTask(taskId: string): Promise<RpcAnswer> {
    if (this.meta) return this.meta.getTask(taskId);
    const answer = await this.request("tasks/get", { taskId });
    if ("error" in answer) return answer;
    const task = answer.result as unknown as Task;
    let outcome: TaskOutcome | undefined;
    if (isTerminal(task.status) && task.status !== "cancelled") outcome = await this.watch(taskId, false);
    if (!isTerminal(task.status)) void this.watch(taskId, true);
    const inputs = Object.fromEntries([...(this.inputs.get(taskId) ?? [])].map(([key, held]) => [key, held.request]));
    return { result: detailedTask(task, inputs, outcome) };
  }

  /** tasks/update: answers the held requests named in `inputResponses` (unknown keys are ignored). */
  async updateTask(taskId: string, inputResponses: Record<string, unknown>): Promise<RpcAnswer> {
    if (this.meta) return this.meta.updateTask(taskId, inputResponses);
    const answer = await this.request("tasks/get", { taskId });
    if ("error" in answer) return answer;
    const held = this.inputs.get(taskId);
    for (const [key, response] of Object.entries(inputResponses)) {
      const input = held?.get(key);
      if (!input) continue;
      held?.delete(key);
      await this.client.send({ jsonrpc: "2.0", id: input.id, result: response as Record<string, unknown> });
    }
    return { result: { resultType: "complete" } };
  }

  /** tasks/cancel: the 2025 face's cancel (a task that ended already: acknowledged too); the requests the task waited for are withdrawn. */
  async cancelTask(taskId: string): Promise<RpcAnswer> {
    if (this.meta) return this.meta.cancelTask(taskId);
    const answer = await this.request("tasks/cancel", { taskId });
    if ("error" in answer) {
      // A task that ended already is acknowledged as a running one is (SEP-2663: idempotent); only an unknown one is an error.
      const known = await this.request("tasks/get", { taskId });
      if ("error" in known || !isTerminal((known.result as unknown as Task).status)) return answer;
    }
    this.withdraw(taskId);
    return { result: { resultType: "complete" } };
  }

  /** Whether `taskId` is one of this host's tasks (the principal's on this face). */
  async owns(taskId: string): Promise<boolean> {
    if (this.meta) return this.meta.owns(taskId);
    return "result" in (await this.request("tasks/get", { taskId }));
  }

  /**
   * Watches the task to its end with a 2025 tasks/result (which delivers the
   * requests it waits for); one in flight per task. For a task that ended it
   * is answered at once from the task store. `running`: the task was running
   * when the watch began, so its end is news for the listeners.
   */
  private watch(taskId: string, running: boolean): Promise<TaskOutcome | undefined> {
    let watching = this.watching.get(taskId);
    if (!watching) {
      watching = this.request("tasks/result", { taskId }).then((answer) => {
        this.watching.delete(taskId);
        if (this.closed) return undefined;
        const outcome: TaskOutcome = "result" in answer ? { result: stripRelated(answer.result) } : { error: answer.error };
        this.withdraw(taskId);
        if (running) this.announce(taskId);
        return outcome;
      });
      this.watching.set(taskId, watching);
    }
    return watching;
  }

  /** Answers the face's held requests of a task that needs them no more (elicitation: cancel). */
  private withdraw(taskId: string): void {
    for (const input of this.inputs.get(taskId)?.values() ?? []) {
      const message: JSONRPCMessage =
        input.request.method === "elicitation/create"
          ? { jsonrpc: "2.0", id: input.id, result: { action: "cancel" } }
          : { jsonrpc: "2.0", id: input.id, error: { code: -32000, message: "the task ended or was cancelled" } };
      void this.client.send(message).catch(() => undefined);
    }
    this.inputs.delete(taskId);
  }

  private within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
    let timer: TimerHandle | undefined;
    const bound = new Promise<undefined>((resolve) => {
      timer = this.gateway.clock.setTimeout(() => resolve(undefined), ms);
    });
    return Promise.race([promise, bound]).finally(() => this.gateway.clock.clearTimeout(timer));
  }

  /** What the host holds now, per kind (read-only, for tests and diagnostics): all zero once its tasks ended and nobody asks. */
  retained(): { watching: number; inputs: number; pending: number; listeners: number; subscriptions: number; announced: number } {
    return {
      watching: this.watching.size,
      inputs: this.inputs.size,
      pending: this.pending.size,
      listeners: this.listeners.size,
      subscriptions: this.subscriptions.size,
      announced: this.announced.size,
    };
  }

  /** Ends the host's in-memory connection (its session is ended by the caller, or ended already). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.meta?.close();
    for (const resolve of this.pending.values()) resolve({ error: { code: -32000, message: "the task host closed (its session ended); ask again" } });
    this.pending.clear();
    this.inputs.clear();
    this.announced.clear();
    this.subscriptions.clear();
    // The listeners' streams end with the host (modern-subscriptions.ts ends them gracefully).
    for (const listener of [...this.listeners]) listener({ kind: "closed" });
    this.listeners.clear();
    await this.server?.close().catch(() => undefined);
    await this.client.close().catch(() => undefined);
  }
}

/** The live task hosts of each gateway, by host session id. */
const registries = new WeakMap<GatewayContext, Map<string, Promise<TaskHost>>>();

function registryOf(gateway: GatewayContext): Map<string, Promise<TaskHost>> {
  let hosts = registries.get(gateway);
  if (!hosts) {
    const created = new Map<string, Promise<TaskHost>>();
    hosts = created;
    registries.set(gateway, created);
    // A host's session ended (idle timeout, shutdown, the principal's sessions ended): the host goes with it.
    gateway.sessions.observe((change) => {
      if (change.type !== "session_ended") return;
      const host = created.get(change.sessionId);
      if (!host) return;
      created.delete(change.sessionId);
      void host.then((h) => h.close()).catch(() => undefined);
    });
  }
  return hosts;
}

/** The task hosts of a gateway that opened (read-only, for tests and diagnostics). */
export async function liveTaskHosts(gateway: GatewayContext): Promise<TaskHost[]> {
  const settled = await Promise.allSettled([...(registries.get(gateway)?.values() ?? [])]);
  return settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
}

/** Faces found to run no tasks (the meta face), per gateway: no host is kept for them. */
const taskless = new WeakMap<GatewayContext, Set<string>>();

/** The host of `principal` on the face, opened on first use (whether the face runs tasks or not); each use counts as the session's activity. */
export async function hostFor(gateway: GatewayContext, face: TaskHostFace, principal: Principal | undefined, clientInfo: Implementation): Promise<TaskHost> {
  const hosts = registryOf(gateway);
  const id = taskHostSessionId(face.kind, principal);
  let host = hosts.get(id);
  if (!host) {
    host = TaskHost.open(gateway, face, principal, clientInfo);
    hosts.set(id, host);
    host.catch(() => hosts.delete(id));
  }
  const opened = await host;
  opened.session.touch();
  refreshInboundToken(opened.session.principal, principal); // the host outlives the token it was opened with (docs/adr/0027 §14)
  return opened;
}

/**
 * The task host of `principal` on the face, opened on first use; each use
 * counts as the session's activity. Undefined when the face runs no tasks
 * (learnt once per face; that host is closed at once unless a listen stream uses it).
 */
export async function taskHostFor(
  gateway: GatewayContext,
  face: TaskHostFace,
  principal: Principal | undefined,
  clientInfo: Implementation,
): Promise<TaskHost | undefined> {
  const faceKey = JSON.stringify(face.kind);
  if (taskless.get(gateway)?.has(faceKey)) return undefined;
  const opened = await hostFor(gateway, face, principal, clientInfo);
  if (!opened.supportsTasks) {
    let known = taskless.get(gateway);
    if (!known) taskless.set(gateway, (known = new Set()));
    known.add(faceKey);
    if (opened.retained().listeners === 0) await gateway.sessions.destroy(opened.session.id, "the face runs no tasks");
    return undefined;
  }
  return opened;
}

/** The tasks extension's methods (tasks/list and tasks/result are gone in it: -32601 at the edge). */
export const TASK_METHODS: ReadonlySet<string> = new Set(["tasks/get", "tasks/update", "tasks/cancel"]);

function invalid(message: string): RpcAnswer {
  return { error: { code: -32602, message: `Invalid params: ${message}` } };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A modern tools/call of a client that declared the tasks extension, or one of
 * TASK_METHODS, answered through the principal's task host. Undefined: a
 * tools/call this face runs no tasks for (the caller answers it as a plain call);
 * "gone": the caller hung up (`closed`) before the answer, and its call was cancelled.
 * `params` are the request's without the envelope.
 */
export async function answerModernTask(
  gateway: GatewayContext,
  face: TaskHostFace,
  principal: Principal | undefined,
  clientInfo: Implementation,
  method: string,
  params: Record<string, unknown>,
  closed?: Promise<void>,
): Promise<RpcAnswer | undefined | "gone"> {
  const host = await taskHostFor(gateway, face, principal, clientInfo);
  if (!host) {
    if (method === "tools/call") return undefined;
    return {
      error: {
        code: -32601,
        message: `Method not found: ${method}: this face runs no tasks (call its tools plainly; the meta face's execute_tool promotes long calls to its own tasks)`,
      },
    };
  }
  if (method === "tools/call") return (await host.callTool(params, closed)) ?? "gone";
  const { taskId } = params;
  if (typeof taskId !== "string" || taskId === "") return invalid(`${method} needs params.taskId, the id tools/call answered with`);
  if (method === "tasks/get") return host.getTask(taskId);
  if (method === "tasks/cancel") return host.cancelTask(taskId);
  const { inputResponses } = params;
  if (!isObject(inputResponses) || !Object.values(inputResponses).every(isObject)) {
    return invalid("tasks/update needs params.inputResponses, an object of one response object per key of the task's inputRequests");
  }
  return host.updateTask(taskId, inputResponses);
}
