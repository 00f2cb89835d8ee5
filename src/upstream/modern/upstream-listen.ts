/**
 * The gateway's own `subscriptions/listen` on a 2026-07-28 upstream (SEP-2575;
 * ADR 0032 "Listening", design EV-20): one stream per upstream connection,
 * filtered for what the connection needs — the list changes the upstream
 * declares (the gateway caches its lists and tells its clients), the resource
 * URIs its clients subscribed, and the task ids of the upstream tasks it
 * drives. List changes and resource updates are handed on as the 2025
 * notifications they are (the subscription id removed), so caches, sessions
 * and modern listeners hear them as from a 2025 upstream; a task's
 * `notifications/tasks` wakes whoever drives that task. A changed filter opens
 * a new stream and ends the old one once the new one is acknowledged; a
 * dropped stream is reopened with backoff on the injected clock (and the
 * lists announced as changed: a change may have been missed); close() ends
 * the stream and every timer.
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, TimerHandle } from "../../clock.js";
import { backoffDelay, type BackoffPolicy } from "../backoff.js";
import { readMessages, type Json } from "./wire.js";

/** SEP-2575's filter, with the tasks extension's `taskIds`. */
export interface UpstreamListenFilter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
  taskIds?: string[];
}

/** What the upstream declared it can tell (from `server/discover`). */
export interface ListenCapabilities {
  toolsListChanged: boolean;
  promptsListChanged: boolean;
  resourcesListChanged: boolean;
  /** `resources.subscribe`: URIs may be named. */
  resourceSubscriptions: boolean;
  /** The tasks extension: task ids may be named. */
  taskIds: boolean;
}

export interface UpstreamListenOptions {
  name: string;
  /** POSTs `subscriptions/listen` with these params (the caller adds the envelope); the response is the stream. */
  post(id: string, params: Json, signal: AbortSignal): Promise<Response>;
  /** A list change or resource update for the gateway's client. */
  deliver(message: JSONRPCMessage): void;
  clock: Clock;
  /** @default LISTEN_BACKOFF */
  backoff?: BackoffPolicy;
  /** Bound on the wait for a stream's acknowledgement. @default LISTEN_ACK_TIMEOUT_MS */
  ackTimeoutMs?: number;
  /**
   * How long after start() the list stream opens, unless a subscription or a
   * task needs it sooner: a connection that lives for one request (a modern
   * client's ephemeral session) then opens none. @default LISTEN_START_DELAY_MS
   */
  startDelayMs?: number;
}

export const LISTEN_BACKOFF: BackoffPolicy = { initialDelayMs: 500, maxDelayMs: 30_000, jitter: 0.2 };
export const LISTEN_ACK_TIMEOUT_MS = 30_000;
export const LISTEN_START_DELAY_MS = 1_000;
/** A stream that lived this long after its acknowledgement was healthy: the next drop's backoff starts over. */
const HEALTHY_MS = 60_000;
const SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId";
const FLAGS = ["toolsListChanged", "promptsListChanged", "resourcesListChanged"] as const;
const LIST_METHOD: Record<(typeof FLAGS)[number], string> = {
  toolsListChanged: "notifications/tools/list_changed",
  promptsListChanged: "notifications/prompts/list_changed",
  resourcesListChanged: "notifications/resources/list_changed",
};
const HANDED_ON = new Set([...Object.values(LIST_METHOD), "notifications/resources/updated"]);

interface Stream {
  id: string;
  abort: AbortController;
  filter: UpstreamListenFilter;
  acked?: UpstreamListenFilter;
  ackedAt?: number;
  ended?: boolean;
}

type Message = Json & { id?: unknown; method?: string; params?: Json; result?: Json; error?: Json };

export class UpstreamListen {
  private can: ListenCapabilities | undefined;
  private readonly uris = new Set<string>();
  private readonly tasks = new Map<string, Set<(task: Json) => void>>();
  private readonly streams = new Set<Stream>();
  private current: Stream | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private timer: TimerHandle | undefined;
  private attempt = 0;
  /** A stream dropped or failed to open: once one is back, the lists are announced as changed. */
  private recovering = false;
  /** The upstream does not serve subscriptions/listen (-32601, or HTTP 404/405/501): never asked again. */
  private unserved = false;
  private nextId = 0;
  private closed = false;

  constructor(private readonly o: UpstreamListenOptions) {}

  /** Starts listening for what the upstream can tell (called once its capabilities are known). */
  start(can: ListenCapabilities): void {
    if (this.can || this.closed) return;
    this.can = can;
    this.timer = this.o.clock.setTimeout(() => {
      this.timer = undefined;
      void this.refresh().catch(() => undefined);
    }, this.o.startDelayMs ?? LISTEN_START_DELAY_MS);
  }

  /** Adds `uri` to the filter; resolves true once a stream acknowledged it. */
  async subscribe(uri: string): Promise<boolean> {
    this.uris.add(uri);
    const acked = await this.refresh();
    return acked?.resourceSubscriptions?.includes(uri) === true;
  }

  async unsubscribe(uri: string): Promise<void> {
    if (this.uris.delete(uri)) await this.refresh().catch(() => undefined);
  }

  /**
   * Hands `onTask` each `notifications/tasks` of `taskId` (the upstream's
   * DetailedTask) while watched; returns the function that stops it. An id
   * that is no longer watched stays in the filter until the next change.
   */
  watchTask(taskId: string, onTask: (task: Json) => void): () => void {
    if (this.can?.taskIds !== true || this.closed) return () => undefined;
    let watchers = this.tasks.get(taskId);
    if (!watchers) this.tasks.set(taskId, (watchers = new Set()));
    watchers.add(onTask);
    void this.refresh().catch(() => undefined);
    return () => {
      watchers.delete(onTask);
      if (watchers.size === 0 && this.tasks.get(taskId) === watchers) this.tasks.delete(taskId);
    };
  }

  /** The filter of the acknowledged stream, if one is open (read-only, for tests and diagnostics). */
  get acknowledged(): UpstreamListenFilter | undefined {
    return this.current?.acked;
  }

  /** The upstream does not serve subscriptions/listen (read-only, for tests and diagnostics). */
  get unservedByUpstream(): boolean {
    return this.unserved;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.o.clock.clearTimeout(this.timer);
    this.timer = undefined;
    for (const stream of this.streams) stream.abort.abort(new Error("the connection closed"));
    this.streams.clear();
    this.current = undefined;
    this.tasks.clear();
  }

  /** What the connection wants now, as far as the upstream can tell it. */
  private wanted(): UpstreamListenFilter {
    const can = this.can;
    const filter: UpstreamListenFilter = {};
    if (!can) return filter;
    for (const flag of FLAGS) if (can[flag]) filter[flag] = true;
    if (can.resourceSubscriptions && this.uris.size > 0) filter.resourceSubscriptions = [...this.uris].sort();
    if (can.taskIds && this.tasks.size > 0) filter.taskIds = [...this.tasks.keys()].sort();
    return filter;
  }

  /** Makes the open stream match what is wanted (one change at a time); resolves with the acknowledged filter. */
  private refresh(): Promise<UpstreamListenFilter | undefined> {
    const run = this.chain.then(() => this.reconcile());
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async reconcile(): Promise<UpstreamListenFilter | undefined> {
    if (this.closed || !this.can || this.unserved) return undefined;
    const filter = this.wanted();
    if (this.current && sameFilter(this.current.filter, filter)) return this.current.acked;
    if (Object.keys(filter).length === 0) {
      this.current?.abort.abort(new Error("nothing to listen for"));
      this.current = undefined;
      return {};
    }
    let stream: Stream;
    try {
      stream = await this.open(filter);
    } catch (err) {
      this.retryLater();
      throw err;
    }
    const old = this.current;
    this.current = stream;
    old?.abort.abort(new Error("replaced by a stream with a new filter"));
    this.o.clock.clearTimeout(this.timer);
    this.timer = undefined;
    if (this.recovering && !this.closed) {
      this.recovering = false;
      for (const flag of FLAGS) if (stream.acked?.[flag] === true) this.o.deliver({ jsonrpc: "2.0", method: LIST_METHOD[flag] });
    }
    if (stream.ended) this.dropped(stream); // it ended before this step saw it open
    return stream.acked;
  }

  /** Opens one stream; resolves once it is acknowledged (then it reads on until it ends). */
  private open(filter: UpstreamListenFilter): Promise<Stream> {
    const stream: Stream = { id: `emceepee-listen-${++this.nextId}`, abort: new AbortController(), filter };
    this.streams.add(stream);
    const clock = this.o.clock;
    return new Promise<Stream>((resolve, reject) => {
      let acked = false;
      const fail = (why: string) => {
        clock.clearTimeout(ackTimer);
        if (!acked) reject(new Error(`upstream '${this.o.name}' did not open subscriptions/listen: ${why}`));
        stream.abort.abort(new Error(why));
      };
      const ackTimer = clock.setTimeout(
        () => fail(`no acknowledgement within ${this.o.ackTimeoutMs ?? LISTEN_ACK_TIMEOUT_MS} ms`),
        this.o.ackTimeoutMs ?? LISTEN_ACK_TIMEOUT_MS,
      );
      const onMessage = (raw: JSONRPCMessage) => {
        const m = raw as Message;
        if (stream.abort.signal.aborted) return;
        if (m.method === "notifications/subscriptions/acknowledged") {
          if (acked) return;
          acked = true;
          clock.clearTimeout(ackTimer);
          stream.acked = (m.params?.notifications as UpstreamListenFilter | undefined) ?? {};
          stream.ackedAt = clock.now();
          return resolve(stream);
        }
        if (m.method === undefined) {
          // The listen request's own answer: a refusal before the acknowledgement, the server's graceful end after it.
          if (!acked && (m.error as { code?: unknown } | undefined)?.code === -32601) this.unserved = true;
          if (!acked) fail(`it answered ${JSON.stringify(m.error ?? m.result)}`);
          return;
        }
        if (acked) this.heard(m);
      };
      const ended = (why: string) => {
        stream.ended = true;
        this.streams.delete(stream);
        if (!acked) return fail(why);
        this.dropped(stream);
      };
      this.o
        .post(stream.id, { notifications: filter }, stream.abort.signal)
        .then(async (response) => {
          if (!response.ok) {
            if ([404, 405, 501].includes(response.status)) this.unserved = true;
            await response.body?.cancel().catch(() => undefined);
            return ended(`HTTP ${response.status}`);
          }
          await readMessages(response, onMessage);
          ended("the stream ended");
        })
        .catch((err: unknown) => ended(err instanceof Error ? err.message : String(err)));
    });
  }

  /** A notification on an acknowledged stream. */
  private heard(m: Message): void {
    const params = withoutSubscriptionId(m.params);
    if (m.method === "notifications/tasks") {
      const taskId = params?.taskId;
      if (typeof taskId === "string") for (const onTask of [...(this.tasks.get(taskId) ?? [])]) onTask(params!);
      return;
    }
    if (HANDED_ON.has(m.method!)) this.o.deliver({ jsonrpc: "2.0", method: m.method!, ...(params !== undefined ? { params } : {}) });
  }

  /** A stream ended that nobody ended: the open one is reopened after a backoff (an empty acknowledgement is no drop). */
  private dropped(stream: Stream): void {
    if (this.closed || stream !== this.current || stream.abort.signal.aborted) return;
    this.current = undefined;
    if (Object.keys(stream.acked ?? {}).length === 0) return; // nothing it asked for can come: a new filter opens again
    if (stream.ackedAt !== undefined && this.o.clock.now() - stream.ackedAt > HEALTHY_MS) this.attempt = 0;
    this.retryLater();
  }

  private retryLater(): void {
    this.recovering = true;
    if (this.closed || this.unserved || this.timer !== undefined) return;
    const delay = backoffDelay(this.o.backoff ?? LISTEN_BACKOFF, ++this.attempt);
    this.timer = this.o.clock.setTimeout(() => {
      this.timer = undefined;
      void this.refresh().catch(() => undefined);
    }, delay);
  }
}

function withoutSubscriptionId(params: Json | undefined): Json | undefined {
  const meta = params?._meta as Json | undefined;
  if (!params || !meta || !(SUBSCRIPTION_ID_KEY in meta)) return params;
  const { [SUBSCRIPTION_ID_KEY]: _id, ...rest } = meta;
  const copy = { ...params };
  if (Object.keys(rest).length > 0) copy._meta = rest;
  else delete copy._meta;
  return copy;
}

function sameFilter(a: UpstreamListenFilter, b: UpstreamListenFilter): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** What a `server/discover` result's capabilities let the gateway listen for. */
export function listenCapabilities(capabilities: Json | undefined, tasksExtension: string): ListenCapabilities {
  const flag = (kind: string, key: string) => (capabilities?.[kind] as Json | undefined)?.[key] === true;
  return {
    toolsListChanged: flag("tools", "listChanged"),
    promptsListChanged: flag("prompts", "listChanged"),
    resourcesListChanged: flag("resources", "listChanged"),
    resourceSubscriptions: flag("resources", "subscribe"),
    taskIds: (capabilities?.extensions as Json | undefined)?.[tasksExtension] !== undefined,
  };
}
