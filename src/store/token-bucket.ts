/**
 * Token-bucket arithmetic shared by the rate-limit store backends (the Redis
 * Lua script `rateTake` repeats it): a bucket holds up to `capacity` tokens,
 * gains `refillPerSecond` a second, and a call takes one. A missing bucket is
 * full, so a bucket may be forgotten once it would have refilled (`idleUntil`).
 */
import type { RateBucketSpec, RateTakeResult } from "./contracts.js";

/** A bucket as stored: tokens left at time `at` (epoch ms). */
export interface BucketState {
  tokens: number;
  at: number;
}

/** The bucket's tokens at `now` (a clock behind `at`, another replica's, refills nothing). */
export function refilled(state: BucketState | undefined, spec: RateBucketSpec, now: number): number {
  if (!state) return spec.capacity;
  const elapsed = Math.max(0, now - state.at);
  return Math.min(spec.capacity, state.tokens + (elapsed * spec.refillPerSecond) / 1000);
}

/** When a bucket holding `tokens` at `now` is full again: after that it may be deleted. */
export function idleUntil(tokens: number, spec: RateBucketSpec, now: number): number {
  return now + Math.ceil(((spec.capacity - tokens) * 1000) / spec.refillPerSecond);
}

/** Milliseconds until a bucket holding `tokens` has one whole token. */
export function msUntilToken(tokens: number, spec: RateBucketSpec): number {
  return Math.max(1, Math.ceil(((1 - tokens) * 1000) / spec.refillPerSecond));
}

/**
 * One all-or-nothing take over several buckets: each must hold a token; when
 * one does not, nothing is taken and the answer names the first bucket that
 * refused with the longest wait of those that did. `next` is the state to
 * write back (only when `ok`).
 */
export function takeAll(states: readonly (BucketState | undefined)[], specs: readonly RateBucketSpec[], now: number): RateTakeResult & { next: BucketState[] } {
  const tokens = specs.map((spec, i) => refilled(states[i], spec, now));
  let refused: number | undefined;
  let retryAfterMs = 0;
  tokens.forEach((t, i) => {
    if (t >= 1) return;
    refused ??= i;
    retryAfterMs = Math.max(retryAfterMs, msUntilToken(t, specs[i]!));
  });
  if (refused !== undefined) return { ok: false, refused, retryAfterMs, next: [] };
  return { ok: true, retryAfterMs: 0, next: tokens.map((t) => ({ tokens: t - 1, at: now })) };
}
