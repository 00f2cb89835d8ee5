/** Leases in a Map (one process: the hold is still timed, as the shared backends time it); see LeaseStore. */
import type { LeaseStore } from "../contracts.js";
import type { MemoryGuard } from "./guard.js";

export class MemoryLeaseStore implements LeaseStore {
  private readonly held = new Map<string, { holder: string; expiresAt: number }>();

  constructor(private readonly guard: MemoryGuard) {}

  async acquire(key: string, holder: string, now: number, ttlMs: number): Promise<boolean> {
    this.guard.check();
    const cur = this.held.get(key);
    if (cur && cur.expiresAt > now) return false;
    this.held.set(key, { holder, expiresAt: now + ttlMs });
    return true;
  }

  async renew(key: string, holder: string, now: number, ttlMs: number): Promise<boolean> {
    this.guard.check();
    const cur = this.held.get(key);
    if (cur?.holder !== holder || cur.expiresAt <= now) return false;
    cur.expiresAt = now + ttlMs;
    return true;
  }

  async release(key: string, holder: string): Promise<boolean> {
    this.guard.check();
    if (this.held.get(key)?.holder !== holder) return false;
    return this.held.delete(key);
  }
}
