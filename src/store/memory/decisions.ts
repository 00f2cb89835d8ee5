/** Governance decision records in an array, oldest first (see DecisionStore). */
import type { DecisionRecord, DecisionStore } from "../contracts.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

export class MemoryDecisionStore implements DecisionStore {
  private records: DecisionRecord[] = [];

  constructor(private readonly guard: MemoryGuard) {}

  async append(record: DecisionRecord, retention: { maxAgeMs: number; maxRecords: number }): Promise<void> {
    this.guard.check();
    this.records.push(jsonCopy(record));
    this.records.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const cutoff = record.at - retention.maxAgeMs;
    this.records = this.records.filter((r) => r.at > cutoff).slice(-retention.maxRecords);
  }

  async list(query: { since?: number; limit?: number } = {}): Promise<DecisionRecord[]> {
    this.guard.check();
    const since = query.since ?? -Infinity;
    return this.records
      .filter((r) => r.at >= since)
      .slice(0, query.limit ?? Infinity)
      .map(jsonCopy);
  }

  async count(): Promise<number> {
    this.guard.check();
    return this.records.length;
  }
}
