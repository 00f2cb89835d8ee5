/** Approvals in the `approvals` table (schema version 6): the record as JSON, its state and creation time as indexed columns. */
import { applyApprovalUpdate } from "../approval-update.js";
import type { ApprovalRecord, ApprovalState, ApprovalStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

export class SqliteApprovalStore implements ApprovalStore {
  constructor(private readonly db: SqliteDb) {}

  async create(r: ApprovalRecord): Promise<void> {
    this.db.write("store an approval", () => {
      this.db.stmt("INSERT INTO approvals (id, state, created_at, record) VALUES (?, ?, ?, ?)").run(r.id, r.state, r.createdAt, JSON.stringify(r));
    });
  }

  async get(id: string): Promise<ApprovalRecord | undefined> {
    return this.db.read("read an approval", () => {
      const row = this.db.stmt("SELECT record FROM approvals WHERE id = ?").get(id) as { record: string } | undefined;
      return row && (JSON.parse(row.record) as ApprovalRecord);
    });
  }

  async list(query: { states?: readonly ApprovalState[]; limit?: number } = {}): Promise<ApprovalRecord[]> {
    return this.db.read("list approvals", () => {
      const states = query.states;
      const where = states === undefined ? "" : `WHERE state IN (${states.map(() => "?").join(", ") || "NULL"})`;
      const rows = this.db.stmt(`SELECT record FROM approvals ${where} ORDER BY created_at, id LIMIT ?`).all(...(states ?? []), query.limit ?? -1) as Array<{
        record: string;
      }>;
      return rows.map((row) => JSON.parse(row.record) as ApprovalRecord);
    });
  }

  async update(
    id: string,
    patch: Parameters<ApprovalStore["update"]>[1],
    condition: Parameters<ApprovalStore["update"]>[2],
  ): Promise<ApprovalRecord | undefined> {
    return this.db.write("update an approval", () => {
      const row = this.db.stmt("SELECT record FROM approvals WHERE id = ?").get(id) as { record: string } | undefined;
      const next = row && applyApprovalUpdate(JSON.parse(row.record) as ApprovalRecord, patch, condition);
      if (!next) return undefined;
      this.db.stmt("UPDATE approvals SET state = ?, record = ? WHERE id = ?").run(next.state, JSON.stringify(next), id);
      return next;
    });
  }

  async deleteEndedBefore(before: number): Promise<number> {
    return this.db.write("delete ended approvals", () =>
      Number(this.db.stmt("DELETE FROM approvals WHERE state != 'pending' AND created_at < ?").run(before).changes),
    );
  }
}
