/**
 * EraTransport: the SDK 1.32 client's transport to a Streamable HTTP upstream
 * of either era. At `initialize` it probes the endpoint (probe.ts; a verdict
 * already known is used as is). A 2025-era upstream gets the legacy transport
 * untouched. A 2026-07-28 upstream is spoken to here: `initialize` is answered
 * from `server/discover`, every request is sent stateless with the envelope
 * and routing headers (retried once on -32022), and an `input_required`
 * answer becomes real server→client requests to the gateway's client (the
 * session's elicitation / sampling / roots handlers, so a legacy client, its
 * pending queue or the console inbox answers them), whose answers go back
 * upstream as `inputResponses` with the echoed `requestState`, for a bounded
 * number of rounds (bridge 2). A request that serves a 2026-07-28 client
 * (modern-call.ts) gets its `input_required` relayed instead, the upstream's
 * requestState sealed, and its retry's sealed state opened (bridge 1). A
 * gateway session's `tools/call` declares the tasks extension upstream; a
 * task the upstream makes of it is driven here to its end (tasks/get polling,
 * its inputRequests asked of the client as in bridge 2 and answered with
 * tasks/update, tasks/cancel when the call is cancelled), so the 2025 side
 * sees a call that returns the task's result (bridge 4). The connection
 * listens upstream (upstream-listen.ts): list changes and resource updates
 * arrive as 2025 notifications, and resources/subscribe changes the filter.
 * See docs/design/protocol-eras-upstream.md.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Implementation, JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";
import { systemClock, type Clock } from "../../clock.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import { errorResponseFor } from "../../mcp/error-response.js";
import type { FetchLike } from "../../mcp/sse-request-tap.js";
import { takeModernCall, type ModernCall } from "./modern-call.js";
import type { MrtrRequestTap } from "./mrtr-tap.js";
import { discover, type Discovered, type EraVerdicts } from "./probe.js";
import type { StateBinding } from "./sealed-state.js";
import {
  CLIENT_CAPABILITIES_KEY,
  CLIENT_INFO_KEY,
  LOG_LEVEL_KEY,
  MODERN_UPSTREAM_VERSIONS,
  MRTR_METHODS,
  PROTOCOL_VERSION_KEY,
  SERVER_INFO_KEY,
  UNSUPPORTED_VERSION,
  modernHeaders,
  readMessages,
  toLegacyResult,
  type Json,
} from "./wire.js";
import { TASKS_EXTENSION } from "../../mcp/modern/tasks-extension.js";
import { LEGACY_TASK_METHODS, answerLegacyTaskMethod, takeExtensionTaskListener } from "./extension-task.js";
import { listenCapabilities, UpstreamListen } from "./upstream-listen.js";

export interface EraTransportOptions {
  name: string;
  url: URL;
  legacy: StreamableHTTPClientTransport;
  /** The fetch modern requests use (the tap's: bounded, authorised). */
  fetch: FetchLike;
  tap: MrtrRequestTap;
  verdicts: EraVerdicts;
  headers?: Record<string, string> | undefined;
  /** Continuing a stored (legacy) upstream session: no probe. */
  continuing: boolean;
  /** Bound on the `server/discover` probe. */
  probeTimeoutMs: number;
  /** Bound on `input_required` rounds of one request (bridge 2). */
  maxInputRounds: number;
  clock?: Clock | undefined;
}

type LegacySendOptions = Parameters<StreamableHTTPClientTransport["send"]>[1];
type Mode = "undecided" | "legacy" | "modern";
type Message = Json & { id?: RequestId; method?: string; params?: Json; result?: Json; error?: Json };

export class EraTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport["onmessage"];
  private mode: Mode;
  private discovered: Discovered | undefined;
  private clientInfo: Implementation = { name: "emceepee", version: "0" };
  private capabilities: Json = {};
  private logLevel: string | undefined;
  private closed = false;
  /** Ends the probe when the connection closes (its connect timed out). */
  private readonly closing = new AbortController();
  /** Our requests in flight upstream (modern), to abort on cancel or close. */
  private readonly inflight = new Map<RequestId, AbortController>();
  /** Server→client requests made from input requests, waiting for the client's answer. */
  private readonly waiting = new Map<RequestId, (message: Message) => void>();
  private nextBridgeId = 0;
  /** The connection's own subscriptions/listen upstream (modern only; upstream-listen.ts). */
  private listen: UpstreamListen | undefined;

  constructor(private readonly o: EraTransportOptions) {
    this.mode = o.continuing ? "legacy" : (o.verdicts.get(o.url.href) ?? "undecided");
  }

  /** The era this transport speaks (undecided until `initialize`). */
  get era(): Mode {
    return this.mode;
  }

  get sessionId(): string | undefined {
    return this.mode === "modern" ? undefined : this.o.legacy.sessionId;
  }

  setProtocolVersion(version: string): void {
    if (this.mode !== "modern") this.o.legacy.setProtocolVersion(version);
  }

  async start(): Promise<void> {
    const legacy = this.o.legacy;
    legacy.onmessage = (message) => this.onmessage?.(message);
    legacy.onerror = (error) => this.onerror?.(error);
    legacy.onclose = () => this.onclose?.();
    await legacy.start();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.closing.abort(new Error("the connection closed"));
    for (const abort of this.inflight.values()) abort.abort(new Error("the connection closed"));
    this.inflight.clear();
    this.waiting.clear();
    this.listen?.close();
    await this.o.legacy.close();
  }

  async send(message: JSONRPCMessage, options?: LegacySendOptions): Promise<void> {
    if (this.mode === "legacy") return this.o.legacy.send(message, options);
    const m = message as Message;
    if (this.mode === "undecided") {
      if (m.method !== "initialize" || m.id === undefined) return this.o.legacy.send(message, options);
      this.remember(m.params);
      const outcome = await this.probe();
      if (outcome !== "modern") {
        this.mode = "legacy";
        return this.o.legacy.send(message, options);
      }
      this.mode = "modern";
    }
    this.sendModern(m);
  }

  /** Probes the endpoint; records a definite verdict. */
  private async probe(): Promise<"modern" | "legacy"> {
    const outcome = await discover({
      url: this.o.url,
      fetch: this.o.fetch,
      headers: this.o.headers,
      clientInfo: this.clientInfo,
      capabilities: this.capabilities,
      timeoutMs: this.o.probeTimeoutMs,
      signal: this.closing.signal,
      clock: this.o.clock,
    });
    if (outcome.era === undefined) return "legacy";
    this.o.verdicts.set(this.o.url.href, outcome.era);
    if (outcome.era === "modern") this.discovered = outcome.discovered;
    return outcome.era;
  }

  /** The gateway's clientInfo and capabilities from its `initialize` (the envelope carries them; 2025 tasks are not modern). */
  private remember(params: Json | undefined): void {
    const info = params?.clientInfo as Implementation | undefined;
    if (info) this.clientInfo = info;
    const { tasks, ...capabilities } = (params?.capabilities as Json | undefined) ?? {};
    void tasks;
    this.capabilities = capabilities;
  }

  private sendModern(m: Message): void {
    if (this.closed) return;
    if (m.method === undefined) {
      // The client's answer to a request made from an input request.
      if (m.id !== undefined) this.waiting.get(m.id)?.(m);
      return;
    }
    if (m.id === undefined) {
      if (m.method === "notifications/cancelled") {
        const id = m.params?.requestId as RequestId | undefined;
        if (id !== undefined) this.inflight.get(id)?.abort(new Error("cancelled by the gateway"));
      }
      return; // modern upstreams take no notifications (initialized, roots changes)
    }
    // Read now: the async context of the gateway's request is this call's.
    const call = MRTR_METHODS.has(m.method) ? takeModernCall(m.method) : undefined;
    void this.answer(m.id, m, call);
  }

  private async answer(id: RequestId, m: Message, call: ModernCall | undefined): Promise<void> {
    try {
      const result = await this.serve(m, call);
      this.deliver({ jsonrpc: "2.0", id, result });
    } catch (err) {
      if (this.closed) return;
      if (err instanceof UpstreamAnswer) this.deliver({ jsonrpc: "2.0", id, error: err.error });
      else this.deliver(errorResponseFor(id, asGatewayError(this.o.name, err)));
    }
  }

  private deliver(message: Message | JSONRPCMessage): void {
    if (!this.closed) this.onmessage?.(message as JSONRPCMessage);
  }

  /** One request from the gateway's client, served in the modern era; resolves with the 2025-shaped result. */
  private async serve(m: Message, call: ModernCall | undefined): Promise<Json> {
    const method = m.method!;
    const params = m.params ?? {};
    if (method === "initialize") {
      this.remember(params);
      const discovered = this.discovered ?? (await this.rediscover());
      this.listening(discovered);
      return this.initializeResult(params, discovered);
    }
    if (method === "ping") {
      // No ping in 2026-07-28: server/discover shows the upstream alive.
      this.discovered = await this.rediscover();
      return {};
    }
    if (method === "logging/setLevel") {
      // Logging is opted into per request (the envelope's logLevel).
      this.logLevel = typeof params.level === "string" ? params.level : undefined;
      return {};
    }
    if ((method === "resources/subscribe" || method === "resources/unsubscribe") && this.listen && typeof params.uri === "string") {
      // Bridged onto the connection's listen stream (its resourceSubscriptions).
      if (method === "resources/unsubscribe") await this.listen.unsubscribe(params.uri);
      if (method === "resources/unsubscribe" || (await this.listen.subscribe(params.uri))) return {};
      throw new UpstreamAnswer({ code: -32602, message: `upstream '${this.o.name}' did not take ${params.uri} into its subscriptions/listen filter` });
    }
    if (method === "resources/subscribe" || method === "resources/unsubscribe") {
      throw new UpstreamAnswer({
        code: -32601,
        message: `upstream '${this.o.name}' speaks MCP 2026-07-28, which has no ${method} (subscriptions/listen replaces it; the gateway does not bridge it yet)`,
      });
    }
    // A gateway task mapped onto this upstream's extension task, asked about after a restart or on another replica (bridge 4).
    if (!call && LEGACY_TASK_METHODS.has(method) && typeof params.taskId === "string") return this.legacyTask(m.id!, method, params.taskId);
    return this.exchange(m.id!, method, params, call);
  }

  /** The 2025 task methods for an extension task (extension-task.ts); an abort (a tasks/result cut short) leaves the task running. */
  private async legacyTask(id: RequestId, method: string, taskId: string): Promise<Json> {
    const version = this.discovered?.version ?? MODERN_UPSTREAM_VERSIONS[0]!;
    const capabilities = { ...this.capabilities, extensions: { ...(this.capabilities.extensions as Json | undefined), [TASKS_EXTENSION]: {} } };
    const abort = new AbortController();
    this.inflight.set(id, abort);
    const ask = async (m: string, params: Json): Promise<Json> => {
      const reply = await this.post(id, m, version, params, abort.signal, capabilities);
      if (reply.error) throw new UpstreamAnswer(reply.error);
      return reply.result ?? {};
    };
    const drive = (task: Json) => this.driveTask(id, task, version, abort.signal, capabilities, false);
    try {
      return await answerLegacyTaskMethod(method, taskId, { ask, drive }, new Date((this.o.clock ?? systemClock).now()).toISOString());
    } finally {
      this.inflight.delete(id);
    }
  }

  private async rediscover(): Promise<Discovered> {
    const outcome = await discover({
      url: this.o.url,
      fetch: this.o.fetch,
      headers: this.o.headers,
      clientInfo: this.clientInfo,
      capabilities: this.capabilities,
      timeoutMs: this.o.probeTimeoutMs,
      clock: this.o.clock,
    });
    if (outcome.era === "modern") return outcome.discovered;
    if (outcome.era === "legacy") this.o.verdicts.forget(this.o.url.href);
    throw new GatewayError(
      ErrorCodes.UPSTREAM_UNAVAILABLE,
      `upstream '${this.o.name}' did not answer server/discover as an MCP 2026-07-28 server (${outcome.era === "legacy" ? "it answers as a 2025-era server now" : outcome.reason}); the gateway reconnects and probes it again`,
      { details: { server: this.o.name } },
    );
  }

  /** Opens the connection's listen stream once the upstream's capabilities are known (upstream-listen.ts). */
  private listening(discovered: Discovered): void {
    if (this.listen || this.closed) return;
    this.listen = new UpstreamListen({
      name: this.o.name,
      clock: this.o.clock ?? systemClock,
      deliver: (message) => this.deliver(message),
      post: async (id, params, signal) => this.postRaw(id, "subscriptions/listen", discovered.version, params, signal, this.capabilities),
    });
    this.listen.start(listenCapabilities(discovered.result.capabilities as Json | undefined, TASKS_EXTENSION));
  }

  /** The InitializeResult the SDK client expects, from what `server/discover` said. */
  private initializeResult(params: Json, discovered: Discovered): Json {
    const result = discovered.result;
    const meta = (result._meta as Json | undefined) ?? {};
    const serverInfo = (result.serverInfo ?? meta[SERVER_INFO_KEY] ?? { name: this.o.name, version: "unknown" }) as Json;
    // 2025 tasks are not spoken to a modern upstream; resources/subscribe is bridged onto the listen stream.
    const { tasks, ...capabilities } = (result.capabilities as Json | undefined) ?? {};
    void tasks;
    return {
      protocolVersion: typeof params.protocolVersion === "string" ? params.protocolVersion : "2025-11-25",
      capabilities,
      serverInfo,
      ...(typeof result.instructions === "string" ? { instructions: result.instructions } : {}),
    };
  }

  /**
   * Sends `method` upstream in the modern era until it completes: once more
   * on -32022 with a version both sides speak, and again with the client's
   * answers for each `input_required` round (at most maxInputRounds).
   */
  private async exchange(id: RequestId, method: string, original: Json, call?: ModernCall): Promise<Json> {
    let version = this.discovered?.version ?? MODERN_UPSTREAM_VERSIONS[0]!;
    let params: Json = original;
    let retried = false;
    // Bridge 1: the seal binds the state to this upstream, the caller, the method and the arguments as sent upstream.
    const binding = call && { upstream: this.o.name, principal: call.principal, method, params: original };
    if (call && binding) params = await retryParams(original, call, binding);
    // A gateway session's tools/call may become the upstream's task (bridge 4, driveTask); a modern client's is its own affair.
    const capabilities = call
      ? declaredBoth(this.capabilities, call.capabilities)
      : method === "tools/call"
        ? { ...this.capabilities, extensions: { ...(this.capabilities.extensions as Json | undefined), [TASKS_EXTENSION]: {} } }
        : this.capabilities;
    const abort = new AbortController();
    this.inflight.set(id, abort);
    try {
      for (let round = 0; ;) {
        const reply = await this.post(id, method, version, params, abort.signal, capabilities);
        if (reply.error) {
          const supported = (reply.error.data as { supported?: unknown } | undefined)?.supported;
          const other = Array.isArray(supported) ? MODERN_UPSTREAM_VERSIONS.find((v) => v !== version && supported.includes(v)) : undefined;
          if (reply.error.code === UNSUPPORTED_VERSION && !retried && other !== undefined) {
            retried = true;
            version = other;
            continue;
          }
          if (reply.error.code === UNSUPPORTED_VERSION) this.o.verdicts.forget(this.o.url.href);
          throw new UpstreamAnswer(reply.error);
        }
        const result = reply.result ?? {};
        if (result.resultType === "task" && method === "tools/call" && !call) return await this.driveTask(id, result, version, abort.signal, capabilities);
        if (result.resultType !== "input_required" || !MRTR_METHODS.has(method)) return toLegacyResult(result);
        if (call && binding)
          return relayed(method, result, call.sealer.seal(binding, typeof result.requestState === "string" ? result.requestState : undefined));
        if (++round > this.o.maxInputRounds) {
          throw new GatewayError(
            ErrorCodes.LIMIT_REACHED,
            `upstream '${this.o.name}' still asked for input after ${this.o.maxInputRounds} rounds of '${method}'; the gateway gave up (the upstream may be looping on the answers it got)`,
            { details: { server: this.o.name, rounds: this.o.maxInputRounds } },
          );
        }
        const inputResponses = await this.askClient(id, (result.inputRequests as Json | undefined) ?? {}, abort.signal);
        const { requestState, inputResponses: previous, ...rest } = params;
        void requestState;
        void previous;
        params = { ...rest, inputResponses, ...(typeof result.requestState === "string" ? { requestState: result.requestState } : {}) };
      }
    } finally {
      this.inflight.delete(id);
    }
  }

  /** POSTs one request with the envelope; relays notifications on its stream; resolves with its response. */
  private async post(id: RequestId, method: string, version: string, params: Json, signal: AbortSignal, capabilities = this.capabilities): Promise<Message> {
    const response = await this.postRaw(id, method, version, params, signal, capabilities);
    let reply: Message | undefined;
    await readMessages(response, (message) => {
      const msg = message as Message;
      if (msg.method === undefined && msg.id === id) reply ??= msg;
      else if (msg.method !== undefined && msg.id === undefined) this.deliver(msg); // progress, logging on the request's stream
    }).catch((err: unknown) => {
      if (reply === undefined) throw err;
    });
    if (reply) return reply;
    throw new GatewayError(ErrorCodes.UPSTREAM_ERROR, `upstream '${this.o.name}' answered '${method}' with HTTP ${response.status} and no JSON-RPC response`, {
      details: { server: this.o.name, status: response.status },
    });
  }

  /** POSTs one request with the envelope; the response unread. */
  private postRaw(id: RequestId, method: string, version: string, params: Json, signal: AbortSignal, capabilities: Json): Promise<Response> {
    const meta = {
      ...((params._meta as Json | undefined) ?? {}),
      [PROTOCOL_VERSION_KEY]: version,
      [CLIENT_CAPABILITIES_KEY]: capabilities,
      [CLIENT_INFO_KEY]: this.clientInfo,
      ...(this.logLevel !== undefined ? { [LOG_LEVEL_KEY]: this.logLevel } : {}),
    };
    const body = { ...params, _meta: meta };
    return this.o.fetch(this.o.url, {
      method: "POST",
      headers: modernHeaders(version, method, body, this.o.headers),
      body: JSON.stringify({ jsonrpc: "2.0", id, method, params: body }),
      signal,
    });
  }

  /**
   * Bridge 4: the upstream made a task of a gateway session's tools/call.
   * Polls tasks/get (at the upstream's pollIntervalMs, within bounds) until it
   * ends; what it waits for (`inputRequests`) is asked of the client as in
   * bridge 2 and answered with tasks/update. Resolves with the inlined result;
   * a failed or cancelled task is the call's error. A cancelled call cancels
   * the task upstream, unless the task was not `started` by this call (a
   * tasks/result for a mapped task, extension-task.ts: its end leaves it be).
   */
  private async driveTask(owner: RequestId, created: Json, version: string, signal: AbortSignal, capabilities: Json, started = true): Promise<Json> {
    const taskId = created.taskId;
    if (typeof taskId !== "string") throw new UpstreamAnswer({ code: -32603, message: `upstream '${this.o.name}' answered with a task without a taskId` });
    // The gateway task this call runs (if any) keeps the upstream task's id: it can be asked about after a restart (extension-task.ts).
    if (started)
      takeExtensionTaskListener()?.({
        upstreamTaskId: taskId,
        pollIntervalMs: typeof created.pollIntervalMs === "number" ? created.pollIntervalMs : undefined,
      });
    const ask = async (method: string, params: Json): Promise<Json> => {
      const reply = await this.post(owner, method, version, { taskId, ...params }, signal, capabilities);
      if (reply.error) throw new UpstreamAnswer(reply.error);
      return reply.result ?? {};
    };
    let task = created;
    // With the tasks extension's notifications/tasks on the listen stream, a status change ends the wait between polls early.
    let wake: (() => void) | undefined;
    const unwatch = this.listen?.watchTask(taskId, () => wake?.());
    try {
      for (let round = 0; ;) {
        if (task.status === "completed") return toLegacyResult((task.result as Json | undefined) ?? {});
        if (task.status === "failed") {
          throw new UpstreamAnswer((task.error as Json | undefined) ?? { code: -32603, message: `upstream '${this.o.name}' task ${taskId} failed` });
        }
        if (task.status === "cancelled") throw new UpstreamAnswer({ code: -32603, message: `upstream '${this.o.name}' cancelled its task ${taskId}` });
        const inputs = task.status === "input_required" ? (task.inputRequests as Json | undefined) : undefined;
        if (inputs && Object.keys(inputs).length > 0) {
          if (++round > this.o.maxInputRounds) {
            throw new GatewayError(
              ErrorCodes.LIMIT_REACHED,
              `upstream '${this.o.name}' task ${taskId} still asked for input after ${this.o.maxInputRounds} rounds; the gateway gave up`,
              { details: { server: this.o.name, rounds: this.o.maxInputRounds } },
            );
          }
          await ask("tasks/update", { inputResponses: await this.askClient(owner, inputs, signal) });
        } else {
          const interval = typeof task.pollIntervalMs === "number" ? task.pollIntervalMs : 1_000;
          await pause(this.o.clock ?? systemClock, Math.min(Math.max(interval, 50), 5_000), signal, (w) => (wake = w));
        }
        task = await ask("tasks/get", {});
      }
    } catch (err) {
      if (started && signal.aborted && !this.closed) {
        // The call was cancelled (or the connection closes): the upstream's task goes with it.
        const id = `emceepee-cancel-${++this.nextBridgeId}`;
        void this.post(id, "tasks/cancel", version, { taskId }, new AbortController().signal, capabilities).catch(() => undefined);
      }
      throw err;
    } finally {
      unwatch?.();
    }
  }

  /** Bridge 2: each input request becomes a real request to the gateway's client; resolves with the answers by key. */
  private async askClient(owner: RequestId, inputRequests: Json, signal: AbortSignal): Promise<Json> {
    const entries = Object.entries(inputRequests).filter((e): e is [string, Json] => typeof e[1] === "object" && e[1] !== null);
    const answers = await Promise.all(entries.map(async ([key, request]) => [key, await this.askOne(owner, request, signal)] as const));
    return Object.fromEntries(answers);
  }

  private askOne(owner: RequestId, request: Json, signal: AbortSignal): Promise<Json> {
    const id = `emceepee-input-${++this.nextBridgeId}`;
    this.o.tap.relate(id, owner);
    return new Promise<Json>((resolve, reject) => {
      const done = () => {
        this.waiting.delete(id);
        signal.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        done();
        this.deliver({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: "the call it belonged to ended" } });
        reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
      };
      this.waiting.set(id, (answer) => {
        done();
        if (answer.error) reject(new UpstreamAnswer(answer.error));
        else resolve(answer.result ?? {});
      });
      signal.addEventListener("abort", onAbort, { once: true });
      this.deliver({ jsonrpc: "2.0", id, method: request.method as string, ...(request.params !== undefined ? { params: request.params as Json } : {}) });
    });
  }
}

/** Bridge 1: a retry's params upstream, its answers and the upstream's own state (opened once, on any replica: a replay is refused). */
async function retryParams(original: Json, call: ModernCall, binding: StateBinding): Promise<Json> {
  const state = call.requestState !== undefined ? await call.sealer.openOnce(call.requestState, binding) : undefined;
  return {
    ...original,
    ...(call.inputResponses !== undefined ? { inputResponses: call.inputResponses } : {}),
    ...(state !== undefined ? { requestState: state } : {}),
  };
}

/** Waits `ms` on `clock` (or until woken through `onWake`), or until `signal` aborts (then rejects with its reason). */
function pause(clock: Clock, ms: number, signal: AbortSignal, onWake?: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    onWake?.(() => {
      clock.clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
    };
    const timer = clock.setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** What both the gateway and the modern client declared of elicitation, sampling and roots (the upstream asks only for those). */
function declaredBoth(gateway: Json, client: Json): Json {
  const both: Json = {};
  for (const [key, value] of Object.entries(gateway)) {
    if (!["elicitation", "sampling", "roots"].includes(key) || client[key] !== undefined) both[key] = value;
  }
  return both;
}

/**
 * Bridge 1: an `input_required` as the SDK client above parses it (the
 * method's required fields empty, stripped again by the modern endpoint),
 * with the upstream's state sealed.
 */
function relayed(method: string, result: Json, requestState: string): Json {
  const required = method === "tools/call" ? { content: [] } : method === "prompts/get" ? { messages: [] } : { contents: [] };
  return {
    ...required,
    resultType: "input_required",
    ...(result.inputRequests !== undefined ? { inputRequests: result.inputRequests } : {}),
    requestState,
    ...(result._meta !== undefined ? { _meta: result._meta } : {}),
  };
}

/** A JSON-RPC error to hand the SDK client as it is (the upstream's, or one that stands for it). */
class UpstreamAnswer extends Error {
  constructor(readonly error: Json) {
    super(typeof error.message === "string" ? error.message : "upstream error");
  }
}

function asGatewayError(server: string, err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new GatewayError(ErrorCodes.UPSTREAM_UNAVAILABLE, `upstream '${server}' could not be reached: ${message}`, { details: { server }, cause: err });
}
