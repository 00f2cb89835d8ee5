/** Promise helpers for unit tests driven by a ManualClock (no sleeping, never hangs). */
import assert from "node:assert/strict";

/** Lets queued microtasks run. */
export async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** Awaits a promise that must already be settled (or settle within a few microtasks): never hangs. */
export async function settle<T>(p: Promise<T>): Promise<T> {
  const pending = Symbol("pending");
  const r = await Promise.race([p, flush().then(() => pending)]);
  if (r === pending) assert.fail("the promise did not settle");
  return r as T;
}

/** Records how a promise settles, for synchronous assertions later. */
export function track<T>(p: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  p.then(
    (v) => {
      state.settled = true;
      state.value = v;
    },
    (e: unknown) => {
      state.settled = true;
      state.error = e;
    },
  );
  return state;
}
