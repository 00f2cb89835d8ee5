/**
 * SQLite TaskStore. The record is the JSON column; kind, server, status,
 * upstream_task_id, last_updated_at, result_bytes and retain_until are copies
 * that the indexes of migration 2 cover (by session, by upstream task, active,
 * by retain_until, ended by session). Each compare-and-set is one IMMEDIATE
 * transaction: read, check, write.
 */
import type { ProxyTaskStatus, TaskPatch, TaskQuery, TaskRecord, TaskRef, TaskRetention, TaskStore, TaskTransition } from "../contracts.js";
import { applyTaskChange, duplicateTask, retentionVictims } from "../policy.js";
import type { SqliteDb } from "./db.js";
import { ACTIVE_SQL } from "./migrations.js";

interface RecordRow {
  record: string;
}

export class SqliteTaskStore implements TaskStore {
  constructor(private readonly db: SqliteDb) {}

  async get(taskId: string): Promise<TaskRecord | undefined> {
    return this.db.read("read a task", () => this.load(taskId));
  }

  async create(record: TaskRecord): Promise<void> {
    this.db.write("create a task", () => {
      if (this.db.stmt("SELECT 1 FROM tasks WHERE task_id = ?").get(record.taskId) !== undefined) throw duplicateTask(record.taskId);
      this.db
        .stmt(
          `INSERT INTO tasks (task_id, session_id, kind, server, status, upstream_task_id, last_updated_at, result_bytes, retain_until, record)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(record.taskId, record.sessionId, record.kind ?? "tool", record.server, ...columns(record), JSON.stringify(record));
    });
  }

  async transition(taskId: string, change: TaskTransition): Promise<TaskRecord | undefined> {
    return this.db.write("change a task's status", () => {
      const current = this.load(taskId);
      if (!current || !change.from.includes(current.status)) return undefined;
      return this.save(applyTaskChange(current, change.to, change.patch, change.unset));
    });
  }

  async patch(
    taskId: string,
    patch: TaskPatch,
    options: { ifStatus?: readonly ProxyTaskStatus[]; unset?: readonly (keyof TaskPatch)[] } = {},
  ): Promise<TaskRecord | undefined> {
    return this.db.write("update a task", () => {
      const current = this.load(taskId);
      if (!current || (options.ifStatus && !options.ifStatus.includes(current.status))) return undefined;
      return this.save(applyTaskChange(current, current.status, patch, options.unset));
    });
  }

  async delete(taskId: string): Promise<boolean> {
    return this.db.read("delete a task", () => this.db.stmt("DELETE FROM tasks WHERE task_id = ?").run(taskId).changes > 0);
  }

  async listBySession(sessionId: string, query: TaskQuery = {}): Promise<TaskRecord[]> {
    const where = ["session_id = ?"];
    const params: unknown[] = [sessionId];
    const and = (clause: string, ...values: unknown[]) => {
      where.push(clause);
      params.push(...values);
    };
    if (query.afterTaskId !== undefined) and("task_id > ?", query.afterTaskId);
    if (query.kind !== undefined) and("kind = ?", query.kind);
    if (query.server !== undefined) and("server = ?", query.server);
    if (query.status !== undefined) and(`status IN (${query.status.map(() => "?").join(", ") || "NULL"})`, ...query.status);
    const sql = `SELECT record FROM tasks WHERE ${where.join(" AND ")} ORDER BY task_id${query.limit !== undefined ? " LIMIT ?" : ""}`;
    if (query.limit !== undefined) params.push(query.limit);
    return this.db.read("list a session's tasks", () => parseAll(this.db.stmt(sql).all(...params)));
  }

  async findByUpstreamTask(sessionId: string, server: string, upstreamTaskId: string): Promise<TaskRecord | undefined> {
    return this.db.read("find a task by its upstream task", () => {
      const row = this.db
        .stmt("SELECT record FROM tasks WHERE session_id = ? AND server = ? AND upstream_task_id = ? ORDER BY task_id LIMIT 1")
        .get(sessionId, server, upstreamTaskId) as RecordRow | undefined;
      return row && (JSON.parse(row.record) as TaskRecord);
    });
  }

  async listWorking(): Promise<TaskRecord[]> {
    return this.db.read("list working tasks", () => parseAll(this.db.stmt(`SELECT record FROM tasks WHERE ${ACTIVE_SQL} ORDER BY task_id`).all()));
  }

  async deleteExpired(now: number): Promise<TaskRef[]> {
    return this.db.write("delete expired tasks", () => {
      const rows = this.db
        .stmt("DELETE FROM tasks WHERE retain_until IS NOT NULL AND retain_until <= ? RETURNING task_id AS taskId, session_id AS sessionId")
        .all(now) as TaskRef[];
      return rows.sort((a, b) => (a.taskId < b.taskId ? -1 : 1));
    });
  }

  async enforceRetention(sessionId: string, retention: TaskRetention): Promise<string[]> {
    return this.db.write("apply task retention", () => {
      const ended = this.db
        .stmt(
          `SELECT task_id AS taskId, result_bytes AS bytes FROM tasks
           WHERE session_id = ? AND kind = ? AND NOT ${ACTIVE_SQL} ORDER BY last_updated_at, task_id`,
        )
        .all(sessionId, retention.kind ?? "tool") as Array<{ taskId: string; bytes: number }>;
      const victims = retentionVictims(ended, retention.maxCount, retention.maxBytes, retention.keep);
      const del = this.db.stmt("DELETE FROM tasks WHERE task_id = ?");
      for (const id of victims) del.run(id);
      return victims;
    });
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return this.db.inTurn("delete a session's tasks", () => this.db.stmt("DELETE FROM tasks WHERE session_id = ?").run(sessionId).changes);
  }

  private load(taskId: string): TaskRecord | undefined {
    const row = this.db.stmt("SELECT record FROM tasks WHERE task_id = ?").get(taskId) as RecordRow | undefined;
    return row && (JSON.parse(row.record) as TaskRecord);
  }

  private save(record: TaskRecord): TaskRecord {
    const json = JSON.stringify(record);
    this.db
      .stmt("UPDATE tasks SET status = ?, upstream_task_id = ?, last_updated_at = ?, result_bytes = ?, retain_until = ?, record = ? WHERE task_id = ?")
      .run(...columns(record), json, record.taskId);
    return JSON.parse(json) as TaskRecord;
  }
}

/** The indexed copies of a record's fields, in column order (status … retain_until). */
function columns(r: TaskRecord): [string, string | null, number, number, number | null] {
  return [r.status, r.upstreamTaskId ?? null, r.lastUpdatedAt, r.resultBytes ?? 0, r.retainUntil ?? null];
}

function parseAll(rows: unknown[]): TaskRecord[] {
  return (rows as RecordRow[]).map((r) => JSON.parse(r.record) as TaskRecord);
}
