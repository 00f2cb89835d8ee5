/**
 * SQLite EventStore. `events` holds every stored event with its gateway-wide
 * order (gseq, the rowid) and its session order (seq); `event_sessions` holds
 * each session's next seq, delivered watermark, count and eviction counts;
 * `counters.events_total` the gateway-wide count. Append (with its evictions)
 * and each take are one IMMEDIATE transaction, so an event is delivered once
 * even to concurrent callers, other processes and after a restart.
 */
import type { EventInput, EventLimits, EventRecord, EventStore, EventTake, EvictedCounts, EvictionReport } from "../contracts.js";
import { assertLimit, evictBatch } from "../policy.js";
import type { SqliteDb } from "./db.js";

interface SessionRow {
  next_seq: number;
  delivered_seq: number;
  count: number;
  evicted_session: number;
  evicted_gateway: number;
}

const NO_EVICTIONS: EvictedCounts = { session: 0, gateway: 0 };

export class SqliteEventStore implements EventStore {
  constructor(private readonly db: SqliteDb) {}

  async append(sessionId: string, event: EventInput, limits: EventLimits): Promise<{ event: EventRecord; evicted: EvictionReport[] }> {
    assertLimit("maxPerSession", limits.maxPerSession);
    assertLimit("maxTotal", limits.maxTotal);
    return this.db.write("store an event", () => {
      let s = this.session(sessionId);
      if (!s) {
        this.db
          .stmt("INSERT INTO event_sessions (session_id, next_seq, delivered_seq, count, evicted_session, evicted_gateway) VALUES (?, 1, 0, 0, 0, 0)")
          .run(sessionId);
        s = this.session(sessionId)!;
      }
      const evicted: EvictionReport[] = [];
      if (s.count >= limits.maxPerSession) evicted.push(this.dropFront(sessionId, evictBatch(limits.maxPerSession), "session"));
      if (this.totalCount() >= limits.maxTotal) {
        const shares = this.db
          .stmt(
            `SELECT session_id AS owner, count(*) AS n FROM (SELECT gseq, session_id FROM events ORDER BY gseq LIMIT ?)
             GROUP BY session_id ORDER BY min(gseq)`,
          )
          .all(evictBatch(limits.maxTotal)) as Array<{ owner: string; n: number }>;
        for (const { owner, n } of shares) evicted.push(this.dropFront(owner, n, "gateway"));
      }
      const record: EventRecord = { ...event, seq: s.next_seq };
      const json = JSON.stringify(record);
      this.db.stmt("INSERT INTO events (session_id, seq, id, record) VALUES (?, ?, ?, ?)").run(sessionId, record.seq, record.id, json);
      this.db.stmt("UPDATE event_sessions SET next_seq = next_seq + 1, count = count + 1 WHERE session_id = ?").run(sessionId);
      this.addTotal(1);
      return { event: JSON.parse(json) as EventRecord, evicted };
    });
  }

  async takeUndelivered(sessionId: string): Promise<EventTake> {
    return this.db.write("take undelivered events", () => {
      const s = this.session(sessionId);
      if (!s) return { events: [], evicted: { ...NO_EVICTIONS } };
      return { events: this.after(sessionId, s.delivered_seq), evicted: this.markAllDelivered(sessionId, s) };
    });
  }

  async takeAfter(sessionId: string, cursorId: string): Promise<EventTake & { found: boolean }> {
    return this.db.write("read events after a cursor", () => {
      const s = this.session(sessionId);
      if (!s) return { events: [], found: false, evicted: { ...NO_EVICTIONS } };
      const cursor = this.seqOf(sessionId, cursorId);
      return { events: this.after(sessionId, cursor ?? 0), found: cursor !== undefined, evicted: this.markAllDelivered(sessionId, s) };
    });
  }

  async listAfter(sessionId: string, cursorId?: string): Promise<{ events: EventRecord[]; found: boolean }> {
    return this.db.read("list events", () => {
      const cursor = cursorId === undefined ? undefined : this.seqOf(sessionId, cursorId);
      return { events: this.after(sessionId, cursor ?? 0), found: cursor !== undefined };
    });
  }

  async stats(sessionId: string): Promise<{ count: number; undelivered: number; lastId?: string; evicted: EvictedCounts }> {
    return this.db.read("count events", () => {
      const s = this.session(sessionId);
      if (!s) return { count: 0, undelivered: 0, evicted: { ...NO_EVICTIONS } };
      const undelivered = (this.db.stmt("SELECT count(*) AS n FROM events WHERE session_id = ? AND seq > ?").get(sessionId, s.delivered_seq) as { n: number })
        .n;
      const last = this.db.stmt("SELECT id FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1").get(sessionId) as { id: string } | undefined;
      return {
        count: s.count,
        undelivered,
        ...(last ? { lastId: last.id } : {}),
        evicted: { session: s.evicted_session, gateway: s.evicted_gateway },
      };
    });
  }

  async total(): Promise<number> {
    return this.db.read("count events", () => this.totalCount());
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return this.db.inTurn("delete a session's events", () => {
      const n = this.db.stmt("DELETE FROM events WHERE session_id = ?").run(sessionId).changes;
      this.db.stmt("DELETE FROM event_sessions WHERE session_id = ?").run(sessionId);
      this.addTotal(-n);
      return n;
    });
  }

  private session(sessionId: string): SessionRow | undefined {
    return this.db.stmt("SELECT next_seq, delivered_seq, count, evicted_session, evicted_gateway FROM event_sessions WHERE session_id = ?").get(sessionId) as
      SessionRow | undefined;
  }

  private seqOf(sessionId: string, id: string): number | undefined {
    return (this.db.stmt("SELECT seq FROM events WHERE session_id = ? AND id = ? ORDER BY seq DESC LIMIT 1").get(sessionId, id) as { seq: number } | undefined)
      ?.seq;
  }

  private after(sessionId: string, seq: number): EventRecord[] {
    const rows = this.db.stmt("SELECT record FROM events WHERE session_id = ? AND seq > ? ORDER BY seq").all(sessionId, seq) as Array<{ record: string }>;
    return rows.map((r) => JSON.parse(r.record) as EventRecord);
  }

  private markAllDelivered(sessionId: string, s: SessionRow): EvictedCounts {
    this.db.stmt("UPDATE event_sessions SET delivered_seq = next_seq - 1, evicted_session = 0, evicted_gateway = 0 WHERE session_id = ?").run(sessionId);
    return { session: s.evicted_session, gateway: s.evicted_gateway };
  }

  /** Drops the session's `n` oldest events, counting the undelivered ones for its next take. */
  private dropFront(sessionId: string, n: number, reason: "session" | "gateway"): EvictionReport {
    const s = this.session(sessionId)!;
    const span = this.db
      .stmt(
        "SELECT count(*) AS count, max(seq) AS last, coalesce(sum(seq > ?), 0) AS undelivered FROM (SELECT seq FROM events WHERE session_id = ? ORDER BY seq LIMIT ?)",
      )
      .get(s.delivered_seq, sessionId, n) as { count: number; last: number | null; undelivered: number };
    if (span.count > 0) {
      this.db.stmt("DELETE FROM events WHERE session_id = ? AND seq <= ?").run(sessionId, span.last);
      const column = reason === "session" ? "evicted_session" : "evicted_gateway";
      this.db.stmt(`UPDATE event_sessions SET count = count - ?, ${column} = ${column} + ? WHERE session_id = ?`).run(span.count, span.undelivered, sessionId);
      this.addTotal(-span.count);
    }
    return { sessionId, reason, count: span.count, undelivered: span.undelivered };
  }

  private totalCount(): number {
    return (this.db.stmt("SELECT value FROM counters WHERE name = 'events_total'").get() as { value: number }).value;
  }

  private addTotal(delta: number): void {
    if (delta !== 0) this.db.stmt("UPDATE counters SET value = value + ? WHERE name = 'events_total'").run(delta);
  }
}
