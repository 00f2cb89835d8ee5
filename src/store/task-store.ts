/**
 * Task records live behind this interface so that a durable store can replace
 * the in-memory one later. Records are plain JSON: epoch-ms numbers and string
 * ids, never timers, promises or Date objects. Every record names the session
 * that owns it; lookups by another session are treated as "not found".
 */
export type ProxyTaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled" | "expired";

export const TERMINAL_STATUSES: readonly ProxyTaskStatus[] = ["completed", "failed", "cancelled", "expired"];

/** A JSON-RPC error as the upstream sent it (kept so tasks/result can return it unchanged). */
export interface RpcErrorRecord {
  code: number;
  message: string;
  data?: unknown;
}

export interface ProxyTaskRecord {
  taskId: string;
  sessionId: string;
  /**
   * `tool`: a tool call run by the gateway (meta promotion, or a task-augmented
   * call of a tool the upstream runs synchronously) or mapped onto an upstream
   * task. `receiver`: a task-augmented sampling/elicitation request an upstream
   * sent to the gateway (seed 001). Absent means `tool`.
   */
  kind?: "tool" | "receiver";
  server: string;
  /** The tool name; for receiver tasks the request method. */
  toolName: string;
  toolArgs: Record<string, unknown>;
  /** The upstream's own task id when the call runs as an upstream task (never shown downstream). */
  upstreamTaskId?: string;
  pollIntervalMs?: number;
  status: ProxyTaskStatus;
  /**
   * A `working` task whose call waits for the client (an elicitation or
   * sampling request attributed to it): MCP shows it as `input_required`.
   */
  inputRequired?: boolean;
  statusMessage?: string;
  createdAt: number;
  lastUpdatedAt: number;
  ttlMs: number;
  expiresAt: number;
  progress?: { progress: number; total?: number; message?: string };
  /** The result (plain JSON). Absent for upstream tasks: their result stays upstream until asked for. */
  result?: Record<string, unknown>;
  /** JSON size of `result` (retention is bounded in bytes per session). */
  resultBytes?: number;
  /** The task ended upstream: tasks/result asks the upstream for what it returned. */
  resultUpstream?: boolean;
  error?: string;
  rpcError?: RpcErrorRecord;
}

export interface TaskRecordStore {
  get(taskId: string): ProxyTaskRecord | undefined;
  put(record: ProxyTaskRecord): void;
  delete(taskId: string): void;
  /** All records of one session, oldest first. */
  listBySession(sessionId: string): ProxyTaskRecord[];
}

export class MemoryTaskRecordStore implements TaskRecordStore {
  private readonly records = new Map<string, ProxyTaskRecord>();
  private readonly bySession = new Map<string, Set<string>>();

  get(taskId: string): ProxyTaskRecord | undefined {
    return this.records.get(taskId);
  }

  put(record: ProxyTaskRecord): void {
    this.records.set(record.taskId, record);
    let ids = this.bySession.get(record.sessionId);
    if (!ids) this.bySession.set(record.sessionId, (ids = new Set()));
    ids.add(record.taskId);
  }

  delete(taskId: string): void {
    const record = this.records.get(taskId);
    if (!record) return;
    this.records.delete(taskId);
    const ids = this.bySession.get(record.sessionId);
    ids?.delete(taskId);
    if (ids?.size === 0) this.bySession.delete(record.sessionId);
  }

  listBySession(sessionId: string): ProxyTaskRecord[] {
    const ids = this.bySession.get(sessionId);
    if (!ids) return [];
    return [...ids].map((id) => this.records.get(id)!).sort((a, b) => (a.taskId < b.taskId ? -1 : 1));
  }

  get size(): number {
    return this.records.size;
  }
}
