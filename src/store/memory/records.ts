/**
 * Memory stores for the simple keyed kinds: sessions, pending client requests
 * (indexed by session) and runtime-added servers. Sweeps (listExpired,
 * deleteExpired) walk the map: they run on a timer, not per call.
 */
import type { PendingRequestRecord, PendingRequestStore, ServerRecord, ServerStore, SessionPatch, SessionRecord, SessionStore } from "../contracts.js";
import type { Clock } from "../../clock.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

export class MemorySessionStore implements SessionStore {
  private readonly records = new Map<string, SessionRecord>();

  constructor(
    private readonly guard: MemoryGuard,
    private readonly clock: Clock,
  ) {}

  async get(sessionId: string): Promise<SessionRecord | undefined> {
    this.guard.check();
    const r = this.records.get(sessionId);
    return r && jsonCopy(r);
  }

  async put(record: SessionRecord): Promise<void> {
    this.guard.check();
    this.records.set(record.sessionId, jsonCopy(record));
  }

  async update(sessionId: string, patch: SessionPatch): Promise<SessionRecord | undefined> {
    this.guard.check();
    const r = this.records.get(sessionId);
    if (!r) return undefined;
    const next: SessionRecord = { ...r, ...jsonCopy(patch) };
    this.records.set(sessionId, next);
    return jsonCopy(next);
  }

  async touch(sessionId: string, at: number = this.clock.now()): Promise<boolean> {
    this.guard.check();
    const r = this.records.get(sessionId);
    if (!r) return false;
    r.lastActivityAt = at;
    return true;
  }

  async delete(sessionId: string): Promise<boolean> {
    this.guard.check();
    return this.records.delete(sessionId);
  }

  async listExpired(idleBefore: number, limit?: number): Promise<SessionRecord[]> {
    this.guard.check();
    const out = [...this.records.values()]
      .filter((r) => r.lastActivityAt < idleBefore)
      .sort((a, b) => a.lastActivityAt - b.lastActivityAt || cmp(a.sessionId, b.sessionId));
    return (limit === undefined ? out : out.slice(0, limit)).map(jsonCopy);
  }
}

export class MemoryPendingRequestStore implements PendingRequestStore {
  private readonly records = new Map<string, PendingRequestRecord>();
  private readonly bySession = new Map<string, Set<string>>();

  constructor(private readonly guard: MemoryGuard) {}

  async put(record: PendingRequestRecord): Promise<void> {
    this.guard.check();
    this.remove(record.requestId);
    this.records.set(record.requestId, jsonCopy(record));
    let ids = this.bySession.get(record.sessionId);
    if (!ids) this.bySession.set(record.sessionId, (ids = new Set()));
    ids.add(record.requestId);
  }

  async get(requestId: string): Promise<PendingRequestRecord | undefined> {
    this.guard.check();
    const r = this.records.get(requestId);
    return r && jsonCopy(r);
  }

  async delete(requestId: string): Promise<boolean> {
    this.guard.check();
    return this.remove(requestId) !== undefined;
  }

  async listBySession(sessionId: string, filter: { kind?: PendingRequestRecord["kind"]; server?: string } = {}): Promise<PendingRequestRecord[]> {
    this.guard.check();
    const rows = [...(this.bySession.get(sessionId) ?? [])]
      .map((id) => this.records.get(id)!)
      .filter((r) => (filter.kind === undefined || r.kind === filter.kind) && (filter.server === undefined || r.server === filter.server));
    return sortPending(rows).map(jsonCopy);
  }

  async listAll(): Promise<PendingRequestRecord[]> {
    this.guard.check();
    return sortPending([...this.records.values()]).map(jsonCopy);
  }

  async deleteExpired(now: number): Promise<PendingRequestRecord[]> {
    this.guard.check();
    const gone = sortPending([...this.records.values()].filter((r) => r.expiresAt <= now));
    for (const r of gone) this.remove(r.requestId);
    return gone;
  }

  async deleteBySession(sessionId: string): Promise<number> {
    this.guard.check();
    const ids = [...(this.bySession.get(sessionId) ?? [])];
    for (const id of ids) this.remove(id);
    return ids.length;
  }

  private remove(requestId: string): PendingRequestRecord | undefined {
    const r = this.records.get(requestId);
    if (!r) return undefined;
    this.records.delete(requestId);
    const ids = this.bySession.get(r.sessionId);
    ids?.delete(requestId);
    if (ids?.size === 0) this.bySession.delete(r.sessionId);
    return r;
  }
}

export class MemoryServerStore implements ServerStore {
  private readonly records = new Map<string, ServerRecord>();

  constructor(private readonly guard: MemoryGuard) {}

  async put(record: ServerRecord): Promise<void> {
    this.guard.check();
    this.records.set(record.name, jsonCopy(record));
  }

  async get(name: string): Promise<ServerRecord | undefined> {
    this.guard.check();
    const r = this.records.get(name);
    return r && jsonCopy(r);
  }

  async delete(name: string): Promise<boolean> {
    this.guard.check();
    return this.records.delete(name);
  }

  async list(): Promise<ServerRecord[]> {
    this.guard.check();
    return [...this.records.values()].sort((a, b) => a.addedAt - b.addedAt || cmp(a.name, b.name)).map(jsonCopy);
  }
}

function sortPending(rows: PendingRequestRecord[]): PendingRequestRecord[] {
  return rows.sort((a, b) => a.createdAt - b.createdAt || cmp(a.requestId, b.requestId));
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
