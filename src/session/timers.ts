/**
 * A session's timers (set_timer, design MF-22): each fires a `timer_expired`
 * event under the pseudo-server "emceepee", which wakes await_activity like
 * any event. Time comes from the injected clock; at most
 * `gateway.timers.maxPerSession` run at once; close() (the session ended)
 * clears every clock timer, and a callback after close does nothing. Timers
 * live in memory only: they end with the process (a timer is a reminder for
 * a live agent, not durable work).
 */
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import { ErrorCodes, GatewayError } from "../errors.js";

/** The server name timer events are filed under (the meta face's own, as for emceepee://diagrams). */
export const TIMER_SERVER = "emceepee";
/** Ended timers (fired one-shots, deleted) remembered for list_timers' include_inactive. */
const INACTIVE_KEPT = 50;
/** A repeating timer fires at most this often. */
export const MIN_INTERVAL_MS = 1_000;

export type TimerStatus = "active" | "expired" | "deleted";

export interface TimerRecord {
  id: string;
  message: string;
  durationMs: number;
  interval: boolean;
  status: TimerStatus;
  fireCount: number;
  /** Epoch ms. */
  createdAt: number;
  /** When it fires next (active), or last fired / would have fired. */
  expiresAt: number;
}

export interface SessionTimersDeps {
  clock: Clock;
  newId: IdGenerator;
  maxPerSession: number;
  /** Files the timer_expired event (the session's EventSystem). */
  fired(timer: TimerRecord): void;
}

export class SessionTimers {
  private readonly active = new Map<string, { record: TimerRecord; handle: TimerHandle }>();
  private readonly inactive = new Map<string, TimerRecord>();
  private closed = false;

  constructor(private readonly deps: SessionTimersDeps) {}

  set(durationMs: number, message: string, interval: boolean): TimerRecord {
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, "this session is closed");
    if (interval && durationMs < MIN_INTERVAL_MS) {
      throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `a repeating timer (interval: true) needs duration_ms of at least ${MIN_INTERVAL_MS}`);
    }
    if (this.active.size >= this.deps.maxPerSession) {
      throw new GatewayError(
        ErrorCodes.LIMIT_REACHED,
        `this session has ${this.active.size} timers running (gateway.timers.maxPerSession is ${this.deps.maxPerSession}); delete_timer one first`,
      );
    }
    const now = this.deps.clock.now();
    const record: TimerRecord = {
      id: this.deps.newId(),
      message,
      durationMs,
      interval,
      status: "active",
      fireCount: 0,
      createdAt: now,
      expiresAt: now + durationMs,
    };
    this.schedule(record);
    return { ...record };
  }

  /** Active timers, oldest first; with `includeInactive` also the last ended ones. */
  list(includeInactive = false): TimerRecord[] {
    const active = [...this.active.values()].map((t) => ({ ...t.record }));
    if (!includeInactive) return active;
    return [...active, ...[...this.inactive.values()].map((t) => ({ ...t }))].sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  get(id: string): TimerRecord {
    const found = this.active.get(id)?.record ?? this.inactive.get(id);
    if (!found) throw unknownTimer(id);
    return { ...found };
  }

  /** Stops an active timer; returns it as it was. Throws EMCP_UNKNOWN_TIMER for an id not active here. */
  delete(id: string): TimerRecord {
    const entry = this.active.get(id);
    if (!entry) {
      if (this.inactive.has(id))
        throw new GatewayError(ErrorCodes.UNKNOWN_TIMER, `timer '${id}' already ended (${this.inactive.get(id)!.status}); nothing to delete`);
      throw unknownTimer(id);
    }
    this.deps.clock.clearTimeout(entry.handle);
    this.active.delete(id);
    const before = { ...entry.record };
    this.retire({ ...entry.record, status: "deleted" });
    return before;
  }

  /** Live clock timers (tests: 0 after close). */
  get running(): number {
    return this.active.size;
  }

  /** Clears every timer; nothing fires afterwards. */
  close(): void {
    this.closed = true;
    for (const { handle } of this.active.values()) this.deps.clock.clearTimeout(handle);
    this.active.clear();
    this.inactive.clear();
  }

  private schedule(record: TimerRecord): void {
    const handle = this.deps.clock.setTimeout(() => this.fire(record.id), Math.max(0, record.expiresAt - this.deps.clock.now()));
    this.active.set(record.id, { record, handle });
  }

  private fire(id: string): void {
    const entry = this.active.get(id);
    if (this.closed || !entry) return;
    const { record } = entry;
    record.fireCount++;
    this.active.delete(id);
    if (record.interval) {
      const fired = { ...record };
      record.expiresAt += record.durationMs;
      this.schedule(record);
      this.deps.fired(fired);
      return;
    }
    record.status = "expired";
    this.retire(record);
    this.deps.fired({ ...record });
  }

  private retire(record: TimerRecord): void {
    this.inactive.set(record.id, record);
    while (this.inactive.size > INACTIVE_KEPT) this.inactive.delete(this.inactive.keys().next().value!);
  }
}

function unknownTimer(id: string): GatewayError {
  return new GatewayError(ErrorCodes.UNKNOWN_TIMER, `no timer '${id}' in this session; list_timers (include_inactive: true) lists them`);
}
