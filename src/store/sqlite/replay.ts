/**
 * SQLite ReplayStore: `replay` rows keyed by (session, seq); event ids are the
 * session's sequence numbers as strings. A session's next seq, count and bytes
 * (the bounds are checked without summing rows) are read from its rows once
 * per process and then kept in memory (`counters`, bounded): the file is this
 * process's alone while it serves (StoreOwnership), and the newest message is
 * always kept, so the rows say it all. An append is then one INSERT, plus a
 * DELETE of the oldest at the bounds (issue 27, schema version 15). Should
 * another writer change the rows anyway (a library user's second store on the
 * file), a failed commit forgets its sessions' counters and the message just
 * stored is never trimmed (counters found ahead are read again). Appends
 * made in one turn of the event loop are committed together, in the turn's
 * transaction with the store's other writes of that turn (SqliteDb.inTurn,
 * group commit): each resolves once that transaction committed, so what an
 * id names is on disk before the id is handed out.
 */
import type { ReplayedMessage, ReplayLimits, ReplayStore } from "../contracts.js";
import { assertLimit, REPLAY_EVENT_ID } from "../policy.js";
import type { SqliteDb } from "./db.js";

/** A session's counters: the seq its next message gets, and what its kept rows hold. */
interface Counters {
  nextSeq: number;
  count: number;
  bytes: number;
}

/**
 * Sessions whose counters are kept in memory (≈ 100 bytes each; a session's go with its rows); beyond it the longest
 * unused go, and a miss reads the session's rows again (a few hundred µs at 1,000 rows). Above any sessions.maxSessions
 * one would run a gateway with.
 */
export const MAX_CACHED_COUNTERS = 100_000;

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
  /** Counters by session as committed (see the header): a transaction that fails leaves them as they were. */
  private readonly counters = new Map<string, Counters>();

  constructor(private readonly db: SqliteDb) {}

  async append(sessionId: string, streamId: string, message: Record<string, unknown>, limits: ReplayLimits): Promise<string> {
    assertLimit("maxEvents", limits.maxEvents);
    assertLimit("maxBytes", limits.maxBytes);
    const json = JSON.stringify(message);
    const bytes = Buffer.byteLength(json);
    return new Promise<string>((resolve, reject) => {
      const append: Append = { sessionId, streamId, json, bytes, limits, resolve, reject };
      if (this.batch) return void this.batch.push(append);
      this.batch = [append];
      this.queueBatch(this.batch); // a closed store rejects it at once
    });
  }

  /**
   * `batch` (filled until its turn's commit runs it) as one write of the turn's transaction (SqliteDb.inTurn): the
   * counters it leaves are the kept ones once it committed, synchronously, before any other statement runs.
   */
  private queueBatch(batch: Append[]): void {
    /** The counters as this batch leaves them (made the committed ones only once it commits). */
    const pending = new Map<string, Counters>();
    this.db.queueInTurn({
      what: "store SSE messages",
      fn: () => {
        if (this.batch === batch) this.batch = undefined; // appends from now on are the next batch's
        return batch.map((a) => this.appendOne(a, pending));
      },
      resolve: (ids) => {
        for (const [sessionId, c] of pending) this.remember(sessionId, c);
        batch.forEach((a, i) => a.resolve((ids as string[])[i]!));
      },
      reject: (err) => {
        if (this.batch === batch) this.batch = undefined;
        // Read from the rows again next time: the failure may be theirs disagreeing with what was kept (another writer).
        for (const a of batch) this.counters.delete(a.sessionId);
        for (const a of batch) a.reject(err);
      },
    });
  }

  /** One message, inside the batch's transaction. */
  private appendOne({ sessionId, streamId, json, bytes, limits }: Append, pending: Map<string, Counters>): string {
    const s = pending.get(sessionId) ?? this.session(sessionId);
    const seq = s.nextSeq;
    this.db.stmt("INSERT INTO replay (session_id, seq, stream_id, bytes, message) VALUES (?, ?, ?, ?, ?)").run(sessionId, seq, streamId, bytes, json);
    let count = s.count + 1;
    let total = s.bytes + bytes;
    // The oldest go while either bound is exceeded; the newest message always stays.
    let lastDropped: number | undefined;
    let ahead = false;
    if (count > limits.maxEvents || total > limits.maxBytes) {
      for (const row of this.db.stmt("SELECT seq, bytes FROM replay WHERE session_id = ? ORDER BY seq").iterate(sessionId) as Iterable<{
        seq: number;
        bytes: number;
      }>) {
        if (!(count > limits.maxEvents || (total > limits.maxBytes && count > 1))) break;
        // The kept counters are ahead of the rows (another writer deleted some): never the message just stored.
        if (row.seq >= seq) {
          ahead = true;
          break;
        }
        lastDropped = row.seq;
        count--;
        total -= row.bytes;
      }
    }
    if (lastDropped !== undefined) this.db.stmt("DELETE FROM replay WHERE session_id = ? AND seq <= ?").run(sessionId, lastDropped);
    pending.set(sessionId, ahead ? this.countRows(sessionId) : { nextSeq: seq + 1, count, bytes: total });
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
      const keptFrom = oldest.seq ?? 1; // no rows: no session (the newest message is always kept)
      const rows = this.db
        .stmt("SELECT seq, message FROM replay WHERE session_id = ? AND stream_id = ? AND seq > ? ORDER BY seq")
        .all(sessionId, streamId, afterSeq) as Array<{ seq: number; message: string }>;
      return { keptFrom, messages: rows.map((r) => ({ eventId: String(r.seq), message: JSON.parse(r.message) as Record<string, unknown> })) };
    });
  }

  async size(sessionId: string): Promise<{ events: number; bytes: number }> {
    return this.db.read("measure SSE replay", () => {
      const s = this.session(sessionId);
      return { events: s.count, bytes: s.bytes };
    });
  }

  async deleteBySession(sessionId: string): Promise<number> {
    this.counters.delete(sessionId); // read from the rows again if it is used again
    this.batch = undefined; // appends from now on are committed after the DELETE, as they were asked (the waiting batch, before it)
    return new Promise<number>((resolve, reject) =>
      this.db.queueInTurn({
        what: "delete a session's SSE replay",
        fn: () => {
          this.counters.delete(sessionId); // a batch of this turn before it may have read them: the rows are gone now
          return this.db.stmt("DELETE FROM replay WHERE session_id = ?").run(sessionId).changes;
        },
        // A batch of this turn that ran before the DELETE left counters for rows no longer there.
        resolve: (n) => {
          this.counters.delete(sessionId);
          resolve(n as number);
        },
        reject: (err) => {
          this.counters.delete(sessionId);
          reject(err);
        },
      }),
    );
  }

  /** A session's counters: kept ones, or read from its rows (none: a session with nothing stored starts at 1). */
  private session(sessionId: string): Counters {
    const kept = this.counters.get(sessionId);
    if (kept) return kept;
    const read = this.countRows(sessionId);
    this.remember(sessionId, read);
    return read;
  }

  /** A session's counters as its rows say (its primary-key range: at most its bound of rows). */
  private countRows(sessionId: string): Counters {
    const row = this.db
      .stmt("SELECT max(seq) AS last, count(*) AS count, coalesce(sum(bytes), 0) AS bytes FROM replay WHERE session_id = ?")
      .get(sessionId) as {
      last: number | null;
      count: number;
      bytes: number;
    };
    return { nextSeq: (row.last ?? 0) + 1, count: row.count, bytes: row.bytes };
  }

  private remember(sessionId: string, c: Counters): void {
    this.counters.delete(sessionId); // re-inserted last: the longest unused goes first
    this.counters.set(sessionId, c);
    if (this.counters.size > MAX_CACHED_COUNTERS) this.counters.delete(this.counters.keys().next().value!);
  }

  private streamAt(sessionId: string, eventId: string): string | undefined {
    if (!REPLAY_EVENT_ID.test(eventId)) return undefined;
    const row = this.db.stmt("SELECT stream_id FROM replay WHERE session_id = ? AND seq = ?").get(sessionId, Number(eventId)) as
      { stream_id: string } | undefined;
    return row?.stream_id;
  }
}
