/**
 * Who owns which session, and which replicas are alive (docs/adr/0013):
 * `P replica:<incarnation>` = advertised URL with a TTL of leaseMs, renewed
 * every third of it (the heartbeat); `P own:<session>` = the incarnation that
 * holds the session's live state, with a TTL of the session idle timeout
 * (refreshed, at most once per lease period, while requests arrive). The
 * owner is live exactly while its heartbeat key exists. Adoption moves an
 * owner record by compare-and-set, so exactly one replica wins a dead
 * owner's session.
 *
 * start() writes the heartbeat and drops the previous incarnation of the same
 * replicaId (a restarted replica's old sessions are adoptable at once);
 * close() stops the timer and deletes the heartbeat (so the others adopt
 * without waiting for the lease).
 *
 * `P replicas` is the set of incarnations that joined, so that the live ones
 * can be listed (the web console reads every replica) without scanning the
 * keyspace: a member is live while its heartbeat key exists; a member whose
 * heartbeat expired (SIGKILL) is removed by the next listing.
 */
import { randomBytes } from "node:crypto";
import os from "node:os";
import type { Redis } from "ioredis";
import type { Clock, TimerHandle } from "../clock.js";
import type { Logger } from "../logging.js";
import { errorMessage } from "../errors.js";

export interface MembershipOptions {
  redis: Redis;
  prefix: string;
  /** Stable name of this replica (config or host+pid). */
  replicaId?: string | undefined;
  advertiseUrl: string;
  leaseMs: number;
  /** TTL of owner records (the session idle timeout). */
  ownerTtlMs: number;
  clock: Clock;
  logger: Logger;
}

/** A compare-and-set on a string key: ARGV old, new, ttl ms → 1 when moved. */
const MOVE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`;

/** Sessions whose last owner-record refresh is remembered before old entries are dropped. */
const MAX_TRACKED = 10_000;

export class Membership {
  /** This process: replicaId plus a random suffix per start. */
  readonly incarnation: string;
  private readonly replicaId: string;
  private timer: TimerHandle | undefined;
  private closed = false;
  /** Owner records refreshed recently: session → when. */
  private readonly refreshed = new Map<string, number>();

  constructor(private readonly o: MembershipOptions) {
    this.replicaId = o.replicaId ?? `${os.hostname()}-${process.pid}`;
    this.incarnation = `${this.replicaId}.${randomBytes(4).toString("hex")}`;
  }

  private key(...parts: string[]): string {
    return this.o.prefix + parts.join(":");
  }

  async start(): Promise<void> {
    const { redis } = this.o;
    const previous = await redis.getset(this.key("replica-of", this.replicaId), this.incarnation);
    if (previous && previous !== this.incarnation) {
      // Our predecessor under the same replicaId is gone (we are it, restarted): its sessions are adoptable now.
      await redis.del(this.key("replica", previous));
      await redis.srem(this.key("replicas"), previous);
      this.o.logger.info({ previous }, "cluster_predecessor_released");
    }
    await this.beat();
    await redis.sadd(this.key("replicas"), this.incarnation);
    this.schedule();
  }

  /** Every live replica (this one included) with its advertised URL; drops members whose heartbeat expired. */
  async liveReplicas(): Promise<Array<{ id: string; url: string }>> {
    const { redis } = this.o;
    const members = (await redis.smembers(this.key("replicas"))).sort();
    if (members.length === 0) return [];
    const urls = await redis.mget(members.map((m) => this.key("replica", m)));
    const dead = members.filter((_, i) => urls[i] === null);
    if (dead.length > 0) await redis.srem(this.key("replicas"), ...dead);
    return members.flatMap((id, i) => (urls[i] ? [{ id, url: urls[i] }] : []));
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = this.o.clock.setTimeout(
      () => {
        this.beat()
          .catch((err: unknown) => this.o.logger.warn({ err: errorMessage(err) }, "cluster_heartbeat_failed"))
          .finally(() => this.schedule());
      },
      Math.max(100, Math.floor(this.o.leaseMs / 3)),
    );
  }

  private async beat(): Promise<void> {
    if (this.closed) return;
    await this.o.redis.set(this.key("replica", this.incarnation), this.o.advertiseUrl, "PX", this.o.leaseMs);
  }

  /** The owner incarnation of a session, if recorded. */
  async ownerOf(sessionId: string): Promise<string | undefined> {
    return (await this.o.redis.get(this.key("own", sessionId))) ?? undefined;
  }

  /** A live replica's advertised URL; undefined when its heartbeat expired. */
  async urlOf(incarnation: string): Promise<string | undefined> {
    return (await this.o.redis.get(this.key("replica", incarnation))) ?? undefined;
  }

  /** Records this replica as the owner of a new session (overwrites: the id is new). */
  async own(sessionId: string): Promise<void> {
    await this.o.redis.set(this.key("own", sessionId), this.incarnation, "PX", this.o.ownerTtlMs);
    this.refreshed.set(sessionId, this.o.clock.now());
  }

  /** Claims a session no one owns; false when another replica did first. */
  async claim(sessionId: string): Promise<boolean> {
    const ok = await this.o.redis.set(this.key("own", sessionId), this.incarnation, "PX", this.o.ownerTtlMs, "NX");
    return ok === "OK";
  }

  /** Moves a session from a dead owner to this replica; false when another replica adopted it first. */
  async adopt(sessionId: string, from: string): Promise<boolean> {
    const moved = await this.o.redis.eval(MOVE_LUA, 1, this.key("own", sessionId), from, this.incarnation, this.o.ownerTtlMs);
    return moved === 1;
  }

  /** A request of an owned session arrived: keeps its owner record alive (one write per lease period at most). */
  seen(sessionId: string): void {
    const now = this.o.clock.now();
    const last = this.refreshed.get(sessionId);
    if (last !== undefined && now - last < this.o.leaseMs) return;
    if (this.refreshed.size >= MAX_TRACKED) {
      // Entries older than a lease only skip one refresh write; dropping them bounds the map.
      for (const [id, at] of this.refreshed) if (now - at >= this.o.leaseMs) this.refreshed.delete(id);
    }
    this.refreshed.set(sessionId, now);
    this.o.redis.eval(MOVE_LUA, 1, this.key("own", sessionId), this.incarnation, this.incarnation, this.o.ownerTtlMs).catch((err: unknown) => {
      this.o.logger.warn({ err: errorMessage(err) }, "cluster_owner_refresh_failed");
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.o.clock.clearTimeout(this.timer);
    this.timer = undefined;
    await this.o.redis.del(this.key("replica", this.incarnation)).catch(() => undefined);
    await this.o.redis.srem(this.key("replicas"), this.incarnation).catch(() => undefined);
  }
}
