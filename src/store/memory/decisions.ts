/** Governance decision records in an array, oldest first (see DecisionStore). */
import type { DecisionQuery, DecisionRecord, DecisionStore } from "../contracts.js";
import { compareDecisions, decisionMatches } from "../decision-query.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

export class MemoryDecisionStore implements DecisionStore {
  private records: DecisionRecord[] = [];

  constructor(private readonly guard: MemoryGuard) {}

  async append(record: DecisionRecord, retention: { maxAgeMs: number; maxRecords: number }): Promise<void> {
    this.guard.check();
    this.records.push(jsonCopy(record));
    this.records.sort(compareDecisions);
    this.retain({ now: record.at, ...retention });
  }

  async list(query: { since?: number; limit?: number } = {}): Promise<DecisionRecord[]> {
    this.guard.check();
    const since = query.since ?? -Infinity;
    return this.records
      .filter((r) => r.at >= since)
      .slice(0, query.limit ?? Infinity)
      .map(jsonCopy);
  }

  async query(q: DecisionQuery): Promise<DecisionRecord[]> {
    this.guard.check();
    const out: DecisionRecord[] = [];
    for (let i = this.records.length - 1; i >= 0 && out.length < q.limit; i--) {
      const r = this.records[i]!;
      if (decisionMatches(r, q)) out.push(jsonCopy(r));
    }
    return out;
  }

  async prune(retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<number> {
    this.guard.check();
    return this.retain(retention);
  }

  async count(): Promise<number> {
    this.guard.check();
    return this.records.length;
  }

  private retain(retention: { now: number; maxAgeMs: number; maxRecords: number }): number {
    const before = this.records.length;
    const cutoff = retention.now - retention.maxAgeMs;
    this.records = this.records.filter((r) => r.at > cutoff).slice(-retention.maxRecords);
    return before - this.records.length;
  }
}
