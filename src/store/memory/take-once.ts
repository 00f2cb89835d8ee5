/** A Map of take-once records keyed by `state`, expiring and bounded: started console logins and upstream OAuth flows. */
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

/** What a take-once record needs: its key, when it was made and when it expires. */
export interface TakeOnceRecord {
  state: string;
  createdAt: number;
  expiresAt: number;
}

export class MemoryTakeOnceStore<T extends TakeOnceRecord> {
  private readonly records = new Map<string, T>();

  constructor(private readonly guard: MemoryGuard) {}

  /** Stores a record (replacing one with its state); with `max` kept, the ones that expire first make room. */
  async put(record: T, max: number): Promise<void> {
    this.guard.check();
    this.records.delete(record.state);
    this.sweep(record.createdAt);
    while (this.records.size >= max) {
      let first: T | undefined;
      for (const r of this.records.values()) if (!first || before(r, first)) first = r;
      this.records.delete(first!.state);
    }
    this.records.set(record.state, jsonCopy(record));
  }

  /** Returns and deletes it in one step; undefined when unknown, taken, or expired at `now`. */
  async take(state: string, now: number): Promise<T | undefined> {
    this.guard.check();
    const r = this.records.get(state);
    if (!r) return undefined;
    this.records.delete(state);
    return r.expiresAt <= now ? undefined : r;
  }

  /** Reads it without taking it; undefined when unknown, taken, or expired at `now`. */
  async peek(state: string, now: number): Promise<T | undefined> {
    this.guard.check();
    const r = this.records.get(state);
    return r && r.expiresAt > now ? jsonCopy(r) : undefined;
  }

  async deleteExpired(now: number): Promise<number> {
    this.guard.check();
    return this.sweep(now);
  }

  async count(): Promise<number> {
    this.guard.check();
    return this.records.size;
  }

  private sweep(now: number): number {
    let n = 0;
    for (const [state, r] of this.records) if (r.expiresAt <= now && this.records.delete(state)) n++;
    return n;
  }
}

/** Which goes first when the bound is reached: the one that expires first (then the smaller state). */
function before(a: TakeOnceRecord, b: TakeOnceRecord): boolean {
  return a.expiresAt < b.expiresAt || (a.expiresAt === b.expiresAt && a.state < b.state);
}
