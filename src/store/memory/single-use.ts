/** Single-use marks in a Map, forgotten once expired (swept as it grows); see SingleUseStore. */
import type { SingleUseStore } from "../contracts.js";
import type { MemoryGuard } from "./guard.js";

export class MemorySingleUseStore implements SingleUseStore {
  /** Key → expiresAt. */
  private readonly used = new Map<string, number>();
  /** The size at which the next use sweeps expired marks first (doubles with what stays live). */
  private sweepAt = 1_024;

  constructor(private readonly guard: MemoryGuard) {}

  async use(key: string, expiresAt: number, now: number): Promise<boolean> {
    this.guard.check();
    const until = this.used.get(key);
    if (until !== undefined && until > now) return false;
    if (expiresAt <= now) return true;
    if (this.used.size >= this.sweepAt) {
      await this.deleteExpired(now);
      this.sweepAt = Math.max(1_024, this.used.size * 2);
    }
    this.used.set(key, expiresAt);
    return true;
  }

  async deleteExpired(now: number): Promise<number> {
    this.guard.check();
    let deleted = 0;
    for (const [key, until] of this.used) {
      if (until <= now && this.used.delete(key)) deleted++;
    }
    return deleted;
  }
}
