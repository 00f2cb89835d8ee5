/**
 * Memory TaskStore: a Map of records plus the indexes the contract promises
 * (by session, by upstream task, the active set). Every method runs to the end
 * without awaiting, so each compare-and-set is atomic on the event loop.
 */
import type { ProxyTaskStatus, TaskPatch, TaskQuery, TaskRecord, TaskRef, TaskRetention, TaskStore, TaskTransition } from "../contracts.js";
import { applyTaskChange, duplicateTask, isActive, jsonCopy, retentionVictims } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

export class MemoryTaskStore implements TaskStore {
  private readonly records = new Map<string, TaskRecord>();
  private readonly bySession = new Map<string, Set<string>>();
  private readonly byUpstream = new Map<string, string>();
  private readonly active = new Set<string>();

  constructor(private readonly guard: MemoryGuard) {}

  async get(taskId: string): Promise<TaskRecord | undefined> {
    this.guard.check();
    const r = this.records.get(taskId);
    return r && jsonCopy(r);
  }

  async create(record: TaskRecord): Promise<void> {
    this.guard.check();
    if (this.records.has(record.taskId)) throw duplicateTask(record.taskId);
    this.write(undefined, jsonCopy(record));
  }

  async transition(taskId: string, change: TaskTransition): Promise<TaskRecord | undefined> {
    this.guard.check();
    const current = this.records.get(taskId);
    if (!current || !change.from.includes(current.status)) return undefined;
    const next = applyTaskChange(current, change.to, change.patch, change.unset);
    this.write(current, next);
    return jsonCopy(next);
  }

  async patch(
    taskId: string,
    patch: TaskPatch,
    options: { ifStatus?: readonly ProxyTaskStatus[]; unset?: readonly (keyof TaskPatch)[] } = {},
  ): Promise<TaskRecord | undefined> {
    this.guard.check();
    const current = this.records.get(taskId);
    if (!current || (options.ifStatus && !options.ifStatus.includes(current.status))) return undefined;
    const next = applyTaskChange(current, current.status, patch, options.unset);
    this.write(current, next);
    return jsonCopy(next);
  }

  async delete(taskId: string): Promise<boolean> {
    this.guard.check();
    return this.remove(taskId);
  }

  async listBySession(sessionId: string, query: TaskQuery = {}): Promise<TaskRecord[]> {
    this.guard.check();
    const ids = [...(this.bySession.get(sessionId) ?? [])].sort();
    const out: TaskRecord[] = [];
    for (const id of ids) {
      if (query.limit !== undefined && out.length >= query.limit) break;
      const r = this.records.get(id)!;
      if (query.afterTaskId !== undefined && id <= query.afterTaskId) continue;
      if (query.kind !== undefined && (r.kind ?? "tool") !== query.kind) continue;
      if (query.server !== undefined && r.server !== query.server) continue;
      if (query.status !== undefined && !query.status.includes(r.status)) continue;
      out.push(jsonCopy(r));
    }
    return out;
  }

  async findByUpstreamTask(sessionId: string, server: string, upstreamTaskId: string): Promise<TaskRecord | undefined> {
    this.guard.check();
    const id = this.byUpstream.get(upstreamKey(sessionId, server, upstreamTaskId));
    const r = id === undefined ? undefined : this.records.get(id);
    return r && jsonCopy(r);
  }

  async listWorking(): Promise<TaskRecord[]> {
    this.guard.check();
    return [...this.active].sort().map((id) => jsonCopy(this.records.get(id)!));
  }

  async deleteExpired(now: number): Promise<TaskRef[]> {
    this.guard.check();
    const gone: TaskRef[] = [];
    for (const r of [...this.records.values()]) {
      if (r.retainUntil !== undefined && r.retainUntil <= now) {
        this.remove(r.taskId);
        gone.push({ taskId: r.taskId, sessionId: r.sessionId });
      }
    }
    return gone.sort((a, b) => cmp(a.taskId, b.taskId));
  }

  async enforceRetention(sessionId: string, retention: TaskRetention): Promise<string[]> {
    this.guard.check();
    const kind = retention.kind ?? "tool";
    const ended = [...(this.bySession.get(sessionId) ?? [])]
      .map((id) => this.records.get(id)!)
      .filter((r) => (r.kind ?? "tool") === kind && !isActive(r.status))
      .sort((a, b) => a.lastUpdatedAt - b.lastUpdatedAt || cmp(a.taskId, b.taskId))
      .map((r) => ({ taskId: r.taskId, bytes: r.resultBytes ?? 0 }));
    const victims = retentionVictims(ended, retention.maxCount, retention.maxBytes, retention.keep);
    for (const id of victims) this.remove(id);
    return victims;
  }

  async deleteBySession(sessionId: string): Promise<number> {
    this.guard.check();
    const ids = [...(this.bySession.get(sessionId) ?? [])];
    for (const id of ids) this.remove(id);
    return ids.length;
  }

  private write(previous: TaskRecord | undefined, next: TaskRecord): void {
    if (previous?.upstreamTaskId !== undefined) this.byUpstream.delete(upstreamKey(previous.sessionId, previous.server, previous.upstreamTaskId));
    this.records.set(next.taskId, next);
    let ids = this.bySession.get(next.sessionId);
    if (!ids) this.bySession.set(next.sessionId, (ids = new Set()));
    ids.add(next.taskId);
    if (next.upstreamTaskId !== undefined) this.byUpstream.set(upstreamKey(next.sessionId, next.server, next.upstreamTaskId), next.taskId);
    if (isActive(next.status)) this.active.add(next.taskId);
    else this.active.delete(next.taskId);
  }

  private remove(taskId: string): boolean {
    const r = this.records.get(taskId);
    if (!r) return false;
    this.records.delete(taskId);
    const ids = this.bySession.get(r.sessionId);
    ids?.delete(taskId);
    if (ids?.size === 0) this.bySession.delete(r.sessionId);
    if (r.upstreamTaskId !== undefined) this.byUpstream.delete(upstreamKey(r.sessionId, r.server, r.upstreamTaskId));
    this.active.delete(taskId);
    return true;
  }
}

function upstreamKey(sessionId: string, server: string, upstreamTaskId: string): string {
  return JSON.stringify([sessionId, server, upstreamTaskId]);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
