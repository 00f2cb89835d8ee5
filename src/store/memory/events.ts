/**
 * Memory EventStore: per session an array of events in seq order, a
 * delivered watermark and eviction counts; gateway-wide one insertion-ordered
 * Map (global sequence → owner) that finds the oldest events across sessions
 * without scanning them all. Methods never await midway, so each take is atomic.
 */
import type { EventInput, EventLimits, EventRecord, EventStore, EventTake, EvictedCounts, EvictionReport } from "../contracts.js";
import { assertLimit, evictBatch, jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

interface Held {
  record: EventRecord;
  gseq: number;
}

interface SessionEvents {
  events: Held[];
  nextSeq: number;
  deliveredSeq: number;
  evicted: EvictedCounts;
}

export class MemoryEventStore implements EventStore {
  private readonly sessions = new Map<string, SessionEvents>();
  /** Every stored event in global order: gseq → owner. */
  private readonly global = new Map<number, string>();
  private gseq = 0;

  constructor(private readonly guard: MemoryGuard) {}

  async append(sessionId: string, event: EventInput, limits: EventLimits): Promise<{ event: EventRecord; evicted: EvictionReport[] }> {
    this.guard.check();
    assertLimit("maxPerSession", limits.maxPerSession);
    assertLimit("maxTotal", limits.maxTotal);
    let s = this.sessions.get(sessionId);
    if (!s) this.sessions.set(sessionId, (s = { events: [], nextSeq: 1, deliveredSeq: 0, evicted: { session: 0, gateway: 0 } }));
    const evicted: EvictionReport[] = [];
    if (s.events.length >= limits.maxPerSession) evicted.push(this.dropFront(sessionId, s, evictBatch(limits.maxPerSession), "session"));
    if (this.global.size >= limits.maxTotal) evicted.push(...this.evictOldest(evictBatch(limits.maxTotal)));
    const record: EventRecord = { ...jsonCopy(event), seq: s.nextSeq++ };
    const gseq = ++this.gseq;
    s.events.push({ record, gseq });
    this.global.set(gseq, sessionId);
    return { event: jsonCopy(record), evicted };
  }

  async takeUndelivered(sessionId: string): Promise<EventTake> {
    this.guard.check();
    const s = this.sessions.get(sessionId);
    if (!s) return { events: [], evicted: { session: 0, gateway: 0 } };
    const events = s.events.filter((e) => e.record.seq > s.deliveredSeq).map((e) => jsonCopy(e.record));
    return { events, evicted: this.markAllDelivered(s) };
  }

  async takeAfter(sessionId: string, cursorId: string): Promise<EventTake & { found: boolean }> {
    this.guard.check();
    const s = this.sessions.get(sessionId);
    if (!s) return { events: [], found: false, evicted: { session: 0, gateway: 0 } };
    const { events, found } = after(s, cursorId);
    return { events, found, evicted: this.markAllDelivered(s) };
  }

  async listAfter(sessionId: string, cursorId?: string): Promise<{ events: EventRecord[]; found: boolean }> {
    this.guard.check();
    const s = this.sessions.get(sessionId);
    if (!s) return { events: [], found: false };
    return after(s, cursorId);
  }

  async stats(sessionId: string): Promise<{ count: number; undelivered: number; lastId?: string; evicted: EvictedCounts }> {
    this.guard.check();
    const s = this.sessions.get(sessionId);
    if (!s) return { count: 0, undelivered: 0, evicted: { session: 0, gateway: 0 } };
    let undelivered = 0;
    for (let i = s.events.length - 1; i >= 0 && s.events[i]!.record.seq > s.deliveredSeq; i--) undelivered++;
    const last = s.events.at(-1)?.record.id;
    return { count: s.events.length, undelivered, ...(last !== undefined ? { lastId: last } : {}), evicted: { ...s.evicted } };
  }

  async total(): Promise<number> {
    this.guard.check();
    return this.global.size;
  }

  async deleteBySession(sessionId: string): Promise<number> {
    this.guard.check();
    const s = this.sessions.get(sessionId);
    if (!s) return 0;
    for (const e of s.events) this.global.delete(e.gseq);
    this.sessions.delete(sessionId);
    return s.events.length;
  }

  private markAllDelivered(s: SessionEvents): EvictedCounts {
    s.deliveredSeq = s.nextSeq - 1;
    const evicted = s.evicted;
    s.evicted = { session: 0, gateway: 0 };
    return evicted;
  }

  private dropFront(sessionId: string, s: SessionEvents, n: number, reason: "session" | "gateway"): EvictionReport {
    const dropped = s.events.splice(0, n);
    for (const e of dropped) this.global.delete(e.gseq);
    const undelivered = dropped.filter((e) => e.record.seq > s.deliveredSeq).length;
    s.evicted[reason] += undelivered;
    return { sessionId, reason, count: dropped.length, undelivered };
  }

  /** The `k` oldest events gateway-wide; each owner's share is its own oldest. */
  private evictOldest(k: number): EvictionReport[] {
    const share = new Map<string, number>();
    let taken = 0;
    for (const owner of this.global.values()) {
      if (taken++ >= k) break;
      share.set(owner, (share.get(owner) ?? 0) + 1);
    }
    return [...share].map(([owner, n]) => this.dropFront(owner, this.sessions.get(owner)!, n, "gateway"));
  }
}

function after(s: SessionEvents, cursorId: string | undefined): { events: EventRecord[]; found: boolean } {
  const i = cursorId === undefined ? -1 : s.events.findIndex((e) => e.record.id === cursorId);
  return { events: s.events.slice(i + 1).map((e) => jsonCopy(e.record)), found: i >= 0 };
}
