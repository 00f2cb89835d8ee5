/**
 * The cluster's SessionRouter (docs/adr/0013, "Routing"): for a request of a
 * session this process does not hold, find the owner in Redis and forward the
 * request there, or claim/adopt the session and let the endpoint resume it
 * here. Forwarded requests (carrying the shared secret) are never forwarded
 * again. Failures of Redis answer 503 with the store's error. An owner's URL
 * is reused for a second without asking Redis again; a forward that finds it
 * gone falls back to the full lookup (and adoption). An id with no owner and
 * no stored session is claimed by no one: nothing is written for it. An
 * owner whose address refuses the connection is gone (its process ended; a
 * SIGKILL leaves its heartbeat for up to a lease): its session is adopted at
 * once. A modern retry of a call parked on another replica is forwarded to it
 * (toReplica), and a modern caller's task request to the replica that holds
 * its task host (toTaskHost).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Clock, TimerHandle } from "../clock.js";
import type { Logger } from "../logging.js";
import { sessionHash } from "../logging.js";
import { BodyTooLargeError, readBody, sendErrorReply, sendJsonRpcError } from "../http/json-rpc.js";
import type { RouteDecision, SessionRouter } from "../http/mcp-endpoint.js";
import { settleAdopted, type AdoptDeps } from "./adopt.js";
import { carriesSecret, type Forwarder } from "./forward.js";
import type { Membership } from "./membership.js";

export interface RouterOptions {
  membership: Membership;
  forwarder: Forwarder;
  secret: string;
  leaseMs: number;
  maxBodyBytes: number;
  adopt: AdoptDeps;
  clock: Clock;
  logger: Logger;
}

/** How often a dead-looking owner's heartbeat is checked while waiting for it to expire. */
const POLL_MS = 100;
/** How long an owner's URL is reused without asking Redis (at most a third of the lease). */
const CACHE_MS = 1_000;
/** Sessions whose owner URL is remembered. */
const MAX_CACHED = 10_000;
/** Owner changes followed before giving up on one request. */
const MAX_HOPS = 4;

export class ClusterRouter implements SessionRouter {
  private closed = false;
  private readonly sleeps = new Set<{ timer: TimerHandle; resolve: () => void }>();
  /** Owner URLs by session, briefly: saves the two Redis reads per forwarded request of a busy session. */
  private readonly owners = new Map<string, { url: string; at: number }>();

  constructor(private readonly o: RouterOptions) {}

  get replica(): string {
    return this.o.membership.incarnation;
  }

  fromReplica(req: IncomingMessage): boolean {
    return this.isForwarded(req);
  }

  /**
   * A modern retry of a call parked on `owner` (ADR 0032, "MRTR bridges"):
   * forwarded there when its heartbeat is live; "gone" at once, without
   * waiting out its lease, when it is not or refuses the connection (the
   * parked call died with it: nothing to wait for).
   */
  async toReplica(req: IncomingMessage, res: ServerResponse, owner: string, body: string): Promise<"answered" | "gone"> {
    try {
      const url = await this.o.membership.urlOf(owner);
      if (url === undefined) return "gone";
      if ((await this.o.forwarder.forward(req, res, url, body)) === "answered") return "answered";
      this.o.logger.warn({ owner, url }, "cluster_parked_owner_unreachable");
      return "gone";
    } catch (err) {
      sendErrorReply(res, 503, err, this.o.logger);
      return "answered";
    }
  }

  created(sessionId: string): Promise<void> {
    return this.o.membership.own(sessionId);
  }

  seen(sessionId: string): void {
    this.o.membership.seen(sessionId);
  }

  async route(req: IncomingMessage, res: ServerResponse, sessionId: string): Promise<RouteDecision> {
    const { membership, logger } = this.o;
    const forwarded = this.isForwarded(req);
    let body: string | undefined;
    try {
      const known = forwarded ? undefined : this.cached(sessionId);
      if (known) {
        if (req.method === "POST") body = await readBody(req, this.o.maxBodyBytes);
        if ((await this.o.forwarder.forward(req, res, known.url, body)) === "answered") return { kind: "answered" };
        this.owners.delete(sessionId);
      }
      for (let hop = 0; hop < MAX_HOPS; hop++) {
        const owner = await membership.ownerOf(sessionId);
        if (owner === membership.incarnation) return { kind: "local", body };
        if (owner === undefined) {
          // No owner: a session from before the cluster (its record exists) is claimed; for an id that names no
          // session nothing is written (the endpoint answers 404), so bogus ids leave no key behind.
          if ((await this.o.adopt.store.sessions.get(sessionId)) === undefined) return { kind: "local", body };
          if (!(await membership.claim(sessionId))) continue;
          await settleAdopted(this.o.adopt, sessionId, undefined);
          return { kind: "local", body };
        }
        const url = await membership.urlOf(owner);
        if (url === undefined) {
          if (!(await this.adoptFrom(sessionId, owner))) continue;
          return { kind: "local", body };
        }
        if (forwarded) {
          sendJsonRpcError(res, 503, -32000, `Session '${sessionId}' is held by replica ${owner} now; send the request again`, { "Retry-After": "1" });
          return { kind: "answered" };
        }
        if (req.method === "POST" && body === undefined) body = await readBody(req, this.o.maxBodyBytes);
        this.remember(sessionId, url);
        const outcome = await this.o.forwarder.forward(req, res, url, body);
        if (outcome === "answered") return { kind: "answered" };
        this.owners.delete(sessionId);
        logger.warn({ sessionHash: sessionHash(sessionId), owner, url, outcome }, "cluster_owner_unreachable");
        if (outcome === "refused") {
          if (await this.adoptFrom(sessionId, owner)) return { kind: "local", body };
          continue;
        }
        if (!(await this.waitGone(owner))) {
          sendJsonRpcError(
            res,
            502,
            -32000,
            `Session '${sessionId}' is held by replica ${owner} at ${url}, which this replica cannot reach while it still reports itself alive; check the network between replicas (gateway.cluster.advertiseUrl)`,
          );
          return { kind: "answered" };
        }
      }
      sendJsonRpcError(res, 503, -32000, `Session '${sessionId}' changed owner replica repeatedly; send the request again`, { "Retry-After": "1" });
      return { kind: "answered" };
    } catch (err) {
      if (err instanceof BodyTooLargeError) sendJsonRpcError(res, 413, -32600, err.message);
      else sendErrorReply(res, 503, err, logger);
      return { kind: "answered" };
    }
  }

  /**
   * A 2026-07-28 caller's task request (ADR 0032, "Tasks across eras"): its
   * task host is a session one replica holds, as a 2025 session is. Passed to
   * the live holder ("answered"); held here ("local") when no one holds it
   * (claimed), or when its holder is gone — its heartbeat expired, or nothing
   * listens at its address — adopted at once with the calls that ran there
   * failed (settleAdopted), so the caller's next tasks/get says so rather
   * than `working` until the task's TTL. A request another replica passed on
   * is never passed on again: as in route(), one that finds the host held by
   * a live replica other than this one (it moved while the request travelled)
   * is answered 503 with Retry-After, not served from this replica's stale copy.
   */
  async toTaskHost(req: IncomingMessage, res: ServerResponse, sessionId: string, body: string): Promise<"answered" | "local"> {
    const { membership, logger } = this.o;
    const forwarded = this.isForwarded(req);
    try {
      for (let hop = 0; hop < MAX_HOPS; hop++) {
        const owner = await membership.ownerOf(sessionId);
        if (owner === membership.incarnation) {
          membership.seen(sessionId);
          return "local";
        }
        if (owner === undefined) {
          if (!(await membership.claim(sessionId))) continue;
          if ((await this.o.adopt.store.sessions.get(sessionId)) !== undefined) await settleAdopted(this.o.adopt, sessionId, undefined);
          return "local";
        }
        const url = await membership.urlOf(owner);
        if (forwarded && url !== undefined) {
          sendJsonRpcError(res, 503, -32000, `The tasks of this caller are held by replica ${owner} now; send the request again`, { "Retry-After": "1" });
          return "answered";
        }
        const outcome = url === undefined ? "refused" : await this.o.forwarder.forward(req, res, url, body);
        if (outcome === "answered") return "answered";
        if (outcome === "unreachable") {
          logger.warn({ sessionHash: sessionHash(sessionId), owner, url }, "cluster_owner_unreachable");
          if (!(await this.waitGone(owner))) {
            sendJsonRpcError(
              res,
              502,
              -32000,
              `The tasks of this caller are held by replica ${owner} at ${url}, which this replica cannot reach while it still reports itself alive; check the network between replicas (gateway.cluster.advertiseUrl)`,
            );
            return "answered";
          }
        }
        if (await this.adoptFrom(sessionId, owner)) return "local";
      }
      sendJsonRpcError(res, 503, -32000, `The tasks of this caller changed owner replica repeatedly; send the request again`, { "Retry-After": "1" });
      return "answered";
    } catch (err) {
      sendErrorReply(res, 503, err, logger);
      return "answered";
    }
  }

  /** Moves a session from its gone owner to this replica and settles what died there; false when another replica took it first. */
  private async adoptFrom(sessionId: string, owner: string): Promise<boolean> {
    if (!(await this.o.membership.adopt(sessionId, owner))) return false;
    this.o.logger.warn({ sessionHash: sessionHash(sessionId), from: owner }, "cluster_session_adopted");
    await settleAdopted(this.o.adopt, sessionId, owner);
    return true;
  }

  /** A live owner's URL seen less than CACHE_MS ago (a dead one is found out by the failed forward). */
  private cached(sessionId: string): { url: string } | undefined {
    const hit = this.owners.get(sessionId);
    if (!hit) return undefined;
    if (this.o.clock.now() - hit.at < Math.min(CACHE_MS, this.o.leaseMs / 3)) return hit;
    this.owners.delete(sessionId);
    return undefined;
  }

  private remember(sessionId: string, url: string): void {
    if (this.owners.size >= MAX_CACHED) this.owners.delete(this.owners.keys().next().value!);
    this.owners.set(sessionId, { url, at: this.o.clock.now() });
  }

  /** Waits for a replica's heartbeat to expire (at most a lease and a renewal period); false if it stays alive. */
  private async waitGone(owner: string): Promise<boolean> {
    const deadline = this.o.clock.now() + this.o.leaseMs + Math.ceil(this.o.leaseMs / 3) + POLL_MS;
    while (!this.closed && this.o.clock.now() < deadline) {
      if ((await this.o.membership.urlOf(owner)) === undefined) return true;
      await this.sleep(POLL_MS);
    }
    return false;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry = {
        timer: this.o.clock.setTimeout(() => {
          this.sleeps.delete(entry);
          resolve();
        }, ms),
        resolve,
      };
      this.sleeps.add(entry);
    });
  }

  private isForwarded(req: IncomingMessage): boolean {
    return carriesSecret(req, this.o.secret);
  }

  close(): void {
    this.closed = true;
    for (const s of this.sleeps) {
      this.o.clock.clearTimeout(s.timer);
      s.resolve();
    }
    this.sleeps.clear();
  }
}
