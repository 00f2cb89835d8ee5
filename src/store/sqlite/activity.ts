/** Activity records in the `activity` table (schema version 8), newest first by (at, id); the filtered columns are indexed. */
import type { ActivityQuery, ActivityRecord, ActivityStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

export class SqliteActivityStore implements ActivityStore {
  constructor(private readonly db: SqliteDb) {}

  async append(records: readonly ActivityRecord[], retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<void> {
    this.db.write("record activity", () => {
      const insert = this.db.stmt(
        "INSERT OR REPLACE INTO activity (id, at, kind, server, session_hash, principal_hash, outcome, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      );
      for (const r of records) {
        insert.run(r.id, r.at, r.kind, r.server ?? null, r.sessionHash ?? null, r.principalHash ?? null, r.outcome ?? null, JSON.stringify(r));
      }
      this.db.stmt("DELETE FROM activity WHERE at <= ?").run(retention.now - retention.maxAgeMs);
      const { n } = this.db.stmt("SELECT count(*) AS n FROM activity").get() as { n: number };
      if (n > retention.maxRecords) {
        this.db.stmt("DELETE FROM activity WHERE id IN (SELECT id FROM activity ORDER BY at, id LIMIT ?)").run(n - retention.maxRecords);
      }
    });
  }

  async list(q: ActivityQuery): Promise<ActivityRecord[]> {
    const where: string[] = [];
    const args: Array<string | number> = [];
    const eq = (column: string, value: string | undefined) => {
      if (value === undefined) return;
      where.push(`${column} = ?`);
      args.push(value);
    };
    eq("kind", q.kind);
    eq("server", q.server);
    eq("session_hash", q.sessionHash);
    eq("principal_hash", q.principalHash);
    eq("outcome", q.outcome);
    eq("json_extract(record, '$.taskId')", q.taskId);
    if (q.since !== undefined) {
      where.push("at >= ?");
      args.push(q.since);
    }
    if (q.before !== undefined) {
      where.push("(at < ? OR (at = ? AND id < ?))");
      args.push(q.before.at, q.before.at, q.before.id);
    }
    const sql = `SELECT record FROM activity ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY at DESC, id DESC LIMIT ?`;
    return this.db.read("list activity", () =>
      (this.db.stmt(sql).all(...args, q.limit) as Array<{ record: string }>).map((r) => JSON.parse(r.record) as ActivityRecord),
    );
  }

  async count(): Promise<number> {
    return this.db.read("count activity", () => (this.db.stmt("SELECT count(*) AS n FROM activity").get() as { n: number }).n);
  }
}
