/**
 * SQLite ReplayStore: `replay` rows keyed by (session, seq), indexed by
 * stream; `replay_sessions` keeps each session's next seq, count and bytes so
 * the bounds are checked without summing rows. Event ids are the session's
 * sequence numbers as strings.
 */
import type { ReplayedMessage, ReplayLimits, ReplayStore } from "../contracts.js";
import { assertLimit, REPLAY_EVENT_ID } from "../policy.js";
import type { SqliteDb } from "./db.js";

interface SessionRow {
  next_seq: number;
  count: number;
  bytes: number;
}

export class SqliteReplayStore implements ReplayStore {
  constructor(private readonly db: SqliteDb) {}

  async append(sessionId: string, streamId: string, message: Record<string, unknown>, limits: ReplayLimits): Promise<string> {
    assertLimit("maxEvents", limits.maxEvents);
    assertLimit("maxBytes", limits.maxBytes);
    const json = JSON.stringify(message);
    const bytes = Buffer.byteLength(json);
    return this.db.write("store an SSE message", () => {
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
    });
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
