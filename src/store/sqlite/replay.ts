/**
 * SQLite ReplayStore: `replay` rows keyed by (session, seq), indexed by
 * stream; `replay_sessions` keeps each session's next seq, count and bytes so
 * the bounds are checked without summing rows. Event ids are the session's
 * sequence numbers as strings. Appends made in one turn of the event loop are
 * committed together, in one transaction (group commit, issue 27): each
 * resolves once that transaction committed, so what an id names is on disk
 * before the id is handed out.
 */
import type { ReplayedMessage, ReplayLimits, ReplayStore } from "../contracts.js";
import { assertLimit, REPLAY_EVENT_ID } from "../policy.js";
import type { SqliteDb } from "./db.js";

interface SessionRow {
  next_seq: number;
  count: number;
  bytes: number;
}

interface Append {
  sessionId: string;
  streamId: string;
  json: string;
  bytes: number;
  limits: ReplayLimits;
  resolve(id: string): void;
  reject(err: unknown): void;
}

export class SqliteReplayStore implements ReplayStore {
  /** Appends waiting for this turn's commit (undefined: none, no commit scheduled). */
  private batch: Append[] | undefined;

  constructor(private readonly db: SqliteDb) {}

  async append(sessionId: string, streamId: string, message: Record<string, unknown>, limits: ReplayLimits): Promise<string> {
    assertLimit("maxEvents", limits.maxEvents);
    assertLimit("maxBytes", limits.maxBytes);
    const json = JSON.stringify(message);
    const bytes = Buffer.byteLength(json);
    return new Promise<string>((resolve, reject) => {
      if (this.batch === undefined) {
        this.batch = [];
        setImmediate(() => this.flush());
      }
      this.batch.push({ sessionId, streamId, json, bytes, limits, resolve, reject });
    });
  }

  /** Commits the waiting appends in one transaction (the store calls it before closing, too). Never throws. */
  flush(): void {
    const batch = this.batch;
    this.batch = undefined;
    if (!batch?.length) return;
    let ids: string[];
    try {
      ids = this.db.write(batch.length === 1 ? "store an SSE message" : `store ${batch.length} SSE messages`, () =>
        batch.map((a) => this.appendOne(a.sessionId, a.streamId, a.json, a.bytes, a.limits)),
      );
    } catch (err) {
      for (const a of batch) a.reject(err);
      return;
    }
    batch.forEach((a, i) => a.resolve(ids[i]!));
  }

  /** One message, inside the batch's transaction. */
  private appendOne(sessionId: string, streamId: string, json: string, bytes: number, limits: ReplayLimits): string {
    let s = this.session(sessionId);
    if (!s) {
      this.db.stmt("INSERT INTO replay_sessions (session_id, next_seq, count, bytes) VALUES (?, 1, 0, 0)").run(sessionId);
      s = { next_seq: 1, count: 0, bytes: 0 };
    }
    const seq = s.next_seq;
    this.db.stmt("INSERT INTO replay (session_id, seq, stream_id, bytes, message) VALUES (?, ?, ?, ?, ?)").run(sessionId, seq, streamId, bytes, json);
    let count = s.count + 1;
    let total = s.bytes + bytes;
    // The oldest go while either bound is exceeded; the newest message always stays.
    let lastDropped: number | undefined;
    let droppedBytes = 0;
    let dropped = 0;
    if (count > limits.maxEvents || total > limits.maxBytes) {
      for (const row of this.db.stmt("SELECT seq, bytes FROM replay WHERE session_id = ? ORDER BY seq").iterate(sessionId) as Iterable<{
        seq: number;
        bytes: number;
      }>) {
        if (!(count > limits.maxEvents || (total > limits.maxBytes && count > 1))) break;
        lastDropped = row.seq;
        count--;
        total -= row.bytes;
        droppedBytes += row.bytes;
        dropped++;
      }
    }
    if (lastDropped !== undefined) this.db.stmt("DELETE FROM replay WHERE session_id = ? AND seq <= ?").run(sessionId, lastDropped);
    this.db
      .stmt("UPDATE replay_sessions SET next_seq = ?, count = count + 1 - ?, bytes = bytes + ? - ? WHERE session_id = ?")
      .run(seq + 1, dropped, bytes, droppedBytes, sessionId);
    return String(seq);
  }

  async streamOf(sessionId: string, eventId: string): Promise<string | undefined> {
    return this.db.read("look up an SSE event", () => this.streamAt(sessionId, eventId));
  }

  async replayAfter(
    sessionId: string,
    eventId: string,
  ): Promise<{ streamId: string; messages: Array<{ eventId: string; message: Record<string, unknown> }> } | undefined> {
    return this.db.read("replay SSE messages", () => {
      const streamId = this.streamAt(sessionId, eventId);
      if (streamId === undefined) return undefined;
      const rows = this.db
        .stmt("SELECT seq, message FROM replay WHERE session_id = ? AND stream_id = ? AND seq > ? ORDER BY seq")
        .all(sessionId, streamId, Number(eventId)) as Array<{ seq: number; message: string }>;
      return { streamId, messages: rows.map((r) => ({ eventId: String(r.seq), message: JSON.parse(r.message) as Record<string, unknown> })) };
    });
  }

  async replayStream(sessionId: string, streamId: string, afterSeq: number): Promise<{ keptFrom: number; messages: ReplayedMessage[] }> {
    return this.db.read("replay an SSE stream", () => {
      const oldest = this.db.stmt("SELECT min(seq) AS seq FROM replay WHERE session_id = ?").get(sessionId) as { seq: number | null };
      const keptFrom = oldest.seq ?? this.session(sessionId)?.next_seq ?? 1;
      const rows = this.db
        .stmt("SELECT seq, message FROM replay WHERE session_id = ? AND stream_id = ? AND seq > ? ORDER BY seq")
        .all(sessionId, streamId, afterSeq) as Array<{ seq: number; message: string }>;
      return { keptFrom, messages: rows.map((r) => ({ eventId: String(r.seq), message: JSON.parse(r.message) as Record<string, unknown> })) };
    });
  }

  async size(sessionId: string): Promise<{ events: number; bytes: number }> {
    return this.db.read("measure SSE replay", () => {
      const s = this.session(sessionId);
      return { events: s?.count ?? 0, bytes: s?.bytes ?? 0 };
    });
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return this.db.write("delete a session's SSE replay", () => {
      const n = this.db.stmt("DELETE FROM replay WHERE session_id = ?").run(sessionId).changes;
      this.db.stmt("DELETE FROM replay_sessions WHERE session_id = ?").run(sessionId);
      return n;
    });
  }

  private session(sessionId: string): SessionRow | undefined {
    return this.db.stmt("SELECT next_seq, count, bytes FROM replay_sessions WHERE session_id = ?").get(sessionId) as SessionRow | undefined;
  }

  private streamAt(sessionId: string, eventId: string): string | undefined {
    if (!REPLAY_EVENT_ID.test(eventId)) return undefined;
    const row = this.db.stmt("SELECT stream_id FROM replay WHERE session_id = ? AND seq = ?").get(sessionId, Number(eventId)) as
      { stream_id: string } | undefined;
    return row?.stream_id;
  }
}
