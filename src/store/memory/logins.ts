/** Started console logins in a Map (take-once, expiring, bounded); see LoginStateStore. */
import type { LoginStateRecord, LoginStateStore } from "../contracts.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

export class MemoryLoginStateStore implements LoginStateStore {
  private readonly records = new Map<string, LoginStateRecord>();

  constructor(private readonly guard: MemoryGuard) {}

  async put(record: LoginStateRecord, max: number): Promise<void> {
    this.guard.check();
    this.records.delete(record.state);
    this.sweep(record.createdAt);
    while (this.records.size >= max) {
      let first: LoginStateRecord | undefined;
      for (const r of this.records.values()) if (!first || before(r, first)) first = r;
      this.records.delete(first!.state);
    }
    this.records.set(record.state, jsonCopy(record));
  }

  async take(state: string, now: number): Promise<LoginStateRecord | undefined> {
    this.guard.check();
    const r = this.records.get(state);
    if (!r) return undefined;
    this.records.delete(state);
    return r.expiresAt <= now ? undefined : r;
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
function before(a: LoginStateRecord, b: LoginStateRecord): boolean {
  return a.expiresAt < b.expiresAt || (a.expiresAt === b.expiresAt && a.state < b.state);
}
