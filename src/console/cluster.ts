/**
 * The console across replicas (docs/adr/0012, "Across replicas"; ADR 0013).
 * Each replica's console serves its own read model as JSON under
 * /console/cluster/ — only to other replicas (the cluster secret, checked
 * here after the usual guards; anyone else gets 404) — and runs the actions
 * it is sent on the sessions it holds, through the console's own answer and
 * cancel paths. The console a person uses merges what every live replica
 * answers (peers that do not answer in time are named on the page, not
 * waited for) and sends an action to the replica whose session it is.
 *
 * Routes (GET unless said): version (this replica's own change counter, for
 * the live pages elsewhere), overview, tasks (?session&server&status),
 * task (?id), inbox, POST answer {requestId, form}, POST cancel {taskId}.
 * Every route but version answers for the person asking, named in the
 * X-Emceepee-Console-As header (CONSOLE_AS_HEADER, base64url JSON): all
 * sessions for an admin or the operator, else only the principal's (issuer +
 * subject); without it, 400.
 */
import type http from "node:http";
import type { PeerReplica, Peers } from "../cluster/index.js";
import { errorMessage } from "../errors.js";
import { readBody } from "../http/json-rpc.js";
import type { Logger } from "../logging.js";
import { FormError, SECURITY_HEADERS } from "./http.js";
import type { InboxItem, Overview, TaskFilter, TaskRow } from "./read-model.js";

export const CLUSTER_PREFIX = "/console/cluster/";
/** Whom a cluster read or action is for (see the header above). */
export const CONSOLE_AS_HEADER = "x-emceepee-console-as";

/**
 * Whom a replica reads and acts for: `all` sessions (an admin, the operator) or
 * only `principal`'s; the principal (when the person has one) is named either
 * way, so what runs elsewhere records who did it.
 */
export interface ConsoleScope {
  all: boolean;
  principal?: { issuer: string; subject: string };
}

export function encodeScope(scope: ConsoleScope): string {
  const p = scope.principal;
  return Buffer.from(JSON.stringify({ all: scope.all, ...(p ? { issuer: p.issuer, subject: p.subject } : {}) })).toString("base64url");
}

/** The scope a replica's request names; undefined when it names none, a malformed one, or neither all nor a principal. */
export function decodeScope(value: string | string[] | undefined): ConsoleScope | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  try {
    const o = JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as unknown;
    if (!o || typeof o !== "object") return undefined;
    const { all, issuer, subject } = o as Record<string, unknown>;
    if (typeof all !== "boolean") return undefined;
    const principal = typeof issuer === "string" && issuer !== "" && typeof subject === "string" && subject !== "" ? { issuer, subject } : undefined;
    if (!all && !principal) return undefined;
    return principal ? { all, principal } : { all };
  } catch {
    return undefined;
  }
}

/** What a replica's answer route reports. */
export type AnswerOutcome = { outcome: "answered" } | { outcome: "not_here" } | { outcome: "gone"; by: string } | { outcome: "invalid"; message: string };

export type CancelOutcome = { outcome: "ok" | "noop" | "not_here" };

/** This replica's side: what the routes read and do, for `scope` (index.ts binds them to the local console). */
export interface LocalConsole {
  version(): number;
  overview(scope: ConsoleScope): Promise<Overview>;
  tasks(scope: ConsoleScope, filter: TaskFilter): Promise<TaskRow[]>;
  task(scope: ConsoleScope, taskId: string): Promise<TaskRow | undefined>;
  inbox(scope: ConsoleScope): InboxItem[];
  answer(scope: ConsoleScope, requestId: string, form: URLSearchParams, from: string | undefined): Promise<AnswerOutcome>;
  cancel(scope: ConsoleScope, taskId: string, from: string | undefined): Promise<CancelOutcome>;
}

/** A row as it leaves this replica: never the session id (a bearer secret), only its hash. */
function outbound(row: TaskRow, full: boolean): TaskRow {
  const out: TaskRow = { ...row, sessionId: "" };
  if (!full) {
    // The list shows neither; a task's page asks for it alone.
    out.toolArgs = {};
    delete out.result;
  }
  return out;
}

/** A replica's JSON body (a malformed one is a 400, like a malformed form). */
async function readJson(req: http.IncomingMessage, maxBody: number): Promise<Record<string, unknown>> {
  try {
    const body = JSON.parse(await readBody(req, maxBody)) as unknown;
    if (body && typeof body === "object" && !Array.isArray(body)) return body as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw new FormError("a replica's console action is a JSON object");
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { ...SECURITY_HEADERS, "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

/** Serves a /console/cluster/ request: only to a replica (else 404, as if the route did not exist). */
export async function serveCluster(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  peers: Peers | undefined,
  local: LocalConsole,
  maxBody: number,
): Promise<void> {
  if (!peers?.fromPeer(req)) return sendJson(res, 404, { error: `no console route ${path}` });
  const q = new URL(req.url ?? "/", "http://console.invalid").searchParams;
  const route = `${req.method ?? ""} ${path.slice(CLUSTER_PREFIX.length)}`;
  if (route === "GET version") return sendJson(res, 200, { replica: peers.self, version: local.version() });
  const scope = decodeScope(req.headers[CONSOLE_AS_HEADER]);
  if (!scope) return sendJson(res, 400, { error: `name whom the console asks for in ${CONSOLE_AS_HEADER}: all, or a principal` });
  const from = typeof req.headers["x-emceepee-replica"] === "string" ? req.headers["x-emceepee-replica"] : undefined;
  switch (route) {
    case "GET overview":
      return sendJson(res, 200, await local.overview(scope));
    case "GET tasks": {
      const filter = { session: q.get("session") ?? undefined, server: q.get("server") ?? undefined, status: q.get("status") ?? undefined };
      return sendJson(
        res,
        200,
        (await local.tasks(scope, filter)).map((r) => outbound(r, false)),
      );
    }
    case "GET task": {
      const row = await local.task(scope, q.get("id") ?? "");
      return row ? sendJson(res, 200, outbound(row, true)) : sendJson(res, 404, { error: "no such task here" });
    }
    case "GET inbox":
      return sendJson(res, 200, local.inbox(scope));
    case "POST answer": {
      const body = await readJson(req, maxBody);
      if (typeof body.requestId !== "string" || typeof body.form !== "string") return sendJson(res, 400, { error: "send {requestId, form}" });
      return sendJson(res, 200, await local.answer(scope, body.requestId, new URLSearchParams(body.form), from));
    }
    case "POST cancel": {
      const body = await readJson(req, maxBody);
      if (typeof body.taskId !== "string") return sendJson(res, 400, { error: "send {taskId}" });
      return sendJson(res, 200, await local.cancel(scope, body.taskId, from));
    }
    default:
      return sendJson(res, 404, { error: `no console route ${route}` });
  }
}

/** What the other replicas answered to one read; the ones that did not, by incarnation. */
export interface Gathered<T> {
  results: Array<{ replica: string; value: T }>;
  unreachable: string[];
}

/** The other replicas' view of the console, read over the cluster channel. */
export class RemoteConsole {
  constructor(
    private readonly peers: Peers,
    private readonly logger: Logger,
  ) {}

  get self(): string {
    return this.peers.self;
  }

  /** The headers of a request for `scope` (whom it is for, and which replica asks). */
  private headers(scope: ConsoleScope | undefined): Record<string, string> {
    return { "x-emceepee-replica": this.peers.self, ...(scope ? { [CONSOLE_AS_HEADER]: encodeScope(scope) } : {}) };
  }

  /** GET `path` for `scope` on every other live replica at once; failures are listed, not thrown. */
  async gather<T>(path: string, scope: ConsoleScope | undefined): Promise<Gathered<T>> {
    const others = await this.peers.others().catch((err: unknown) => {
      this.logger.warn({ err: errorMessage(err) }, "console_replicas_unknown");
      return undefined;
    });
    if (!others) return { results: [], unreachable: ["(the replica list: Redis did not answer)"] };
    const replies = await Promise.all(others.map(async (peer) => ({ peer, value: await this.read<T>(peer, path, scope) })));
    const out: Gathered<T> = { results: [], unreachable: [] };
    for (const { peer, value } of replies) {
      if (value === undefined) out.unreachable.push(peer.id);
      else out.results.push({ replica: peer.id, value });
    }
    return out;
  }

  /** A fingerprint of the other replicas' change counters: it changes when anything changed on any of them (or one came or went). */
  async versions(): Promise<string> {
    const { results, unreachable } = await this.gather<{ version?: unknown }>(`${CLUSTER_PREFIX}version`, undefined);
    return JSON.stringify([results.map((r) => [r.replica, r.value.version]), unreachable]);
  }

  /** The first replica that finds `path` for `scope` (200); undefined when none does. */
  async find<T>(path: string, scope: ConsoleScope): Promise<{ replica: string; value: T } | undefined> {
    const { results } = await this.gather<T>(path, scope);
    return results[0];
  }

  /**
   * POSTs an action for `scope` to each other replica in turn until one
   * holds its session or task: that replica and its outcome; "unreachable" when none did and some
   * replica did not answer (it may hold it); undefined when every one said
   * "not here".
   */
  async act<T extends { outcome: string }>(
    path: string,
    body: unknown,
    scope: ConsoleScope,
  ): Promise<{ replica: string; value: T } | "unreachable" | undefined> {
    let missed = false;
    const others = await this.peers.others().catch((err: unknown) => {
      this.logger.warn({ err: errorMessage(err) }, "console_replicas_unknown");
      return undefined;
    });
    if (!others) return "unreachable";
    for (const peer of others) {
      const reply = await this.peers.call(peer, "POST", path, body, this.headers(scope)).catch((err: unknown) => {
        this.logger.warn({ err: errorMessage(err), replica: peer.id, path }, "console_replica_action_failed");
        return undefined;
      });
      const value = reply?.status === 200 ? (reply.body as T | undefined) : undefined;
      if (value && value.outcome !== "not_here") return { replica: peer.id, value };
      if (!value) missed = true;
    }
    return missed ? "unreachable" : undefined;
  }

  private async read<T>(peer: PeerReplica, path: string, scope: ConsoleScope | undefined): Promise<T | undefined> {
    try {
      const reply = await this.peers.call(peer, "GET", path, undefined, this.headers(scope));
      if (reply.status === 200 && reply.body !== undefined) return reply.body as T;
      if (reply.status !== 404) this.logger.warn({ replica: peer.id, path, status: reply.status }, "console_replica_read_failed");
    } catch (err) {
      this.logger.warn({ err: errorMessage(err), replica: peer.id, path }, "console_replica_read_failed");
    }
    return undefined;
  }
}
