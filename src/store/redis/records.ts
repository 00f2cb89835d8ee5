/**
 * Redis stores for the simple keyed kinds: sessions (a hash with a version,
 * indexed by last activity), pending client requests (indexed by session,
 * creation and expiry; delete is one script, so exactly one caller wins) and
 * runtime-added servers (one hash). Session update/touch are optimistic
 * compare-and-set on the version, as tasks are.
 */
import type { Clock } from "../../clock.js";
import type { PendingRequestRecord, PendingRequestStore, ServerRecord, ServerStore, SessionPatch, SessionRecord, SessionStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

function parseAll<T>(rows: unknown): T[] {
  return (rows as string[]).map((r) => JSON.parse(r) as T);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export class RedisSessionStore implements SessionStore {
  constructor(
    private readonly conn: RedisConn,
    private readonly clock: Clock,
  ) {}

  async get(sessionId: string): Promise<SessionRecord | undefined> {
    const json = await this.conn.run("read a session", (r) => r.hget(this.conn.key("s", sessionId), "r"));
    return json === null ? undefined : (JSON.parse(json) as SessionRecord);
  }

  async put(record: SessionRecord): Promise<void> {
    await this.conn.script("store a session", "sessionWrite", record.sessionId, "", JSON.stringify(record), record.lastActivityAt);
  }

  async update(sessionId: string, patch: SessionPatch): Promise<SessionRecord | undefined> {
    return this.change("update a session", sessionId, (current) => ({ ...current, ...patch }));
  }

  async touch(sessionId: string, at: number = this.clock.now()): Promise<boolean> {
    return (await this.change("touch a session", sessionId, (current) => ({ ...current, lastActivityAt: at }))) !== undefined;
  }

  async delete(sessionId: string): Promise<boolean> {
    return (await this.conn.script("delete a session", "sessionDelete", sessionId)) === 1;
  }

  async listExpired(idleBefore: number, limit?: number): Promise<SessionRecord[]> {
    return parseAll<SessionRecord>(await this.conn.script("list idle sessions", "sessionExpired", idleBefore, limit ?? -1));
  }

  private async change(what: string, sessionId: string, next: (current: SessionRecord) => SessionRecord): Promise<SessionRecord | undefined> {
    for (;;) {
      const [json, version] = await this.conn.run(what, (r) => r.hmget(this.conn.key("s", sessionId), "r", "n"));
      if (json === null || json === undefined || version === null || version === undefined) return undefined;
      const nextJson = JSON.stringify(next(JSON.parse(json) as SessionRecord));
      const record = JSON.parse(nextJson) as SessionRecord;
      if ((await this.conn.script(what, "sessionWrite", sessionId, version, nextJson, record.lastActivityAt)) === 1) return record;
    }
  }
}

export class RedisPendingRequestStore implements PendingRequestStore {
  constructor(private readonly conn: RedisConn) {}

  async put(r: PendingRequestRecord): Promise<void> {
    await this.conn.script("store a pending request", "pendingPut", r.requestId, r.sessionId, r.createdAt, r.expiresAt, JSON.stringify(r));
  }

  async get(requestId: string): Promise<PendingRequestRecord | undefined> {
    const json = await this.conn.run("read a pending request", (r) => r.hget(this.conn.key("p", requestId), "r"));
    return json === null ? undefined : (JSON.parse(json) as PendingRequestRecord);
  }

  async delete(requestId: string): Promise<boolean> {
    return (await this.conn.script("delete a pending request", "pendingDelete", requestId)) === 1;
  }

  async listBySession(sessionId: string, filter: { kind?: PendingRequestRecord["kind"]; server?: string } = {}): Promise<PendingRequestRecord[]> {
    const rows = parseAll<PendingRequestRecord>(await this.conn.script("list pending requests", "pendingList", `ps:${sessionId}`));
    return rows.filter((r) => (filter.kind === undefined || r.kind === filter.kind) && (filter.server === undefined || r.server === filter.server));
  }

  async listAll(): Promise<PendingRequestRecord[]> {
    return parseAll<PendingRequestRecord>(await this.conn.script("list pending requests", "pendingList", "pall"));
  }

  async deleteExpired(now: number): Promise<PendingRequestRecord[]> {
    const gone = parseAll<PendingRequestRecord>(await this.conn.script("delete expired pending requests", "pendingDeleteExpired", now));
    return gone.sort((a, b) => a.createdAt - b.createdAt || cmp(a.requestId, b.requestId));
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return (await this.conn.script("delete a session's pending requests", "pendingDeleteSession", sessionId)) as number;
  }
}

export class RedisServerStore implements ServerStore {
  constructor(private readonly conn: RedisConn) {}

  async put(record: ServerRecord): Promise<void> {
    await this.conn.run("store a server", (r) => r.hset(this.conn.key("srv"), record.name, JSON.stringify(record)));
  }

  async get(name: string): Promise<ServerRecord | undefined> {
    const json = await this.conn.run("read a server", (r) => r.hget(this.conn.key("srv"), name));
    return json === null ? undefined : (JSON.parse(json) as ServerRecord);
  }

  async delete(name: string): Promise<boolean> {
    return (await this.conn.run("delete a server", (r) => r.hdel(this.conn.key("srv"), name))) > 0;
  }

  async list(): Promise<ServerRecord[]> {
    const all = await this.conn.run("list servers", (r) => r.hvals(this.conn.key("srv")));
    return parseAll<ServerRecord>(all).sort((a, b) => a.addedAt - b.addedAt || cmp(a.name, b.name));
  }
}
