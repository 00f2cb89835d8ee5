/** Pinned tool definitions in the `pins` table (schema version 7): one row per (server, tool), the record as JSON and whether it is quarantined. */
import type { PinnedDefinition, PinRecord, PinStore } from "../contracts.js";
import { accepted, withPending } from "../pin-update.js";
import type { SqliteDb } from "./db.js";

export class SqlitePinStore implements PinStore {
  constructor(private readonly db: SqliteDb) {}

  private row(server: string, tool: string): PinRecord | undefined {
    const row = this.db.stmt("SELECT record FROM pins WHERE server = ? AND tool = ?").get(server, tool) as { record: string } | undefined;
    return row && (JSON.parse(row.record) as PinRecord);
  }

  private put(r: PinRecord): void {
    this.db
      .stmt(
        "INSERT INTO pins (server, tool, quarantined, record) VALUES (?, ?, ?, ?) ON CONFLICT (server, tool) DO UPDATE SET quarantined = excluded.quarantined, record = excluded.record",
      )
      .run(r.server, r.tool, r.pending ? 1 : 0, JSON.stringify(r));
  }

  async get(server: string, tool: string): Promise<PinRecord | undefined> {
    return this.db.read("read a pinned tool definition", () => this.row(server, tool));
  }

  async list(query: { server?: string; quarantined?: boolean } = {}): Promise<PinRecord[]> {
    return this.db.read("list pinned tool definitions", () => {
      const where: string[] = [];
      const params: Array<string | number> = [];
      if (query.server !== undefined) {
        where.push("server = ?");
        params.push(query.server);
      }
      if (query.quarantined !== undefined) {
        where.push("quarantined = ?");
        params.push(query.quarantined ? 1 : 0);
      }
      const sql = `SELECT record FROM pins ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY server, tool`;
      return (this.db.stmt(sql).all(...params) as Array<{ record: string }>).map((r) => JSON.parse(r.record) as PinRecord);
    });
  }

  async pinIfAbsent(server: string, tool: string, first: PinnedDefinition): Promise<PinRecord> {
    return this.db.write("pin a tool definition", () => {
      const had = this.row(server, tool);
      if (had) return had;
      const r: PinRecord = { server, tool, pinned: first };
      this.put(r);
      return r;
    });
  }

  async quarantine(server: string, tool: string, seen: PinnedDefinition): Promise<boolean> {
    return this.db.write("quarantine a tool definition", () => {
      const had = this.row(server, tool);
      const next = had && withPending(had, seen);
      if (!next) return false;
      if (next !== had) this.put(next);
      return true;
    });
  }

  async accept(server: string, tool: string, digest: string, by: string, at: number): Promise<PinRecord | undefined> {
    return this.db.write("accept a tool definition", () => {
      const had = this.row(server, tool);
      const next = had && accepted(had, digest, by, at);
      if (next) this.put(next);
      return next;
    });
  }
}
