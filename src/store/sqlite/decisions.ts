/** Governance decision records in the `decisions` table (schema version 4), oldest first by (at, id). */
import type { DecisionRecord, DecisionStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

export class SqliteDecisionStore implements DecisionStore {
  constructor(private readonly db: SqliteDb) {}

  async append(record: DecisionRecord, retention: { maxAgeMs: number; maxRecords: number }): Promise<void> {
    this.db.write("record a governance decision", () => {
      this.db.stmt("INSERT INTO decisions (id, at, record) VALUES (?, ?, ?)").run(record.id, record.at, JSON.stringify(record));
      this.db.stmt("DELETE FROM decisions WHERE at <= ?").run(record.at - retention.maxAgeMs);
      const { n } = this.db.stmt("SELECT count(*) AS n FROM decisions").get() as { n: number };
      if (n > retention.maxRecords) {
        this.db.stmt("DELETE FROM decisions WHERE id IN (SELECT id FROM decisions ORDER BY at, id LIMIT ?)").run(n - retention.maxRecords);
      }
    });
  }

  async list(query: { since?: number; limit?: number } = {}): Promise<DecisionRecord[]> {
    return this.db.read("list governance decisions", () =>
      (
        this.db
          .stmt("SELECT record FROM decisions WHERE at >= ? ORDER BY at, id LIMIT ?")
          .all(query.since ?? Number.MIN_SAFE_INTEGER, query.limit ?? -1) as Array<{
          record: string;
        }>
      ).map((r) => JSON.parse(r.record) as DecisionRecord),
    );
  }

  async count(): Promise<number> {
    return this.db.read("count governance decisions", () => (this.db.stmt("SELECT count(*) AS n FROM decisions").get() as { n: number }).n);
  }
}
