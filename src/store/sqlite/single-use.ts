/** Single-use marks (`single_use`, schema version 13): one row per used key until its expiry; see SingleUseStore. */
import type { SingleUseStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

export class SqliteSingleUseStore implements SingleUseStore {
  constructor(private readonly db: SqliteDb) {}

  async use(key: string, expiresAt: number, now: number): Promise<boolean> {
    if (expiresAt <= now)
      return this.db.read("check a single-use mark", () => !this.db.stmt("SELECT 1 FROM single_use WHERE key = ? AND expires_at > ?").get(key, now));
    return this.db.write("mark a key used", () => {
      const { changes } = this.db
        .stmt(
          "INSERT INTO single_use (key, expires_at) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE single_use.expires_at <= ?",
        )
        .run(key, expiresAt, now);
      return changes > 0;
    });
  }

  async deleteExpired(now: number): Promise<number> {
    return this.db.write("delete expired single-use marks", () => this.db.stmt("DELETE FROM single_use WHERE expires_at <= ?").run(now).changes);
  }
}
