/** Activity records in an array, oldest first (see ActivityStore). */
import { activityMatches, compareActivity } from "../activity-query.js";
import type { ActivityQuery, ActivityRecord, ActivityStore } from "../contracts.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

export class MemoryActivityStore implements ActivityStore {
  private records: ActivityRecord[] = [];

  constructor(private readonly guard: MemoryGuard) {}

  async append(records: readonly ActivityRecord[], retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<void> {
    this.guard.check();
    const before = this.records.length;
    this.records.push(...records.map(jsonCopy));
    // Records mostly arrive in order: sort only when this batch is not already at the end in order.
    if (!this.records.slice(Math.max(0, before - 1)).every((r, i, all) => i === 0 || compareActivity(all[i - 1]!, r) <= 0)) this.records.sort(compareActivity);
    const cutoff = retention.now - retention.maxAgeMs;
    const firstKept = this.records.findIndex((r) => r.at > cutoff);
    this.records = (firstKept < 0 ? [] : this.records.slice(firstKept)).slice(-retention.maxRecords);
  }

  async list(query: ActivityQuery): Promise<ActivityRecord[]> {
    this.guard.check();
    const out: ActivityRecord[] = [];
    for (let i = this.records.length - 1; i >= 0 && out.length < query.limit; i--) {
      const r = this.records[i]!;
      if (activityMatches(r, query)) out.push(jsonCopy(r));
    }
    return out;
  }

  async count(): Promise<number> {
    this.guard.check();
    return this.records.length;
  }
}
