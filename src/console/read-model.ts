/**
 * The console's read model: what the pages show, read from the live gateway
 * (sessions, their upstream connections, tasks and pending requests; the
 * session records for face and client). Read-only: nothing here changes
 * state or takes a client's events. Sessions are named by their hash (as in
 * the logs), never by their id, which is a bearer secret. With replicas, the
 * merge* functions join this replica's model with the others' (cluster.ts).
 */
import { sharingOf } from "../config/schema.js";
import { shownStatus } from "../mcp/task-object.js";
import { describeTarget, type ServerViewer } from "../upstream/registry.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { sessionHash } from "../logging.js";
import type { PendingInfo } from "../session/pending-requests.js";
import type { Session } from "../session/session.js";
import type { FaceRecord, ProxyTaskStatus, TaskRecord } from "../store/contracts.js";
import type { ReconnectNote } from "./live.js";

export interface ConsoleSources {
  context: GatewayContext;
  /** Stdio upstream processes running now (the gateway's ChildProcessLimiter). */
  childProcesses: () => number;
  reconnects: ReadonlyMap<string, ReconnectNote>;
  /** Which sessions the person asking may see (a console login sees its principal's only); absent: all. */
  sees?: ((s: Session) => boolean) | undefined;
  /**
   * Whose servers the asker may see (a console login that is no admin: config-file servers and
   * their principal's runtime ones, visibleTo in registry.ts); absent: all, and the child process count.
   */
  viewer?: ServerViewer | undefined;
}

/** The live sessions the asker may see. */
function visible(src: ConsoleSources): Session[] {
  return src.context.sessions.list().filter((s) => !s.isClosed && (src.sees?.(s) ?? true));
}

export interface ServerRow {
  name: string;
  transport: string;
  sharing: string | undefined;
  addedBy: string;
  /** Connection status → number of sessions in it. */
  statuses: Record<string, number>;
  lastError: string | undefined;
  reconnect: ReconnectNote | undefined;
}

export interface SessionRow {
  ref: string;
  /** The replica holding it (with gateway.cluster on). */
  replica?: string;
  face: string;
  client: string;
  createdAt: number;
  lastActivityAt: number;
  workingTasks: number;
  pending: number;
}

export interface Overview {
  now: number;
  servers: ServerRow[];
  sessions: SessionRow[];
  /** Every stdio upstream process of the gateway: shown to admins only (absent for anyone else). */
  childProcesses?: number | undefined;
  /** Replicas whose part is shown (with gateway.cluster on; this one first). */
  replicas?: string[];
  /** Live replicas that did not answer in time: their sessions are missing from the page. */
  unreachable?: string[];
}

/** A task as the console shows it: MCP's status (input_required included) and its session's ref. */
export interface TaskRow extends TaskRecord {
  sessionRef: string;
  shownStatus: ProxyTaskStatus | "input_required";
}

export interface TaskFilter {
  session?: string | undefined;
  server?: string | undefined;
  status?: string | undefined;
}

export interface InboxItem {
  sessionRef: string;
  info: PendingInfo;
  /** Sent to the session's client natively: shown read-only, answered there. */
  forwarded: boolean;
  /** Who asks: the session's client (name and version from initialize), when known (describeInbox). */
  client?: string;
  /** Why: the session's tasks of that server waiting for input (the tool calls that caused the request), when known. */
  causes?: Array<{ taskId: string; toolName: string }>;
}

/** Adds who asks (the session's client) and why (its tasks of that server waiting for input) to this replica's items. */
export async function describeInbox(src: ConsoleSources, items: InboxItem[]): Promise<InboxItem[]> {
  const bySession = new Map(visible(src).map((s) => [sessionHash(s.id), s]));
  return Promise.all(
    items.map(async (item) => {
      const s = bySession.get(item.sessionRef);
      if (!s) return item;
      const [row, working] = await Promise.all([sessionRow(src.context, s), s.tasks.list({ status: "working" }).catch(() => [])]);
      const causes = working.filter((t) => t.inputRequired && t.server === item.info.server).map((t) => ({ taskId: t.taskId, toolName: t.toolName }));
      return { ...item, client: row.client, causes };
    }),
  );
}

export async function overview(src: ConsoleSources): Promise<Overview> {
  const { context } = src;
  const sessions = visible(src);
  const servers = context.registry.list(src.viewer).map((entry): ServerRow => {
    const { transport } = describeTarget(entry.config);
    const statuses: Record<string, number> = {};
    let lastError: string | undefined;
    for (const s of sessions) {
      const view = s.view(entry.name);
      statuses[view.status] = (statuses[view.status] ?? 0) + 1;
      lastError = view.lastError ?? lastError;
    }
    return {
      name: entry.name,
      transport,
      sharing: sharingOf(entry.config, context.settings),
      addedBy: entry.addedBy,
      statuses,
      lastError,
      reconnect: src.reconnects.get(entry.name),
    };
  });
  const rows = await Promise.all(sessions.map((s) => sessionRow(context, s)));
  return { now: context.clock.now(), servers, sessions: rows, ...(src.viewer ? {} : { childProcesses: src.childProcesses() }) };
}

async function sessionRow(context: GatewayContext, s: Session): Promise<SessionRow> {
  const record = await context.store.sessions.get(s.id).catch(() => undefined);
  const info = record?.clientInfo as { name?: unknown; version?: unknown } | undefined;
  const working = await s.tasks.list({ status: "working" }).catch(() => []);
  return {
    ref: sessionHash(s.id),
    face: record ? faceName(record.face) : "stdio or not initialized",
    client: info && typeof info.name === "string" ? `${info.name}${typeof info.version === "string" ? ` ${info.version}` : ""}` : "unknown",
    createdAt: s.createdAt,
    lastActivityAt: s.lastActivityAt,
    workingTasks: working.length,
    pending: s.pending.list("elicitation").length + s.pending.list("sampling").length,
  };
}

function faceName(face: FaceRecord): string {
  if (face.kind === "meta") return "meta (/mcp)";
  if (face.kind === "all") return "all (/all/mcp)";
  if (face.kind === "virtual") return `virtual ${face.name} (/v/${face.name}/mcp)`;
  return `server ${face.server}`;
}

function shown(r: TaskRecord): TaskRow["shownStatus"] {
  return shownStatus(r);
}

/** Every visible task of every session, newest first, filtered. */
export async function listTasks(src: ConsoleSources, filter: TaskFilter = {}): Promise<TaskRow[]> {
  const sessions = visible(src).filter((s) => !filter.session || sessionHash(s.id) === filter.session);
  const all = await Promise.all(
    sessions.map(async (s) => {
      const records = await s.tasks.list({ includeCompleted: true, server: filter.server || undefined }).catch(() => []);
      return records.map((r): TaskRow => ({ ...r, sessionRef: sessionHash(s.id), shownStatus: shown(r) }));
    }),
  );
  return sortTasks(all.flat().filter((t) => !filter.status || t.shownStatus === filter.status || (filter.status === "working" && t.status === "working")));
}

/** Newest first. */
export function sortTasks(rows: TaskRow[]): TaskRow[] {
  return rows.sort((a, b) => b.createdAt - a.createdAt || (a.taskId < b.taskId ? 1 : -1));
}

/** One task and its session, or undefined when no live session has it. */
export async function findTask(src: ConsoleSources, taskId: string): Promise<{ task: TaskRow; session: Session } | undefined> {
  for (const s of visible(src)) {
    const record = await s.tasks.get(taskId).catch(() => undefined);
    if (record) return { task: { ...record, sessionRef: sessionHash(s.id), shownStatus: shown(record) }, session: s };
  }
  return undefined;
}

/** Every pending elicitation and sampling request of every session (queued, or held by a client natively), oldest first. */
export function inbox(src: ConsoleSources): InboxItem[] {
  const items: InboxItem[] = [];
  for (const s of visible(src)) {
    const sessionRef = sessionHash(s.id);
    for (const info of [...s.pending.list("elicitation"), ...s.pending.list("sampling")]) items.push({ sessionRef, info, forwarded: false });
    for (const info of s.pending.forwarded()) items.push({ sessionRef, info, forwarded: true });
  }
  return sortInbox(items);
}

/** Oldest first. */
export function sortInbox(items: InboxItem[]): InboxItem[] {
  return items.sort((a, b) => a.info.receivedAt - b.info.receivedAt || (a.info.requestId < b.info.requestId ? -1 : 1));
}

/**
 * One overview of several replicas: their sessions side by side (each named
 * with its replica), each server's session statuses added up, child
 * processes summed (admins only), the newest reconnection note and any last error kept.
 */
export function mergeOverviews(local: Overview, self: string, remote: Array<{ replica: string; value: Overview }>, unreachable: string[]): Overview {
  const servers = new Map<string, ServerRow>();
  const sessions: SessionRow[] = [];
  // Summed over replicas only when each one told it (an admin's view).
  let childProcesses: number | undefined = 0;
  for (const { replica, value } of [{ replica: self, value: local }, ...remote]) {
    childProcesses = childProcesses === undefined || value.childProcesses === undefined ? undefined : childProcesses + value.childProcesses;
    for (const row of value.sessions) sessions.push({ ...row, replica });
    for (const row of value.servers) {
      const have = servers.get(row.name);
      if (!have) {
        servers.set(row.name, { ...row, statuses: { ...row.statuses } });
        continue;
      }
      for (const [status, n] of Object.entries(row.statuses)) have.statuses[status] = (have.statuses[status] ?? 0) + n;
      have.lastError ??= row.lastError;
      if (row.reconnect && (!have.reconnect || row.reconnect.at > have.reconnect.at)) {
        have.reconnect = { ...row.reconnect, drops: row.reconnect.drops + (have.reconnect?.drops ?? 0) };
      } else if (row.reconnect && have.reconnect) have.reconnect = { ...have.reconnect, drops: have.reconnect.drops + row.reconnect.drops };
    }
  }
  sessions.sort((a, b) => a.createdAt - b.createdAt || (a.ref < b.ref ? -1 : 1));
  return {
    now: local.now,
    servers: [...servers.values()],
    sessions,
    ...(childProcesses === undefined ? {} : { childProcesses }),
    replicas: [self, ...remote.map((r) => r.replica)],
    unreachable,
  };
}

/** The live session whose hash is `ref`. */
export function sessionByRef(src: ConsoleSources, ref: string): Session | undefined {
  return visible(src).find((s) => sessionHash(s.id) === ref);
}
