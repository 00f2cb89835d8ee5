/**
 * ActivityLog: what happened at the gateway, written to the store (kind
 * `activity`) for people to look back at in the console (docs/design/console.md).
 * Recording never waits and never fails the caller: records queue (at most
 * gateway.activity.maxQueued, then dropped and counted) and are written in one
 * batch per flushMs; a failed write is logged and counted. It hears the
 * sessions' changes (tasks, elicitations, sampling, connections) itself; tool
 * calls, start-up checks, reloads and console actions are handed to record().
 */
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import { sessionHash, type Logger } from "../logging.js";
import type { ActivityKind, ActivityRecord, Store } from "../store/contracts.js";
import type { SessionChange, SessionManager } from "./session-manager.js";

export type ActivityEntry = Omit<ActivityRecord, "id" | "at"> & { at?: number };

/** The last start-up check of a server (emceepee checks each config-file server once at start and after a reload). */
export interface CheckNote {
  ok: boolean;
  at: number;
  reason?: string;
  tools?: number;
}

export interface ActivityLogDeps {
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  store: () => Store;
}

const TASK_ENDS: Readonly<Record<string, string>> = {
  task_completed: "completed",
  task_failed: "failed",
  task_cancelled: "cancelled",
  task_expired: "expired",
};

export class ActivityLog {
  private queue: ActivityRecord[] = [];
  private timer: TimerHandle | undefined;
  private writing: Promise<void> | undefined;
  private closed = false;
  private readonly listeners = new Set<() => void>();
  /** Records dropped because the queue was full, and records whose write failed. */
  dropped = 0;
  failed = 0;
  /** By server name. */
  readonly checks = new Map<string, CheckNote>();

  constructor(
    private readonly settings: GatewaySettings["activity"],
    private readonly deps: ActivityLogDeps,
  ) {}

  get enabled(): boolean {
    return this.settings.enabled;
  }

  /** Queues one record (fire-and-forget); written within flushMs. */
  record(entry: ActivityEntry): void {
    if (!this.settings.enabled || this.closed) return;
    if (this.queue.length >= this.settings.maxQueued) {
      if (this.dropped++ % 1000 === 0) this.deps.logger.warn({ dropped: this.dropped, maxQueued: this.settings.maxQueued }, "activity_dropped");
      return;
    }
    const { at, ...rest } = entry;
    this.queue.push({ id: this.deps.newId(), at: at ?? this.deps.clock.now(), ...rest });
    this.timer ??= this.deps.clock.setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.settings.flushMs);
  }

  /** A start-up check's result: kept per server (the Upstreams page) and recorded. */
  checked(server: string, result: { ok: boolean; reason?: string | undefined; tools?: number | undefined }): void {
    const note: CheckNote = { ok: result.ok, at: this.deps.clock.now() };
    if (result.reason !== undefined) note.reason = result.reason;
    if (result.tools !== undefined) note.tools = result.tools;
    this.checks.set(server, note);
    this.record({ kind: "startup_check", server, outcome: result.ok ? "ok" : "failed", ...(result.reason ? { summary: result.reason } : {}) });
  }

  /** `reload` with each outcome recorded (config_reload: what it added, removed and updated, or why it failed). */
  reloads<R extends { added: string[]; removed: string[]; updated: string[] }, A>(reload: (next: A) => Promise<R>): (next: A) => Promise<R> {
    return async (next) => {
      try {
        const report = await reload(next);
        const parts = (["added", "removed", "updated"] as const).map((k) => (report[k].length ? `${k} ${report[k].join(", ")}` : "")).filter(Boolean);
        this.record({ kind: "config_reload", outcome: "ok", summary: parts.length ? parts.join("; ") : "no server changed" });
        return report;
      } catch (err) {
        this.record({ kind: "config_reload", outcome: "failed", summary: errorMessage(err) });
        throw err;
      }
    };
  }

  /** Called after each written batch (the console's live pages). */
  onWritten(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Records what the sessions tell (tasks, answers, connections); returns the unsubscribe. */
  watch(sessions: SessionManager): () => void {
    return sessions.observe((change) => {
      try {
        this.fromSession(sessions, change);
      } catch (err) {
        this.deps.logger.error({ err: errorMessage(err) }, "activity_observer_failed");
      }
    });
  }

  /** Writes what is queued now (one batch at a time). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    const { maxAgeMs, maxRecords } = this.settings;
    this.writing = (async () => {
      try {
        await this.deps.store().activity.append(batch, { now: this.deps.clock.now(), maxAgeMs, maxRecords });
      } catch (err) {
        this.failed += batch.length;
        this.deps.logger.warn({ err: errorMessage(err), records: batch.length, failed: this.failed }, "activity_write_failed");
      }
    })();
    await this.writing;
    this.writing = undefined;
    for (const listener of [...this.listeners]) listener();
  }

  /** Writes what is left and records nothing more; idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.deps.clock.clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
    this.listeners.clear();
  }

  /** A session could not connect to `server` (the pool's failed attempt; no session event carries it). */
  connectFailed(session: { id: string; principal?: { hash: string } | undefined }, server: string, reason: string): void {
    this.record({
      kind: "server_failed",
      outcome: "failed",
      server,
      summary: reason,
      sessionHash: sessionHash(session.id),
      ...(session.principal ? { principalHash: session.principal.hash } : {}),
    });
  }

  private fromSession(sessions: SessionManager, change: SessionChange): void {
    if (change.type !== "change") return;
    const { type, server, data } = change.change;
    const session = sessions.get(change.sessionId);
    const who = { sessionHash: sessionHash(change.sessionId), ...(session?.principal ? { principalHash: session.principal.hash } : {}) };
    const str = (v: unknown) => (typeof v === "string" ? v : undefined);
    const taskId = str(data.taskId);
    const tool = str(data.toolName);
    const task = { ...(taskId ? { taskId } : {}), ...(tool ? { tool } : {}) };
    let entry: ActivityEntry | undefined;
    if (type === "task_created") entry = { kind: "task", outcome: "created", server, ...task, summary: "the call became a task" };
    else if (type in TASK_ENDS) {
      const reason = str(data.error) ?? str(data.reason) ?? str(data.statusMessage);
      entry = { kind: "task", outcome: TASK_ENDS[type]!, server, ...task, ...(reason ? { summary: reason } : {}) };
    } else if (type === "elicitation_request" || type === "sampling_request") {
      const params = data.params as { message?: unknown } | undefined;
      entry = { kind: type === "elicitation_request" ? "elicitation" : "sampling", outcome: "requested", server, summary: requestSummary(data, params) };
    } else if (type === "elicitation_answered" || type === "sampling_answered") {
      const by = str(data.by) ?? "someone";
      entry = {
        kind: type === "elicitation_answered" ? "elicitation" : "sampling",
        outcome: "answered",
        server,
        summary: `${str(data.requestId) ?? "a request"}: ${str(data.outcome) ?? "answered"} by ${by === "console" ? "a person in the console" : by === "client" ? "the session's client" : by}`,
      };
    } else if (/^(elicitation|sampling)_(expired|rejected)$/.test(type)) {
      const [kind, outcome] = type.split("_") as ["elicitation" | "sampling", string];
      entry = { kind, outcome, server, summary: `${str(data.requestId) ?? "a request"} ${outcome}${str(data.reason) ? `: ${str(data.reason)}` : ""}` };
    } else if (type === "server_connected") entry = { kind: "server_connected", outcome: "connected", server };
    else if (type === "server_reconnected")
      entry = {
        kind: "server_connected",
        outcome: "reconnected",
        server,
        summary: `after ${typeof data.attempts === "number" ? data.attempts : "?"} attempt(s)`,
      };
    else if (type === "server_disconnected")
      entry = { kind: "server_disconnected", outcome: "disconnected", server, ...(str(data.reason) ? { summary: str(data.reason)! } : {}) };
    if (entry) this.record({ ...entry, ...who });
  }
}

function requestSummary(data: Record<string, unknown>, params: { message?: unknown } | undefined): string {
  const id = typeof data.requestId === "string" ? data.requestId : "a request";
  const message = typeof params?.message === "string" ? params.message.slice(0, 200) : undefined;
  return message ? `${id}: ${message}` : id;
}

/** What kinds the Activity page filters by. */
export const ACTIVITY_KINDS: readonly ActivityKind[] = [
  "tool_call",
  "task",
  "elicitation",
  "sampling",
  "server_connected",
  "server_disconnected",
  "server_failed",
  "startup_check",
  "config_reload",
  "console_action",
];
