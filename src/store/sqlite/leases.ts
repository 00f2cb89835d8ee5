/** Leases (`leases`, schema version 14): one row per held key, taken over once lapsed; see LeaseStore. */
import type { LeaseStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

export class SqliteLeaseStore implements LeaseStore {
  constructor(private readonly db: SqliteDb) {}

  async acquire(key: string, holder: string, now: number, ttlMs: number): Promise<boolean> {
    return this.db.write("take a lease", () => {
      const { changes } = this.db
        .stmt(
          "INSERT INTO leases (key, holder, expires_at) VALUES (?, ?, ?) " +
            "ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at WHERE leases.expires_at <= ?",
        )
        .run(key, holder, now + ttlMs, now);
      return changes > 0;
    });
  }

  async renew(key: string, holder: string, now: number, ttlMs: number): Promise<boolean> {
    return this.db.write(
      "renew a lease",
      () => this.db.stmt("UPDATE leases SET expires_at = ? WHERE key = ? AND holder = ? AND expires_at > ?").run(now + ttlMs, key, holder, now).changes > 0,
    );
  }

  async release(key: string, holder: string): Promise<boolean> {
    return this.db.write("give a lease back", () => this.db.stmt("DELETE FROM leases WHERE key = ? AND holder = ?").run(key, holder).changes > 0);
  }
}
