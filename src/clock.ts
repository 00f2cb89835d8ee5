/**
 * Time and ids are injected so that state machines can be tested with a
 * manual clock and without sleeping (see test/fixtures/manual-clock.ts).
 */
import { randomFillSync } from "node:crypto";
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
  const next = monotonicFactory(pooledRandom());
  return () => next(clock.now());
}

/**
 * A uniform [0, 1) draw from a pool of CSPRNG bytes refilled 4 KiB at a time:
 * ulid's own default makes a `crypto.getRandomValues` call (and a typed
 * array) per character, 16 per new millisecond (issue 27: ≈ 3 % of a
 * forwarded call's CPU).
 */
export function pooledRandom(poolBytes = 4096): () => number {
  const pool = Buffer.alloc(poolBytes);
  let at = poolBytes;
  return () => {
    if (at >= poolBytes) {
      randomFillSync(pool);
      at = 0;
    }
    return pool[at++]! / 256;
  };
}

/**
 * Waits for `until` at most `timeoutMs` of `clock`'s time: true once it resolves, false when the time runs out
 * first (a rejection of `until` counts as never resolving); rejects with the signal's reason when `signal` aborts
 * first. Leaves no timer or listener behind, and a wait that ended holds nothing of its own through `until`.
 */
export function within(until: Promise<unknown>, signal: AbortSignal, timeoutMs: number, clock: Clock): Promise<boolean> {
  return new Promise((resolve, reject) => {
    // The reaction on `until` outlives a timeout or an abort when `until` never settles: it holds only this box,
    // which the end of the wait empties (the closures here share one context, which a reaction would keep whole).
    const box: SettleBox = {};
    const done = (settle: () => void) => {
      box.settle = undefined;
      clock.clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      settle();
    };
    const onAbort = () => done(() => reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? "cancelled"))));
    const timer = clock.setTimeout(() => done(() => resolve(false)), timeoutMs);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    box.settle = () => done(() => resolve(true));
    onResolved(until, box);
  });
}

interface SettleBox {
  settle?: (() => void) | undefined;
}

/** within()'s reaction, made apart from its closures so that it holds the box alone. */
function onResolved(until: Promise<unknown>, box: SettleBox): void {
  void until.then(
    () => box.settle?.(),
    () => undefined,
  );
}
