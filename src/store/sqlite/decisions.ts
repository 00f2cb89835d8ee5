/**
 * Governance decision records in the `decisions` table (schema version 4),
 * oldest first by (at, id); the audit page's filters use the expression
 * indexes of version 12 (principal, server + tool, outcome, each then time).
 */
import type { DecisionQuery, DecisionRecord, DecisionStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

/** The indexed expressions (migrations.ts version 12): a query must spell them exactly so for SQLite to use the index. */
const COLUMN = {
  principalHash: "json_extract(record, '$.principalHash')",
  server: "json_extract(record, '$.server')",
  tool: "json_extract(record, '$.tool')",
  outcome: "json_extract(record, '$.outcome')",
} as const;

export class SqliteDecisionStore implements DecisionStore {
  constructor(private readonly db: SqliteDb) {}

  async append(record: DecisionRecord, retention: { maxAgeMs: number; maxRecords: number }): Promise<void> {
    this.db.write("record a governance decision", () => {
      this.db.stmt("INSERT INTO decisions (id, at, record) VALUES (?, ?, ?)").run(record.id, record.at, JSON.stringify(record));
      this.retain({ now: record.at, ...retention });
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

  async query(q: DecisionQuery): Promise<DecisionRecord[]> {
    const { sql, args } = decisionSql(q);
    return this.db.read("query governance decisions", () =>
      (this.db.stmt(sql).all(...args) as Array<{ record: string }>).map((r) => JSON.parse(r.record) as DecisionRecord),
    );
  }

  async prune(retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<number> {
    return this.db.write("delete old governance decisions", () => this.retain(retention));
  }

  async count(): Promise<number> {
    return this.db.read("count governance decisions", () => (this.db.stmt("SELECT count(*) AS n FROM decisions").get() as { n: number }).n);
  }

  private retain(retention: { now: number; maxAgeMs: number; maxRecords: number }): number {
    let deleted = Number(this.db.stmt("DELETE FROM decisions WHERE at <= ?").run(retention.now - retention.maxAgeMs).changes);
    const { n } = this.db.stmt("SELECT count(*) AS n FROM decisions").get() as { n: number };
    if (n > retention.maxRecords) {
      deleted += Number(
        this.db.stmt("DELETE FROM decisions WHERE id IN (SELECT id FROM decisions ORDER BY at, id LIMIT ?)").run(n - retention.maxRecords).changes,
      );
    }
    return deleted;
  }
}

/** The SELECT for a query (exported for the test that checks SQLite's plan uses the indexes). */
export function decisionSql(q: DecisionQuery): { sql: string; args: Array<string | number> } {
  const where: string[] = [];
  const args: Array<string | number> = [];
  for (const field of ["principalHash", "server", "tool", "outcome"] as const) {
    const value = q[field];
    if (value === undefined) continue;
    where.push(`${COLUMN[field]} = ?`);
    args.push(value);
  }
  if (q.since !== undefined) {
    where.push("at >= ?");
    args.push(q.since);
  }
  if (q.until !== undefined) {
    where.push("at < ?");
    args.push(q.until);
  }
  if (q.before !== undefined) {
    where.push("(at < ? OR (at = ? AND id < ?))");
    args.push(q.before.at, q.before.at, q.before.id);
  }
  args.push(q.limit);
  return { sql: `SELECT record FROM decisions ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY at DESC, id DESC LIMIT ?`, args };
}
