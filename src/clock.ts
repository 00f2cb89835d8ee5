/**
 * Time and ids are injected so that state machines can be tested with a
 * manual clock and without sleeping (see test/fixtures/manual-clock.ts).
 */
import { monotonicFactory } from "ulid";

export type TimerHandle = { readonly __timer: true } | object;

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
}

/** Real time. Timers are unref'd: they never keep the process alive on their own. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const t = setTimeout(fn, Math.max(0, Math.min(ms, 2_147_483_647)));
    t.unref();
    return t;
  },
  clearTimeout(handle) {
    if (handle !== undefined) clearTimeout(handle as NodeJS.Timeout);
  },
};

export type IdGenerator = () => string;

/** ULIDs: time-sortable, URL-safe, monotonic within a millisecond. */
export function ulidGenerator(clock: Clock = systemClock): IdGenerator {
  const next = monotonicFactory();
  return () => next(clock.now());
}
