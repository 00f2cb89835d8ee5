/**
 * Activity records in Redis: one sorted set scored by time, the record JSON
 * as member (its id keeps members unique). Append and retention run in one
 * MULTI; a filtered list reads newest first in chunks until it has `limit`
 * matches (bounded by the set's size, itself bounded by maxRecords).
 */
import { activityMatches, compareActivity } from "../activity-query.js";
import type { ActivityQuery, ActivityRecord, ActivityStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

const CHUNK = 500;

export class RedisActivityStore implements ActivityStore {
  constructor(private readonly conn: RedisConn) {}

  private get key(): string {
    return this.conn.key("activity");
  }

  async append(records: readonly ActivityRecord[], retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<void> {
    await this.conn.run("record activity", async (r) => {
      const multi = r.multi();
      for (const record of records) multi.zadd(this.key, record.at, JSON.stringify(record));
      await multi
        .zremrangebyscore(this.key, "-inf", retention.now - retention.maxAgeMs)
        .zremrangebyrank(this.key, 0, -(retention.maxRecords + 1))
        .exec();
    });
  }

  async list(q: ActivityQuery): Promise<ActivityRecord[]> {
    const out: ActivityRecord[] = [];
    const max = q.before === undefined ? "+inf" : q.before.at;
    const min = q.since === undefined ? "-inf" : q.since;
    for (let offset = 0; out.length < q.limit; offset += CHUNK) {
      const rows = await this.conn.run("list activity", (r) => r.zrevrangebyscore(this.key, max, min, "LIMIT", offset, CHUNK));
      // Within one millisecond members sort by their JSON, not their id: order each chunk by (at, id) (a tie across chunks is rare and only reorders within that millisecond).
      const records = rows.map((json) => JSON.parse(json) as ActivityRecord).sort((a, b) => compareActivity(b, a));
      for (const r of records) if (out.length < q.limit && activityMatches(r, q)) out.push(r);
      if (rows.length < CHUNK) break;
    }
    return out;
  }

  async count(): Promise<number> {
    return this.conn.run("count activity", (r) => r.zcard(this.key));
  }
}
