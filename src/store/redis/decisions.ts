/**
 * Governance decision records in Redis: one sorted set scored by time, the
 * record JSON as member (its id keeps members unique and, within one
 * millisecond, ordered). Append and retention run in one MULTI.
 */
import type { DecisionRecord, DecisionStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

export class RedisDecisionStore implements DecisionStore {
  constructor(private readonly conn: RedisConn) {}

  private get key(): string {
    return this.conn.key("decisions");
  }

  async append(record: DecisionRecord, retention: { maxAgeMs: number; maxRecords: number }): Promise<void> {
    await this.conn.run("record a governance decision", async (r) => {
      await r
        .multi()
        .zadd(this.key, record.at, JSON.stringify(record))
        .zremrangebyscore(this.key, "-inf", record.at - retention.maxAgeMs)
        .zremrangebyrank(this.key, 0, -(retention.maxRecords + 1))
        .exec();
    });
  }

  async list(query: { since?: number; limit?: number } = {}): Promise<DecisionRecord[]> {
    const since = query.since === undefined ? "-inf" : query.since;
    const rows = await this.conn.run("list governance decisions", (r) =>
      query.limit === undefined ? r.zrangebyscore(this.key, since, "+inf") : r.zrangebyscore(this.key, since, "+inf", "LIMIT", 0, query.limit),
    );
    return rows.map((json) => JSON.parse(json) as DecisionRecord).sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async count(): Promise<number> {
    return this.conn.run("count governance decisions", (r) => r.zcard(this.key));
  }
}
