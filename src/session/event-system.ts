/**
 * EventSystem (seed 003 §1): one per session. Category-1 events are stored in
 * a bounded list and delivered exactly once — in whichever tool response (or
 * await_activity) comes first. Waiters (await_activity) are woken on every
 * new event; all concurrent waiters wake.
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

export interface EventSystemOptions {
  /** @default 1000 */
  maxEvents: number;
  /** Warn once the store is this full (0..1]. @default 0.8 */
  warningThreshold: number;
}

type Waiter = (event: StoredEvent | null) => void;

export class EventSystem {
  private events: StoredEvent[] = [];
  /** Index into `events` of the first undelivered event. */
  private undelivered = 0;
  private readonly waiters = new Set<Waiter>();
  private warned = false;
  private evictedUndelivered = 0;

  constructor(
    private readonly options: EventSystemOptions,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
    private readonly logger?: Logger,
  ) {}

  add(type: EventType, server: string, data: Record<string, unknown> = {}): StoredEvent {
    this.enforceLimit();
    const event: StoredEvent = { id: this.newId(), type, server, createdAt: this.clock.now(), data };
    this.events.push(event);
    for (const waiter of [...this.waiters]) waiter(event);
    return event;
  }

  hasNew(): boolean {
    return this.undelivered < this.events.length || this.evictedUndelivered > 0;
  }

  /** Returns the undelivered events and marks them delivered (exactly once). */
  takeNew(): StoredEvent[] {
    const fresh = this.events.slice(this.undelivered);
    if (this.evictedUndelivered > 0) {
      fresh.unshift({
        id: this.newId(),
        type: "events_evicted",
        server: "emceepee",
        createdAt: this.clock.now(),
        data: {
          count: this.evictedUndelivered,
          message: `${this.evictedUndelivered} undelivered event(s) were dropped because the session's event store is full (maxEvents ${this.options.maxEvents}). Call await_activity or any tool more often.`,
        },
      });
      this.evictedUndelivered = 0;
    }
    this.undelivered = this.events.length;
    return fresh;
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

  /** Wakes every waiter with nothing (session closing); their timers are cleared. */
  close(): void {
    for (const waiter of [...this.waiters]) waiter(null);
    this.events = [];
    this.undelivered = 0;
  }

  private enforceLimit(): void {
    const { maxEvents, warningThreshold } = this.options;
    const count = this.events.length;
    if (count >= maxEvents) {
      const evict = Math.max(1, Math.ceil(maxEvents * 0.1));
      const evictedUndelivered = Math.max(0, evict - this.undelivered);
      this.events.splice(0, evict);
      this.evictedUndelivered += evictedUndelivered;
      this.undelivered = Math.max(0, this.undelivered - evict);
      this.logger?.warn({ evicted: evict, evictedUndelivered, maxEvents }, "event_limit_eviction");
      this.warned = false;
    } else if (!this.warned && count >= maxEvents * warningThreshold) {
      this.warned = true;
      this.logger?.warn({ count, maxEvents }, "event_store_approaching_limit");
    }
  }
}
