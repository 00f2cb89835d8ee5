/**
 * SQLite stores for the simple keyed kinds: sessions (indexed by last
 * activity for the idle sweep), pending client requests (by session, by
 * expiry) and runtime-added servers. Records are the JSON column; the other
 * columns are indexed copies.
 */
import type { Clock } from "../../clock.js";
import type { PendingRequestRecord, PendingRequestStore, ServerRecord, ServerStore, SessionPatch, SessionRecord, SessionStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

function parse<T>(row: unknown): T | undefined {
  return row === undefined ? undefined : (JSON.parse((row as { record: string }).record) as T);
}

function parseAll<T>(rows: unknown[]): T[] {
  return (rows as Array<{ record: string }>).map((r) => JSON.parse(r.record) as T);
}

export class SqliteSessionStore implements SessionStore {
  constructor(
    private readonly db: SqliteDb,
    private readonly clock: Clock,
  ) {}

  async get(sessionId: string): Promise<SessionRecord | undefined> {
    return this.db.read("read a session", () => parse<SessionRecord>(this.db.stmt("SELECT record FROM sessions WHERE session_id = ?").get(sessionId)));
  }

  async put(record: SessionRecord): Promise<void> {
    // With this turn's other writes (a burst of sessions opened: one commit, issue 27).
    await this.db.inTurn("store a session", () => {
      this.insert(record);
    });
  }

  async update(sessionId: string, patch: SessionPatch): Promise<SessionRecord | undefined> {
    return this.db.write("update a session", () => {
      const current = parse<SessionRecord>(this.db.stmt("SELECT record FROM sessions WHERE session_id = ?").get(sessionId));
      if (!current) return undefined;
      return this.save({ ...current, ...patch });
    });
  }

  async touch(sessionId: string, at: number = this.clock.now()): Promise<boolean> {
    return this.db.inTurn(
      "touch a session",
      () =>
        this.db.stmt("UPDATE sessions SET last_activity_at = ?, record = json_set(record, '$.lastActivityAt', ?) WHERE session_id = ?").run(at, at, sessionId)
          .changes > 0,
    );
  }

  async delete(sessionId: string): Promise<boolean> {
    return this.db.inTurn("delete a session", () => this.db.stmt("DELETE FROM sessions WHERE session_id = ?").run(sessionId).changes > 0);
  }

  async listExpired(idleBefore: number, limit = -1): Promise<SessionRecord[]> {
    return this.db.read("list idle sessions", () =>
      parseAll<SessionRecord>(
        this.db.stmt("SELECT record FROM sessions WHERE last_activity_at < ? ORDER BY last_activity_at, session_id LIMIT ?").all(idleBefore, limit),
      ),
    );
  }

  private save(record: SessionRecord): SessionRecord {
    return JSON.parse(this.insert(record)) as SessionRecord;
  }

  /** Writes the record; its JSON. */
  private insert(record: SessionRecord): string {
    const json = JSON.stringify(record);
    this.db.stmt("INSERT OR REPLACE INTO sessions (session_id, last_activity_at, record) VALUES (?, ?, ?)").run(record.sessionId, record.lastActivityAt, json);
    return json;
  }
}

export class SqlitePendingRequestStore implements PendingRequestStore {
  constructor(private readonly db: SqliteDb) {}

  async put(r: PendingRequestRecord): Promise<void> {
    this.db.read("store a pending request", () =>
      this.db
        .stmt("INSERT OR REPLACE INTO pending (request_id, session_id, kind, server, created_at, expires_at, record) VALUES (?, ?, ?, ?, ?, ?, ?)")
        .run(r.requestId, r.sessionId, r.kind, r.server, r.createdAt, r.expiresAt, JSON.stringify(r)),
    );
  }

  async get(requestId: string): Promise<PendingRequestRecord | undefined> {
    return this.db.read("read a pending request", () =>
      parse<PendingRequestRecord>(this.db.stmt("SELECT record FROM pending WHERE request_id = ?").get(requestId)),
    );
  }

  async delete(requestId: string): Promise<boolean> {
    return this.db.read("delete a pending request", () => this.db.stmt("DELETE FROM pending WHERE request_id = ?").run(requestId).changes > 0);
  }

  async listBySession(sessionId: string, filter: { kind?: PendingRequestRecord["kind"]; server?: string } = {}): Promise<PendingRequestRecord[]> {
    const where = ["session_id = ?"];
    const params: unknown[] = [sessionId];
    if (filter.kind !== undefined) {
      where.push("kind = ?");
      params.push(filter.kind);
    }
    if (filter.server !== undefined) {
      where.push("server = ?");
      params.push(filter.server);
    }
    const sql = `SELECT record FROM pending WHERE ${where.join(" AND ")} ORDER BY created_at, request_id`;
    return this.db.read("list pending requests", () => parseAll<PendingRequestRecord>(this.db.stmt(sql).all(...params)));
  }

  async listAll(): Promise<PendingRequestRecord[]> {
    return this.db.read("list pending requests", () =>
      parseAll<PendingRequestRecord>(this.db.stmt("SELECT record FROM pending ORDER BY created_at, request_id").all()),
    );
  }

  async deleteExpired(now: number): Promise<PendingRequestRecord[]> {
    return this.db.write("delete expired pending requests", () => {
      const gone = parseAll<PendingRequestRecord>(this.db.stmt("SELECT record FROM pending WHERE expires_at <= ? ORDER BY created_at, request_id").all(now));
      this.db.stmt("DELETE FROM pending WHERE expires_at <= ?").run(now);
      return gone;
    });
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return this.db.inTurn("delete a session's pending requests", () => this.db.stmt("DELETE FROM pending WHERE session_id = ?").run(sessionId).changes);
  }
}

export class SqliteServerStore implements ServerStore {
  constructor(private readonly db: SqliteDb) {}

  async put(record: ServerRecord): Promise<void> {
    this.db.read("store a server", () =>
      this.db.stmt("INSERT OR REPLACE INTO servers (name, added_at, record) VALUES (?, ?, ?)").run(record.name, record.addedAt, JSON.stringify(record)),
    );
  }

  async get(name: string): Promise<ServerRecord | undefined> {
    return this.db.read("read a server", () => parse<ServerRecord>(this.db.stmt("SELECT record FROM servers WHERE name = ?").get(name)));
  }

  async delete(name: string): Promise<boolean> {
    return this.db.read("delete a server", () => this.db.stmt("DELETE FROM servers WHERE name = ?").run(name).changes > 0);
  }

  async list(): Promise<ServerRecord[]> {
    return this.db.read("list servers", () => parseAll<ServerRecord>(this.db.stmt("SELECT record FROM servers ORDER BY added_at, name").all()));
  }
}
