/** Started console logins in the `logins` table (schema version 3): take-once in one transaction, expiring, bounded. */
import type { LoginStateRecord, LoginStateStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

export class SqliteLoginStateStore implements LoginStateStore {
  constructor(private readonly db: SqliteDb) {}

  async put(record: LoginStateRecord, max: number): Promise<void> {
    this.db.write("store a started login", () => {
      this.db.stmt("DELETE FROM logins WHERE state = ? OR expires_at <= ?").run(record.state, record.createdAt);
      const { n } = this.db.stmt("SELECT count(*) AS n FROM logins").get() as { n: number };
      if (n >= max) {
        this.db.stmt("DELETE FROM logins WHERE state IN (SELECT state FROM logins ORDER BY expires_at, state LIMIT ?)").run(n - max + 1);
      }
      this.db.stmt("INSERT INTO logins (state, expires_at, record) VALUES (?, ?, ?)").run(record.state, record.expiresAt, JSON.stringify(record));
    });
  }

  async take(state: string, now: number): Promise<LoginStateRecord | undefined> {
    return this.db.write("take a started login", () => {
      const row = this.db.stmt("SELECT expires_at, record FROM logins WHERE state = ?").get(state) as { expires_at: number; record: string } | undefined;
      if (!row) return undefined;
      this.db.stmt("DELETE FROM logins WHERE state = ?").run(state);
      return row.expires_at <= now ? undefined : (JSON.parse(row.record) as LoginStateRecord);
    });
  }

  async deleteExpired(now: number): Promise<number> {
    return this.db.read("delete expired logins", () => this.db.stmt("DELETE FROM logins WHERE expires_at <= ?").run(now).changes);
  }

  async count(): Promise<number> {
    return this.db.read("count started logins", () => (this.db.stmt("SELECT count(*) AS n FROM logins").get() as { n: number }).n);
  }
}
