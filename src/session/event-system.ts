/**
 * EventSystem (seed 003 §1): one per session. Category-1 events are stored in
 * a bounded list and delivered exactly once — in whichever tool response (or
 * await_activity) comes first. Waiters (await_activity) are woken on every
 * new event; all concurrent waiters wake.
 *
 * Two bounds (seed 003 "Event Retention Strategy"): `maxEvents` per session,
 * and `maxTotal` across all sessions, kept by one EventLedger that the
 * SessionManager shares between its sessions. Either evicts the oldest 10%
 * (of that bound); undelivered events lost that way are reported to their
 * session once, as one `events_evicted` notice.
 *
 * Cursor reads (await_activity `sinceEventId`, see docs/adr/0004): the events
 * stored after the cursor, delivered or not; afterwards everything stored
 * counts as delivered. Delivery stays exactly once for clients that never pass
 * a cursor; a client that passes an older cursor asks for a re-delivery.
 */
import type { Clock, IdGenerator } from "../clock.js";
import type { Logger } from "../logging.js";

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
  | "events_evicted";

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
  /** Warn once the store is this full (0..1]. */
  warningThreshold: number;
}

export interface EventLedgerOptions {
  /** Events stored across all sessions (gateway.events.maxTotal). */
  maxTotal: number;
  /** Warn once the total is this full (0..1]. */
  warningThreshold: number;
}

/** The part of seed 003's eviction that each bound takes. */
const EVICT_FRACTION = 0.1;

/**
 * The gateway-wide count of stored events, and their global order: one queue
 * entry per stored event, oldest first. Entries of events a session already
 * dropped (its own bound, or close) go stale and are skipped or compacted
 * away; an owner's live entries are always its oldest stored events.
 */
export class EventLedger {
  private queue: Array<{ owner: EventSystem; seq: number }> = [];
  private head = 0;
  private stored = 0;
  private warned = false;

  constructor(
    private readonly options: EventLedgerOptions,
    private readonly logger?: Logger,
  ) {}

  get maxTotal(): number {
    return this.options.maxTotal;
  }

  /** Events stored across all sessions. */
  get total(): number {
    return this.stored;
  }

  /** @internal An EventSystem is about to store one event: evict the oldest gateway-wide when full. */
  makeRoom(): void {
    const { maxTotal, warningThreshold } = this.options;
    if (this.stored >= maxTotal) {
      this.evictOldest(Math.max(1, Math.ceil(maxTotal * EVICT_FRACTION)));
      this.warned = false;
    } else if (!this.warned && this.stored >= maxTotal * warningThreshold) {
      this.warned = true;
      this.logger?.warn({ totalCount: this.stored, maxTotal }, "event_store_approaching_limit");
    }
  }

  /** @internal `owner` stored the event with this sequence number. */
  added(owner: EventSystem, seq: number): void {
    this.queue.push({ owner, seq });
    this.stored++;
  }

  /** @internal An owner dropped `n` events by itself (its own bound, or close). */
  removed(n: number): void {
    this.stored -= n;
    this.compact();
  }

  private evictOldest(k: number): void {
    const batch = new Map<EventSystem, number>();
    let evicted = 0;
    while (evicted < k && this.head < this.queue.length) {
      const { owner, seq } = this.queue[this.head++]!;
      if (!owner.holdsSeq(seq)) continue; // stale: the owner dropped it already
      batch.set(owner, (batch.get(owner) ?? 0) + 1);
      evicted++;
    }
    for (const [owner, n] of batch) owner.evictForLedger(n);
    this.stored -= evicted;
    this.logger?.warn({ evictedCount: evicted, sessions: batch.size, reason: "gateway maxTotal", maxTotal: this.options.maxTotal }, "event_store_eviction");
    this.compact();
  }

  /** Drops consumed entries, and stale ones once they outnumber the live ones. */
  private compact(): void {
    if (this.queue.length - this.head > 2 * this.stored + 64) {
      this.queue = this.queue.slice(this.head).filter((e) => e.owner.holdsSeq(e.seq));
      this.head = 0;
    } else if (this.head > 64 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  /** Queue entries held (live and stale), for tests of its bound. */
  get queueLength(): number {
    return this.queue.length - this.head;
  }
}

type Waiter = (event: StoredEvent | null) => void;

export class EventSystem {
  private events: StoredEvent[] = [];
  /** Index into `events` of the first undelivered event. */
  private undelivered = 0;
  /** How many events were ever dropped from the front: the sequence number of `events[0]`. */
  private dropped = 0;
  private readonly waiters = new Set<Waiter>();
  private warned = false;
  /** Undelivered events evicted, by the bound that evicted them (reported once, by the next read). */
  private evictedUndelivered = { session: 0, gateway: 0 };
  private closed = false;

  constructor(
    private readonly options: EventSystemOptions,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
    /** The session's logger (the session's task and request managers log through it too). */
    readonly logger?: Logger,
    /** The gateway-wide bound, shared by every session of one SessionManager. */
    private readonly ledger?: EventLedger,
  ) {}

  add(type: EventType, server: string, data: Record<string, unknown> = {}): StoredEvent {
    const event: StoredEvent = { id: this.newId(), type, server, createdAt: this.clock.now(), data };
    if (this.closed) return event; // a closed session stores nothing (nobody can read it)
    this.enforceLimit();
    this.ledger?.makeRoom();
    this.events.push(event);
    this.ledger?.added(this, this.dropped + this.events.length - 1);
    for (const waiter of [...this.waiters]) waiter(event);
    return event;
  }

  hasNew(): boolean {
    return this.undelivered < this.events.length || this.evictedCount() > 0;
  }

  /** Returns the undelivered events and marks them delivered (exactly once). */
  takeNew(): StoredEvent[] {
    const fresh = this.events.slice(this.undelivered);
    const notice = this.takeEvictionNotice();
    if (notice) fresh.unshift(notice);
    this.undelivered = this.events.length;
    return fresh;
  }

  /** Whether a cursor read would return anything (see takeAfter). */
  hasAfter(cursor: string): boolean {
    const i = this.indexOf(cursor);
    return (i >= 0 ? i < this.events.length - 1 : this.events.length > 0) || this.evictedCount() > 0;
  }

  /**
   * Cursor read: the stored events after `cursor`, delivered before or not
   * (a re-delivery the client asked for). A cursor not in the store (evicted,
   * or never an id of this session) reads everything stored, as seed 003's
   * getEventsAfter does; `found` says which. Everything stored is delivered
   * afterwards, including undelivered events up to the cursor (the client
   * says it has them).
   */
  takeAfter(cursor: string): { events: StoredEvent[]; found: boolean } {
    const i = this.indexOf(cursor);
    const out = this.events.slice(i + 1);
    const notice = this.takeEvictionNotice();
    if (notice) out.unshift(notice);
    this.undelivered = this.events.length;
    if (i < 0) this.logger?.warn({ sinceEventId: cursor, returned: out.length }, "event_cursor_not_found");
    return { events: out, found: i >= 0 };
  }

  /** Events after a cursor (for inspection / resumption); does not mark delivery. */
  after(eventId: string | undefined): StoredEvent[] {
    if (!eventId) return [...this.events];
    return this.events.filter((e) => e.id > eventId);
  }

  get size(): number {
    return this.events.length;
  }

  get lastEventId(): string | undefined {
    return this.events.at(-1)?.id;
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

  /** Wakes every waiter with nothing (session closing); their timers are cleared; the store is emptied for good. */
  close(): void {
    for (const waiter of [...this.waiters]) waiter(null);
    const n = this.events.length;
    this.closed = true;
    this.events = [];
    this.dropped += n;
    this.undelivered = 0;
    this.evictedUndelivered = { session: 0, gateway: 0 };
    if (n) this.ledger?.removed(n);
  }

  /** @internal Whether the ledger's entry `seq` is still stored here. */
  holdsSeq(seq: number): boolean {
    return !this.closed && seq >= this.dropped && seq < this.dropped + this.events.length;
  }

  /** @internal The ledger evicts this session's `n` oldest events (they are its oldest gateway-wide). */
  evictForLedger(n: number): void {
    const { undelivered } = this.dropFront(n, "gateway");
    this.logger?.warn({ evictedCount: n, evictedUndelivered: undelivered, reason: "gateway maxTotal" }, "event_store_eviction");
  }

  private indexOf(cursor: string): number {
    for (let i = this.events.length - 1; i >= 0; i--) if (this.events[i]!.id === cursor) return i;
    return -1;
  }

  private evictedCount(): number {
    return this.evictedUndelivered.session + this.evictedUndelivered.gateway;
  }

  private takeEvictionNotice(): StoredEvent | undefined {
    const { session, gateway } = this.evictedUndelivered;
    const count = session + gateway;
    if (count === 0) return undefined;
    const why = [
      ...(session ? [`the session's event store is full (maxEvents ${this.options.maxEvents})`] : []),
      ...(gateway ? [`the gateway's event store is full (gateway.events.maxTotal ${this.ledger?.maxTotal} across all sessions)`] : []),
    ];
    this.evictedUndelivered = { session: 0, gateway: 0 };
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

  private dropFront(n: number, reason: "session" | "gateway"): { undelivered: number } {
    const undelivered = Math.max(0, n - this.undelivered);
    this.events.splice(0, n);
    this.dropped += n;
    this.undelivered = Math.max(0, this.undelivered - n);
    this.evictedUndelivered[reason] += undelivered;
    return { undelivered };
  }

  private enforceLimit(): void {
    const { maxEvents, warningThreshold } = this.options;
    const count = this.events.length;
    if (count >= maxEvents) {
      const evict = Math.max(1, Math.ceil(maxEvents * EVICT_FRACTION));
      const { undelivered } = this.dropFront(evict, "session");
      this.ledger?.removed(evict);
      this.logger?.warn({ evictedCount: evict, evictedUndelivered: undelivered, reason: "session maxEvents", maxEvents }, "event_store_eviction");
      this.warned = false;
    } else if (!this.warned && count >= maxEvents * warningThreshold) {
      this.warned = true;
      this.logger?.warn({ count, maxEvents }, "event_store_approaching_limit");
    }
  }
}
