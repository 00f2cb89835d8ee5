/** Token buckets in Redis (scripts.ts: rateTake): one script per take, so every replica on the server shares them; an idle bucket expires (PEXPIRE) once full again. */
import type { RateBucketSpec, RateLimitStore, RateTakeResult } from "../contracts.js";
import type { RedisConn } from "./conn.js";

export class RedisRateLimitStore implements RateLimitStore {
  constructor(private readonly conn: RedisConn) {}

  async take(specs: readonly RateBucketSpec[], now: number): Promise<RateTakeResult> {
    const buckets = JSON.stringify(specs.map((s) => [s.key, s.capacity, s.refillPerSecond]));
    const [ok, refused, retryAfterMs] = (await this.conn.script("take rate-limit tokens", "rateTake", now, buckets)) as [number, number, number];
    return ok === 1 ? { ok: true, retryAfterMs: 0 } : { ok: false, refused, retryAfterMs };
  }
}
