/**
 * Capped exponential backoff with jitter for upstream reconnection (design UP-6):
 * attempt n waits initialDelayMs·2^(n-1), capped at maxDelayMs, spread by
 * ±jitter so that many sessions reconnecting to one restarted upstream do not
 * arrive together.
 */
export interface BackoffPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
  /** 0..1: the fraction of the delay drawn at random either side. */
  jitter: number;
}

export function backoffDelay(policy: BackoffPolicy, attempt: number, random: () => number = Math.random): number {
  const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, attempt - 1));
  const spread = base * policy.jitter;
  return Math.max(0, Math.round(base - spread + random() * 2 * spread));
}
