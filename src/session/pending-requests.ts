/**
 * PendingRequests (seed 000 §1.2-1.3, seed 003 §4): server→client requests
 * (elicitations, sampling) held for the session's client. Each has its own
 * timeout; its timer is cleared on every exit path (response, expiry, upstream
 * cancellation, server gone, session close). Category 4: shown in every tool
 * response while pending.
 */
import type { CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, IdGenerator, TimerHandle } from "../clock.js";
import { ErrorCodes, GatewayError } from "../errors.js";
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
}

/** `gateway.pendingRequests.*` (src/config/schema.ts has each default). */
export interface PendingRequestsOptions {
  /** Long by default: humans answer elicitations. */
  timeoutMs: number;
  maxPerSession: number;
}

export class PendingRequests {
  private readonly entries = new Map<string, Entry<PendingKind>>();

  constructor(
    private readonly options: PendingRequestsOptions,
    private readonly events: EventSystem,
    private readonly clock: Clock,
    private readonly newId: IdGenerator,
  ) {}

  /**
   * Holds a request until the client answers. The returned promise settles
   * with the client's answer, or rejects on expiry / server loss / close.
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
      const onAbort = () => queueMicrotask(() => this.settle(requestId, `${kind}_expired`, { reason: "cancelled by the upstream" }, new Error("cancelled")));
      const entry: Entry<K> = {
        requestId,
        kind,
        server,
        receivedAt: now,
        expiresAt: now + timeoutMs,
        params,
        resolve,
        reject,
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
      this.events.add(`${kind}_request`, server, { requestId, params: params });
      // Seed 003 "Log Events": elicitation_received / _responded / _timeout (sampling_* alike).
      this.events.logger?.info({ requestId, server }, `${kind}_received`);
    });
  }

  /** Delivers the client's answer. Throws UNKNOWN_REQUEST if not pending here. */
  respond<K extends PendingKind>(kind: K, requestId: string, result: PendingKinds[K]["result"]): PendingInfo<K> {
    const entry = this.take(kind, requestId);
    entry.resolve(result);
    this.events.logger?.info({ requestId, server: entry.server, durationMs: this.clock.now() - entry.receivedAt }, `${kind}_responded`);
    return publicInfo(entry);
  }

  /** Rejects one request on the client's behalf; the upstream gets an error. */
  reject(kind: PendingKind, requestId: string, reason: string): void {
    const entry = this.take(kind, requestId);
    entry.reject(new Error(reason));
  }

  get<K extends PendingKind>(kind: K, requestId: string): PendingInfo<K> {
    const entry = this.entries.get(requestId);
    if (!entry || entry.kind !== kind) throw unknownRequest(kind, requestId);
    return publicInfo(entry) as PendingInfo<K>;
  }

  list<K extends PendingKind>(kind: K, server?: string): PendingInfo<K>[] {
    const out: PendingInfo<K>[] = [];
    for (const e of this.entries.values()) {
      if (e.kind === kind && (server === undefined || e.server === server)) out.push(publicInfo(e) as PendingInfo<K>);
    }
    return out;
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

  /** Session closing: reject all without emitting events. */
  close(reason = "session closed"): void {
    for (const e of [...this.entries.values()]) {
      this.remove(e);
      e.reject(new Error(reason));
    }
  }

  private take<K extends PendingKind>(kind: K, requestId: string): Entry<K> {
    const entry = this.entries.get(requestId);
    if (!entry || entry.kind !== kind) throw unknownRequest(kind, requestId);
    this.remove(entry);
    return entry as unknown as Entry<K>;
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
    this.events.add(eventType, entry.server, { requestId, ...data });
    entry.reject(error);
  }

  private remove(entry: Entry<PendingKind>): void {
    this.clock.clearTimeout(entry.timer);
    entry.detach();
    this.entries.delete(entry.requestId);
  }
}

function publicInfo<K extends PendingKind>(e: Entry<K>): PendingInfo<K> {
  return { requestId: e.requestId, kind: e.kind, server: e.server, receivedAt: e.receivedAt, expiresAt: e.expiresAt, params: e.params };
}

function unknownRequest(kind: PendingKind, requestId: string): GatewayError {
  const tool = kind === "elicitation" ? "get_elicitations" : "get_sampling_requests";
  return new GatewayError(
    ErrorCodes.UNKNOWN_REQUEST,
    `no pending ${kind} request '${requestId}' in this session (it may have been answered, expired or withdrawn by its server); call ${tool} to see what is pending`,
    { details: { requestId } },
  );
}
