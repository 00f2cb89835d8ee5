/** Token buckets in a Map (src/store/token-bucket.ts); a bucket full again is forgotten at the next sweep. */
import type { RateBucketSpec, RateLimitStore, RateTakeResult } from "../contracts.js";
import { idleUntil, takeAll, type BucketState } from "../token-bucket.js";
import type { MemoryGuard } from "./guard.js";

/** Sweeps of forgotten buckets run at most this often (store time). */
const SWEEP_EVERY_MS = 60_000;

export class MemoryRateLimitStore implements RateLimitStore {
  private readonly buckets = new Map<string, BucketState & { idleUntil: number }>();
  private nextSweep = 0;

  constructor(private readonly guard: MemoryGuard) {}

  async take(specs: readonly RateBucketSpec[], now: number): Promise<RateTakeResult> {
    this.guard.check();
    this.sweep(now);
    const { next, ...result } = takeAll(
      specs.map((s) => this.buckets.get(s.key)),
      specs,
      now,
    );
    next.forEach((state, i) => this.buckets.set(specs[i]!.key, { ...state, idleUntil: idleUntil(state.tokens, specs[i]!, now) }));
    return result;
  }

  private sweep(now: number): void {
    if (now < this.nextSweep) return;
    this.nextSweep = now + SWEEP_EVERY_MS;
    for (const [key, b] of this.buckets) if (b.idleUntil <= now) this.buckets.delete(key);
  }
}
