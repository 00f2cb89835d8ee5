/** Token buckets in the `rate_buckets` table (schema version 5): one IMMEDIATE transaction per take, so replicas on one file share them. */
import type { RateBucketSpec, RateLimitStore, RateTakeResult } from "../contracts.js";
import { idleUntil, takeAll, type BucketState } from "../token-bucket.js";
import type { SqliteDb } from "./db.js";

/** Forgotten (full-again) buckets deleted per take, so a take stays cheap. */
const SWEEP_LIMIT = 100;

export class SqliteRateLimitStore implements RateLimitStore {
  constructor(private readonly db: SqliteDb) {}

  async take(specs: readonly RateBucketSpec[], now: number): Promise<RateTakeResult> {
    return this.db.write("take rate-limit tokens", () => {
      this.db.stmt("DELETE FROM rate_buckets WHERE key IN (SELECT key FROM rate_buckets WHERE idle_until <= ? LIMIT ?)").run(now, SWEEP_LIMIT);
      const get = this.db.stmt("SELECT tokens, at FROM rate_buckets WHERE key = ?");
      const states = specs.map((s) => get.get(s.key) as BucketState | undefined);
      const { next, ...result } = takeAll(states, specs, now);
      const put = this.db.stmt("INSERT OR REPLACE INTO rate_buckets (key, tokens, at, idle_until) VALUES (?, ?, ?, ?)");
      next.forEach((state, i) => put.run(specs[i]!.key, state.tokens, state.at, idleUntil(state.tokens, specs[i]!, now)));
      return result;
    });
  }
}
