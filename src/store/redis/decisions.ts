/**
 * Governance decision records in Redis: one sorted set scored by time, the
 * record JSON as member (its id keeps members unique). Append and retention
 * run in one MULTI; an audit query reads the score range newest first in
 * chunks until it has `limit` matches (bounded by the set's size, itself
 * bounded by maxRecords), as the activity store does.
 */
import type { DecisionQuery, DecisionRecord, DecisionStore } from "../contracts.js";
import { compareDecisions, decisionMatches } from "../decision-query.js";
import type { RedisConn } from "./conn.js";

const CHUNK = 500;

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
    return rows.map((json) => JSON.parse(json) as DecisionRecord).sort(compareDecisions);
  }

  async query(q: DecisionQuery): Promise<DecisionRecord[]> {
    const out: DecisionRecord[] = [];
    // The score range: up to the cursor's millisecond (inclusive: ids break the tie) or `until` (exclusive), from `since`.
    const max =
      q.until !== undefined && (q.before === undefined || q.until <= q.before.at) ? `(${q.until}` : q.before === undefined ? "+inf" : String(q.before.at);
    const min = q.since === undefined ? "-inf" : String(q.since);
    for (let offset = 0; out.length < q.limit; offset += CHUNK) {
      const rows = await this.conn.run("query governance decisions", (r) => r.zrevrangebyscore(this.key, max, min, "LIMIT", offset, CHUNK));
      // Within one millisecond members sort by their JSON, not their id: order each chunk by (at, id).
      const records = rows.map((json) => JSON.parse(json) as DecisionRecord).sort((a, b) => compareDecisions(b, a));
      for (const r of records) if (out.length < q.limit && decisionMatches(r, q)) out.push(r);
      if (rows.length < CHUNK) break;
    }
    return out;
  }

  async prune(retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<number> {
    const replies = await this.conn.run("delete old governance decisions", (r) =>
      r
        .multi()
        .zremrangebyscore(this.key, "-inf", retention.now - retention.maxAgeMs)
        .zremrangebyrank(this.key, 0, -(retention.maxRecords + 1))
        .exec(),
    );
    return (replies ?? []).reduce((n, [err, value]) => (err ? n : n + Number(value)), 0);
  }

  async count(): Promise<number> {
    return this.conn.run("count governance decisions", (r) => r.zcard(this.key));
  }
}
