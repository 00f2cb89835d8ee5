/**
 * PendingRequests (design EV-6, MF-11): the server→client requests
 * (elicitations, sampling) held for a session's client, with their timeouts.
 * See docs/design/sessions-and-events.md, "How the code keeps it".
 */
import type { CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { PendingRequestStore } from "../store/contracts.js";
import type { EventSystem } from "./event-system.js";

export interface PendingKinds {
  elicitation: { params: ElicitRequest["params"]; result: ElicitResult };
  sampling: { params: CreateMessageRequest["params"]; result: CreateMessageResult };
}
export type PendingKind = keyof PendingKinds;

export interface PendingInfo<K extends PendingKind = PendingKind> {
  requestId: string;
  kind: K;
  server: string;
  /** Epoch ms. */
  receivedAt: number;
  /** Epoch ms. */
  expiresAt: number;
  params: PendingKinds[K]["params"];
}

interface Entry<K extends PendingKind> extends PendingInfo<K> {
  resolve(result: PendingKinds[K]["result"]): void;
  reject(error: Error): void;
  timer: TimerHandle;
  detach(): void;
  /** Its record is stored: from then on the client may see and answer it. */
  stored: boolean;
}

/** Abort reason of a request the gateway itself withdraws (a consent that arrived meanwhile): its message is the event's reason. */
export class Withdrawn extends Error {}

/** Who answered a request: the session's MCP client (meta tools, or natively), or a person in the web console. */
export type AnsweredBy = "client" | "console";

/** How many answered request ids are remembered for the "answered by" message. */
const ANSWERED_MEMORY = 256;

/** `gateway.pendingRequests.*` (src/config/schema.ts has each default). */
export interface PendingRequestsOptions {
  /** Long by default: humans answer elicitations. */
  timeoutMs: number;
  maxPerSession: number;
}

/** When closing a session's pending requests. */
export interface PendingCloseOptions {
  /** The gateway is shutting down: the records stay, and the next start rejects them with an event. @default false */
  keepRecords?: boolean;
}

export class PendingRequests {
  private readonly entries = new Map<string, Entry<PendingKind>>();
  /** Store deletes nobody awaits (expiry, upstream cancel, server gone): close() waits for them. */
  private readonly writes = new Set<Promise<void>>();
  /** Recently answered ids → who answered, or "server" for those their upstream withdrew (oldest first; bounded by ANSWERED_MEMORY). */
  private readonly answered = new Map<string, { kind: PendingKind; by: AnsweredBy | "server"; outcome: string }>();
  /** Requests the session's client holds natively (read-only here). */
  private readonly forwardedEntries = new Map<string, PendingInfo>();

  constructor(
    private readonly sessionId: string,
    private readonly options: PendingRequestsOptions,
    private readonly store: PendingRequestStore,
    private readonly events: EventSystem,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
  ) {}

  /**
   * Holds a request until the client answers. The returned promise settles
   * with the client's answer, or rejects on expiry / server loss / close, or
   * when its record cannot be stored (EMCP_STORE_UNAVAILABLE).
   * `signal` is the upstream's cancellation of its own request.
   */
  add<K extends PendingKind>(kind: K, server: string, params: PendingKinds[K]["params"], signal?: AbortSignal): Promise<PendingKinds[K]["result"]> {
    if (this.entries.size >= this.options.maxPerSession) {
      return Promise.reject(
        new GatewayError(ErrorCodes.LIMIT_REACHED, `too many pending client requests in this session (max ${this.options.maxPerSession}); answer some first`),
      );
    }
    if (signal?.aborted) return Promise.reject(new Error("cancelled by the upstream"));
    return new Promise((resolve, reject) => {
      const requestId = this.newId();
      const now = this.clock.now();
      const timeoutMs = this.options.timeoutMs;
      // Deferred: when the connection drops, the SDK aborts handlers just before
      // reporting the close, and a server-gone request must read as rejected.
      const onAbort = () =>
        queueMicrotask(() => {
          const withdrawn = signal?.reason instanceof Withdrawn;
          // The upstream gave up on its request (cancelled, or timed out on its side): an answer now would go nowhere.
          const entry = this.entries.get(requestId);
          if (!withdrawn && entry) this.remember(entry, "server", upstreamReason(signal?.reason));
          this.settle(requestId, `${kind}_expired`, { reason: withdrawn ? signal.reason.message : "cancelled by the upstream" }, new Error("cancelled"));
        });
      const entry: Entry<K> = {
        requestId,
        kind,
        server,
        receivedAt: now,
        expiresAt: now + timeoutMs,
        params,
        resolve,
        reject,
        stored: false,
        timer: this.clock.setTimeout(() => {
          this.events.logger?.warn({ requestId, server, timeoutMs }, `${kind}_timeout`);
          this.settle(
            requestId,
            `${kind}_expired`,
            { reason: `no answer within ${timeoutMs}ms` },
            new Error(`${kind} request timed out after ${timeoutMs}ms waiting for the client`),
          );
        }, timeoutMs),
        detach: () => signal?.removeEventListener("abort", onAbort),
      };
      this.entries.set(requestId, entry);
      signal?.addEventListener("abort", onAbort, { once: true });
      const record = {
        requestId,
        sessionId: this.sessionId,
        kind,
        server,
        params: params as Record<string, unknown>,
        createdAt: now,
        expiresAt: now + timeoutMs,
      };
      void this.track(
        this.store.put(record).then(
          async () => {
            if (this.entries.get(requestId) !== entry) return this.forget(requestId); // settled while it was being stored
            entry.stored = true;
            this.events.add(`${kind}_request`, server, { requestId, params: params });
            // Operator log events (design EV-13): elicitation_received / _responded / _timeout (sampling_* alike).
            this.events.logger?.info({ requestId, server }, `${kind}_received`);
          },
          (err: unknown) => {
            this.events.logger?.error({ requestId, server, err: errorMessage(err) }, "pending_store_write_failed");
            if (this.entries.get(requestId) !== entry) return;
            this.remove(entry);
            reject(err instanceof Error ? err : new Error(errorMessage(err)));
          },
        ),
      );
    });
  }

  /** Delivers the client's answer. Throws UNKNOWN_REQUEST if not pending here. */
  async respond<K extends PendingKind>(kind: K, requestId: string, result: PendingKinds[K]["result"], by: AnsweredBy = "client"): Promise<PendingInfo<K>> {
    const entry = this.take(kind, requestId);
    this.markAnswered(entry, by, kind === "elicitation" ? (result as ElicitResult).action : "answered");
    await this.forget(requestId);
    entry.resolve(result);
    this.events.logger?.info({ requestId, server: entry.server, durationMs: this.clock.now() - entry.receivedAt }, `${kind}_responded`);
    return publicInfo(entry);
  }

  /** Rejects one request on the client's behalf; the upstream gets an error. */
  async reject(kind: PendingKind, requestId: string, reason: string, by: AnsweredBy = "client"): Promise<void> {
    const entry = this.take(kind, requestId);
    this.markAnswered(entry, by, "rejected");
    await this.forget(requestId);
    entry.reject(new Error(reason));
  }

  get<K extends PendingKind>(kind: K, requestId: string): PendingInfo<K> {
    const entry = this.entries.get(requestId);
    if (!entry || entry.kind !== kind || !entry.stored) throw this.unknown(kind, requestId);
    return publicInfo(entry) as PendingInfo<K>;
  }

  list<K extends PendingKind>(kind: K, server?: string): PendingInfo<K>[] {
    const out: PendingInfo<K>[] = [];
    for (const e of this.entries.values()) {
      if (e.stored && e.kind === kind && (server === undefined || e.server === server)) out.push(publicInfo(e) as PendingInfo<K>);
    }
    return out;
  }

  /** Requests from `server` waiting now. */
  waitingFrom(server: string): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.server === server) n++;
    return n;
  }

  /**
   * Runs `send` (a request sent to the client natively) and lists it as
   * forwarded until it settles; observers hear it come and go. It cannot be
   * answered here: the client holds it.
   */
  async forward<K extends PendingKind>(kind: K, server: string, params: PendingKinds[K]["params"], send: () => Promise<PendingKinds[K]["result"]>) {
    const now = this.clock.now();
    const info: PendingInfo<K> = { requestId: this.newId(), kind, server, receivedAt: now, expiresAt: now + this.options.timeoutMs, params };
    this.forwardedEntries.set(info.requestId, info);
    this.events.announce({ type: "request_forwarded", server, data: { requestId: info.requestId, kind } });
    let outcome = "failed";
    try {
      const result = await send();
      outcome = kind === "elicitation" ? (result as ElicitResult).action : "answered";
      return result;
    } finally {
      this.forwardedEntries.delete(info.requestId);
      this.events.announce({ type: `${kind}_answered`, server, data: { requestId: info.requestId, by: "client", outcome, forwarded: true } });
    }
  }

  /** The requests the session's client holds natively now (see forward()). */
  forwarded(): PendingInfo[] {
    return [...this.forwardedEntries.values()];
  }

  get size(): number {
    return this.entries.size;
  }

  /** The server went away: reject everything it was waiting on. */
  rejectServer(server: string, reason: string): number {
    let n = 0;
    for (const e of [...this.entries.values()]) {
      if (e.server !== server) continue;
      this.settle(e.requestId, `${e.kind}_rejected`, { reason }, new Error(reason));
      n++;
    }
    return n;
  }

  /**
   * Session closing: rejects all without emitting events, waits for the
   * store writes in flight, then deletes the session's records — unless
   * `keepRecords` (the next start rejects them, with an event).
   */
  async close(reason = "session closed", options: PendingCloseOptions = {}): Promise<void> {
    for (const e of [...this.entries.values()]) {
      this.remove(e);
      e.reject(new Error(reason));
    }
    while (this.writes.size) await Promise.allSettled([...this.writes]);
    if (options.keepRecords) return;
    try {
      await this.store.deleteBySession(this.sessionId);
    } catch (err) {
      this.events.logger?.error({ err: errorMessage(err) }, "pending_store_write_failed");
    }
  }

  private take<K extends PendingKind>(kind: K, requestId: string): Entry<K> {
    const entry = this.entries.get(requestId);
    if (!entry || entry.kind !== kind || !entry.stored) throw this.unknown(kind, requestId);
    this.remove(entry);
    return entry as unknown as Entry<K>;
  }

  /** Who answered `requestId`, while it is remembered. */
  answeredBy(requestId: string): AnsweredBy | undefined {
    const by = this.answered.get(requestId)?.by;
    return by === "server" ? undefined : by;
  }

  private markAnswered(entry: Entry<PendingKind>, by: AnsweredBy, outcome: string): void {
    this.remember(entry, by, outcome);
    this.events.announce({ type: `${entry.kind}_answered`, server: entry.server, data: { requestId: entry.requestId, by, outcome } });
  }

  private remember(entry: Entry<PendingKind>, by: AnsweredBy | "server", outcome: string): void {
    this.answered.set(entry.requestId, { kind: entry.kind, by, outcome });
    if (this.answered.size > ANSWERED_MEMORY) this.answered.delete(this.answered.keys().next().value!);
  }

  private unknown(kind: PendingKind, requestId: string): GatewayError {
    const answered = this.answered.get(requestId);
    if (!answered || answered.kind !== kind) return unknownRequest(kind, requestId);
    if (answered.by === "server") {
      return new GatewayError(
        ErrorCodes.UNKNOWN_REQUEST,
        `${kind} request '${requestId}' was withdrawn by its server before it was answered (${answered.outcome}); nothing was sent. ` +
          "Its call got the server's own outcome (see get_task / get_task_result); call the tool again to be asked again.",
        { details: { requestId, withdrawn: true } },
      );
    }
    const where = answered.by === "console" ? "by a person in the web console" : "by this session's client";
    return new GatewayError(
      ErrorCodes.UNKNOWN_REQUEST,
      `${kind} request '${requestId}' was already answered ${where} (${answered.outcome}); the first answer wins, nothing to do. Its task (if any) goes on with that answer.`,
      { details: { requestId, answeredBy: answered.by } },
    );
  }

  private settle(
    requestId: string,
    eventType: "elicitation_expired" | "sampling_expired" | "elicitation_rejected" | "sampling_rejected",
    data: Record<string, unknown>,
    error: Error,
  ): void {
    const entry = this.entries.get(requestId);
    if (!entry) return;
    this.remove(entry);
    if (entry.stored) {
      void this.track(this.forget(requestId));
      this.events.add(eventType, entry.server, { requestId, ...data });
    }
    entry.reject(error);
  }

  private remove(entry: Entry<PendingKind>): void {
    this.clock.clearTimeout(entry.timer);
    entry.detach();
    this.entries.delete(entry.requestId);
  }

  /** Deletes the record (a failure is logged: the next start withdraws whatever is left). */
  private async forget(requestId: string): Promise<void> {
    try {
      await this.store.delete(requestId);
    } catch (err) {
      this.events.logger?.error({ requestId, err: errorMessage(err) }, "pending_store_write_failed");
    }
  }

  private track(p: Promise<void>): Promise<void> {
    this.writes.add(p);
    void p.then(() => this.writes.delete(p));
    return p;
  }
}

function publicInfo<K extends PendingKind>(e: Entry<K>): PendingInfo<K> {
  return { requestId: e.requestId, kind: e.kind, server: e.server, receivedAt: e.receivedAt, expiresAt: e.expiresAt, params: e.params };
}

/** The upstream's reason for cancelling its request (notifications/cancelled's `reason`), as it may be shown: one line, at most 200 characters. */
function upstreamReason(reason: unknown): string {
  const text = typeof reason === "string" ? reason : reason instanceof Error ? reason.message : "";
  const line = text.replace(/[\p{Cc}\p{Cf}]/gu, " ").trim();
  if (!line) return "it cancelled its request";
  return `it cancelled its request: ${line.length > 200 ? `${line.slice(0, 200)}…` : line}`;
}

function unknownRequest(kind: PendingKind, requestId: string): GatewayError {
  const tool = kind === "elicitation" ? "get_elicitations" : "get_sampling_requests";
  return new GatewayError(
    ErrorCodes.UNKNOWN_REQUEST,
    `no pending ${kind} request '${requestId}' in this session (it may have been answered, expired or withdrawn by its server); call ${tool} to see what is pending`,
    { details: { requestId } },
  );
}
