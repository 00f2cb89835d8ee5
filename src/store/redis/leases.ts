/** Leases as `ls:<key>` → holder with a PX expiry (Redis times the hold on its own clock); see LeaseStore. */
import type { LeaseStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

export class RedisLeaseStore implements LeaseStore {
  constructor(private readonly conn: RedisConn) {}

  async acquire(key: string, holder: string, _now: number, ttlMs: number): Promise<boolean> {
    const set = await this.conn.run("take a lease", (redis) => redis.set(this.conn.key("ls", key), holder, "PX", Math.max(1, Math.ceil(ttlMs)), "NX"));
    return set === "OK";
  }

  async renew(key: string, holder: string, _now: number, ttlMs: number): Promise<boolean> {
    return (await this.conn.script("renew a lease", "leaseRenew", key, holder, Math.max(1, Math.ceil(ttlMs)))) === 1;
  }

  async release(key: string, holder: string): Promise<boolean> {
    return (await this.conn.script("give a lease back", "leaseRelease", key, holder)) === 1;
  }
}
