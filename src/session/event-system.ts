/**
 * EventSystem (design EV-3, EV-4): one session's events, stored and delivered
 * exactly once, its await_activity waiters and its observers. See
 * docs/design/sessions-and-events.md, "How the code keeps it".
 */
import type { Clock, IdGenerator } from "../clock.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { EventLimits, EventRecord, EventStore, EventTake, EvictedCounts } from "../store/contracts.js";
import type { TaskEvents } from "../tasks/task-events.js";

export type EventType =
  | "notification"
  | "elicitation_request"
  | "elicitation_expired"
  | "elicitation_rejected"
  | "sampling_request"
  | "sampling_expired"
  | "sampling_rejected"
  | "task_created"
  | "task_completed"
  | "task_failed"
  | "task_cancelled"
  | "task_expired"
  | "server_added"
  | "server_updated"
  | "server_removed"
  | "server_connected"
  | "server_disconnected"
  | "server_reconnected"
  | "events_evicted"
  | "timer_expired";

export interface StoredEvent {
  /** ULID: time-sortable. */
  id: string;
  type: EventType;
  server: string;
  /** Epoch ms. */
  createdAt: number;
  data: Record<string, unknown>;
}

/** `gateway.events.*` (src/config/schema.ts has each default). */
export interface EventSystemOptions {
  maxEvents: number;
  /** Warn once the session's store is this full (0..1]. */
  warningThreshold: number;
  /** Events stored across all sessions (gateway.events.maxTotal). */
  maxTotal: number;
}

/** The store's limits for `gateway.events` settings. */
export function eventLimits(options: Pick<EventSystemOptions, "maxEvents" | "maxTotal">): EventLimits {
  return { maxPerSession: options.maxEvents, maxTotal: options.maxTotal };
}

/** What a session's store holds now (await_activity, tests). */
export interface EventStats {
  count: number;
  undelivered: number;
  lastEventId?: string;
}

/** When closing a session's events. */
export interface EventCloseOptions {
  /** The gateway is shutting down: undelivered events stay for the next start. @default false */
  keepRecords?: boolean;
}

type Waiter = (event: StoredEvent | null) => void;

/** What observers hear: an event as it is added, or an announced change that is no event. */
export interface ObservedChange {
  type: EventType | "elicitation_answered" | "sampling_answered" | "request_forwarded" | "task_updated";
  server: string;
  data: Record<string, unknown>;
}
export type ChangeObserver = (change: ObservedChange) => void;

/** Implements the task runtime's port (TaskEvents): tasks/ reaches the session only through it. */
export class EventSystem implements TaskEvents {
  private readonly waiters = new Set<Waiter>();
  /** The last append asked for (appends run one after another; reads wait for them). */
  private tail: Promise<void> = Promise.resolve();
  /** batch() nesting; while > 0, stored events wake nobody and reads wait for `released`. */
  private holding = 0;
  private released: Promise<void> = Promise.resolve();
  private release: (() => void) | undefined;
  /** The first event stored during a batch: the waiters' wake-up once it ends. */
  private heldWake: StoredEvent | undefined;
  private warned = false;
  private closed = false;
  private readonly observers = new Set<ChangeObserver>();
  /** Events add()ed so far; `takenUpTo`: the most of them a take found stored when it marked everything delivered (-1: none yet). */
  private added = 0;
  private takenUpTo = -1;

  constructor(
    private readonly sessionId: string,
    private readonly options: EventSystemOptions,
    private readonly store: EventStore,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
    /** The session's logger (the session's task and request managers log through it too). */
    readonly logger?: Logger,
    /**
     * Only this object writes the session's events to `store` (a memory or SQLite store: one process, one
     * live session object per id). Then a take right after a take, with nothing added between, has nothing
     * to read and skips the store (the meta face's envelope takes on every call). Redis: false, since
     * another replica may append (adoption). @default false
     */
    private readonly exclusive = false,
  ) {}

  /** Stores one event (in the background, in order) and wakes the waiters once it is stored. */
  add(type: EventType, server: string, data: Record<string, unknown> = {}): StoredEvent {
    const event: StoredEvent = { id: this.newId(), type, server, createdAt: this.clock.now(), data };
    if (this.closed) return event; // a closed session stores nothing (nobody can read it)
    this.added++;
    this.tail = this.tail.then(() => this.append(event));
    this.announce({ type, server, data });
    return event;
  }

  /** Hears every change from now on, without consuming anything (see the header); returns the unsubscribe. */
  observe(observer: ChangeObserver): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  /** Tells the observers of a change that is no event; an observer that throws is logged, never the caller's problem. */
  announce(change: ObservedChange): void {
    for (const observer of [...this.observers]) {
      try {
        observer(change);
      } catch (err) {
        this.logger?.error({ err: errorMessage(err), type: change.type }, "event_observer_failed");
      }
    }
  }

  /** Resolves once every event added so far is stored (or failed to be). */
  flushed(): Promise<void> {
    return this.tail;
  }

  /**
   * Runs `work`; the events it adds are read and wake the waiters together,
   * once it finished (readers meanwhile wait for it), so a change made of
   * several events is seen whole.
   */
  async batch<T>(work: () => Promise<T>): Promise<T> {
    if (this.holding++ === 0) this.released = new Promise((resolve) => (this.release = resolve));
    try {
      return await work();
    } finally {
      if (--this.holding === 0) {
        await this.tail;
        const wake = this.heldWake;
        this.heldWake = undefined;
        this.release?.();
        this.release = undefined;
        if (wake) for (const waiter of [...this.waiters]) waiter(wake);
      }
    }
  }

  /** What every read waits for: the appends asked for, and a batch under way. */
  private async settled(): Promise<void> {
    await this.tail;
    await this.released;
  }

  async hasNew(): Promise<boolean> {
    await this.settled();
    const s = await this.store.stats(this.sessionId);
    return s.undelivered > 0 || evictedTotal(s.evicted) > 0;
  }

  /** Returns the undelivered events and marks them delivered (exactly once). */
  async takeNew(): Promise<StoredEvent[]> {
    const seen = this.added; // stored once settled() resolves (it waits for their appends); later ones may be in this take or not
    await this.settled();
    // Every event up to `seen` was delivered by an earlier take, and nobody else writes: nothing to read.
    if (this.exclusive && this.takenUpTo >= seen) return [];
    const take = await this.store.takeUndelivered(this.sessionId);
    this.takenUpTo = Math.max(this.takenUpTo, seen);
    return this.withNotice(take);
  }

  /** Whether a cursor read would return anything (see takeAfter). */
  async hasAfter(cursor: string): Promise<boolean> {
    await this.settled();
    const [after, s] = await Promise.all([this.store.listAfter(this.sessionId, cursor), this.store.stats(this.sessionId)]);
    return after.events.length > 0 || evictedTotal(s.evicted) > 0;
  }

  /**
   * Cursor read: the stored events after `cursor`, delivered before or not
   * (a re-delivery the client asked for). A cursor not in the store (evicted,
   * or never an id of this session) reads everything stored, so nothing is
   * skipped (design MF-18); `found` says which. Everything stored is delivered
   * afterwards, including undelivered events up to the cursor (the client
   * says it has them).
   */
  async takeAfter(cursor: string): Promise<{ events: StoredEvent[]; found: boolean }> {
    const seen = this.added;
    await this.settled();
    const take = await this.store.takeAfter(this.sessionId, cursor);
    this.takenUpTo = Math.max(this.takenUpTo, seen);
    const events = this.withNotice(take);
    if (!take.found) this.logger?.warn({ sinceEventId: cursor, returned: events.length }, "event_cursor_not_found");
    return { events, found: take.found };
  }

  /** Events after a cursor (all when absent or unknown), for inspection / resumption; does not mark delivery. */
  async after(eventId: string | undefined): Promise<StoredEvent[]> {
    await this.tail;
    return (await this.store.listAfter(this.sessionId, eventId)).events.map(toStoredEvent);
  }

  async stats(): Promise<EventStats> {
    await this.tail;
    const s = await this.store.stats(this.sessionId);
    return { count: s.count, undelivered: s.undelivered, ...(s.lastId !== undefined ? { lastEventId: s.lastId } : {}) };
  }

  /**
   * Resolves with the next event, or null after timeoutMs or on abort.
   * Every path removes the waiter and clears the timer.
   */
  waitForNext(timeoutMs: number, signal?: AbortSignal): Promise<StoredEvent | null> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(null);
      const finish = (event: StoredEvent | null) => {
        this.clock.clearTimeout(timer);
        this.waiters.delete(waiter);
        signal?.removeEventListener("abort", onAbort);
        resolve(event);
      };
      const waiter: Waiter = (event) => finish(event);
      const onAbort = () => finish(null);
      const timer = this.clock.setTimeout(() => finish(null), timeoutMs);
      this.waiters.add(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  get waiterCount(): number {
    return this.waiters.size;
  }

  /**
   * Wakes every waiter with nothing (session closing; their timers are
   * cleared), waits for the appends in flight, then deletes the session's
   * events for good — unless `keepRecords` (the gateway is shutting down).
   */
  async close(options: EventCloseOptions = {}): Promise<void> {
    if (this.closed) return;
    for (const waiter of [...this.waiters]) waiter(null);
    this.closed = true;
    this.observers.clear();
    await this.tail;
    if (options.keepRecords) return;
    try {
      await this.store.deleteBySession(this.sessionId);
    } catch (err) {
      this.logger?.error({ err: errorMessage(err) }, "event_store_write_failed");
    }
  }

  private async append(event: StoredEvent): Promise<void> {
    let stored: EventRecord;
    try {
      const { event: record, evicted } = await this.store.append(this.sessionId, event, eventLimits(this.options));
      stored = record;
      for (const e of evicted) {
        const reason = e.reason === "session" ? "session maxEvents" : "gateway maxTotal";
        this.logger?.warn({ evictedCount: e.count, evictedUndelivered: e.undelivered, reason, own: e.sessionId === this.sessionId }, "event_store_eviction");
        if (e.sessionId === this.sessionId && e.reason === "session") this.warned = false;
      }
    } catch (err) {
      this.logger?.error({ type: event.type, server: event.server, err: errorMessage(err) }, "event_store_write_failed");
      return;
    }
    await this.warnWhenFull(stored.seq);
    if (this.holding > 0) {
      this.heldWake ??= event;
      return;
    }
    for (const waiter of [...this.waiters]) waiter(event);
  }

  /** Logs once when the session's store passes warningThreshold (checked only once it could have: seq ≥ count). */
  private async warnWhenFull(seq: number): Promise<void> {
    const { maxEvents, warningThreshold } = this.options;
    if (this.warned || seq < maxEvents * warningThreshold) return;
    const { count } = await this.store.stats(this.sessionId).catch(() => ({ count: 0 }));
    if (count < maxEvents * warningThreshold) return;
    this.warned = true;
    this.logger?.warn({ count, maxEvents }, "event_store_approaching_limit");
  }

  /** The take's events, after one `events_evicted` notice when undelivered events were evicted since the last take. */
  private withNotice(take: EventTake): StoredEvent[] {
    const events = take.events.map(toStoredEvent);
    const notice = this.evictionNotice(take.evicted);
    return notice ? [notice, ...events] : events;
  }

  private evictionNotice({ session, gateway }: EvictedCounts): StoredEvent | undefined {
    const count = session + gateway;
    if (count === 0) return undefined;
    const why = [
      ...(session ? [`the session's event store is full (maxEvents ${this.options.maxEvents})`] : []),
      ...(gateway ? [`the gateway's event store is full (gateway.events.maxTotal ${this.options.maxTotal} across all sessions)`] : []),
    ];
    return {
      id: this.newId(),
      type: "events_evicted",
      server: "emceepee",
      createdAt: this.clock.now(),
      data: {
        count,
        bySessionLimit: session,
        byGatewayLimit: gateway,
        message: `${count} undelivered event(s) were dropped because ${why.join(" and ")}. Call await_activity or any tool more often.`,
      },
    };
  }
}

function evictedTotal(e: EvictedCounts): number {
  return e.session + e.gateway;
}

function toStoredEvent(r: EventRecord): StoredEvent {
  return { id: r.id, type: r.type as EventType, server: r.server, createdAt: r.createdAt, data: r.data };
}
