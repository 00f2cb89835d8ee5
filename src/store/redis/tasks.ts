/**
 * Redis TaskStore. A task is a hash (record JSON, a small index JSON, a
 * version); the indexes are sorted sets and one hash (scripts.ts has the
 * layout). transition() and patch() are optimistic compare-and-set: read the
 * record and its version, apply the change here (policy.applyTaskChange, as
 * the other backends), and write with a script that succeeds only while the
 * version is unchanged — else read again. So a `working → completed` never
 * overwrites a `cancelled` another replica wrote first, and no script has to
 * decode a (possibly large) result.
 */
import type { ProxyTaskStatus, TaskPatch, TaskQuery, TaskRecord, TaskRef, TaskRetention, TaskStore, TaskTransition } from "../contracts.js";
import { applyTaskChange, duplicateTask, isActive } from "../policy.js";
import type { RedisConn } from "./conn.js";

/** The fields the indexes need, as the scripts read them. */
interface IndexJson {
  s: string;
  k: string;
  v: string;
  st: ProxyTaskStatus;
  a: boolean;
  lu: number;
  b: number;
  u?: string;
  ru?: number;
}

function indexOf(r: TaskRecord): string {
  const i: IndexJson = { s: r.sessionId, k: r.kind ?? "tool", v: r.server, st: r.status, a: isActive(r.status), lu: r.lastUpdatedAt, b: r.resultBytes ?? 0 };
  if (r.upstreamTaskId !== undefined) i.u = r.upstreamTaskId;
  if (r.retainUntil !== undefined) i.ru = r.retainUntil;
  return JSON.stringify(i);
}

function parse(json: unknown): TaskRecord | undefined {
  return typeof json === "string" ? (JSON.parse(json) as TaskRecord) : undefined;
}

function parseAll(rows: unknown): TaskRecord[] {
  return (rows as string[]).map((r) => JSON.parse(r) as TaskRecord);
}

export class RedisTaskStore implements TaskStore {
  constructor(private readonly conn: RedisConn) {}

  async get(taskId: string): Promise<TaskRecord | undefined> {
    return parse(await this.conn.run("read a task", (r) => r.hget(this.conn.key("t", taskId), "r")));
  }

  async create(record: TaskRecord): Promise<void> {
    const json = JSON.stringify(record);
    const rec = JSON.parse(json) as TaskRecord;
    const written = await this.conn.script("create a task", "taskWrite", record.taskId, "create", "", json, indexOf(rec));
    if (written === -1) throw duplicateTask(record.taskId);
  }

  async transition(taskId: string, change: TaskTransition): Promise<TaskRecord | undefined> {
    return this.change("change a task's status", taskId, (current) =>
      change.from.includes(current.status) ? applyTaskChange(current, change.to, change.patch, change.unset) : undefined,
    );
  }

  async patch(
    taskId: string,
    patch: TaskPatch,
    options: { ifStatus?: readonly ProxyTaskStatus[]; unset?: readonly (keyof TaskPatch)[] } = {},
  ): Promise<TaskRecord | undefined> {
    return this.change("update a task", taskId, (current) =>
      options.ifStatus && !options.ifStatus.includes(current.status) ? undefined : applyTaskChange(current, current.status, patch, options.unset),
    );
  }

  async delete(taskId: string): Promise<boolean> {
    return (await this.conn.script("delete a task", "taskDelete", taskId)) === 1;
  }

  async listBySession(sessionId: string, query: TaskQuery = {}): Promise<TaskRecord[]> {
    const statuses = query.status === undefined ? "" : `,${query.status.join(",")},`;
    // An empty status filter matches nothing (as SQL's `IN (NULL)`).
    if (query.status !== undefined && query.status.length === 0) return [];
    const rows = await this.conn.script(
      "list a session's tasks",
      "taskList",
      sessionId,
      query.afterTaskId ?? "",
      query.kind ?? "",
      query.server ?? "",
      statuses,
      query.limit ?? -1,
    );
    return parseAll(rows);
  }

  async findByUpstreamTask(sessionId: string, server: string, upstreamTaskId: string): Promise<TaskRecord | undefined> {
    return parse(await this.conn.script("find a task by its upstream task", "taskByUpstream", `${sessionId}\0${server}\0${upstreamTaskId}`));
  }

  async listWorking(): Promise<TaskRecord[]> {
    return parseAll(await this.conn.script("list working tasks", "taskWorking"));
  }

  async deleteExpired(now: number): Promise<TaskRef[]> {
    const flat = (await this.conn.script("delete expired tasks", "taskDeleteExpired", now)) as string[];
    const refs: TaskRef[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) refs.push({ taskId: flat[i]!, sessionId: flat[i + 1]! });
    return refs.sort((a, b) => (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
  }

  async enforceRetention(sessionId: string, retention: TaskRetention): Promise<string[]> {
    const victims = await this.conn.script(
      "apply task retention",
      "taskRetention",
      sessionId,
      retention.kind ?? "tool",
      retention.maxCount,
      retention.maxBytes,
      retention.keep ?? "",
    );
    return victims as string[];
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return (await this.conn.script("delete a session's tasks", "taskDeleteSession", sessionId)) as number;
  }

  /** Read, decide, write-if-unchanged; again when another writer came between (bounded: each retry means someone else progressed). */
  private async change(what: string, taskId: string, decide: (current: TaskRecord) => TaskRecord | undefined): Promise<TaskRecord | undefined> {
    for (;;) {
      const [json, version] = await this.conn.run(what, (r) => r.hmget(this.conn.key("t", taskId), "r", "n"));
      const current = parse(json);
      if (!current || version === null || version === undefined) return undefined;
      const next = decide(current);
      if (!next) return undefined;
      const nextJson = JSON.stringify(next);
      const written = await this.conn.script(what, "taskWrite", taskId, "cas", version, nextJson, indexOf(next));
      if (written === 1) return JSON.parse(nextJson) as TaskRecord;
    }
  }
}
