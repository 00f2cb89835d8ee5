/**
 * Who owns which session, and which replicas are alive (ADR 0013): heartbeat,
 * owner records, joining. See docs/design/store-and-replicas.md.
 */
import { createHmac, randomBytes } from "node:crypto";
import os from "node:os";
import type { Redis } from "ioredis";
import type { Clock, TimerHandle } from "../clock.js";
import type { Logger } from "../logging.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";

export interface MembershipOptions {
  redis: Redis;
  prefix: string;
  /** Stable name of this replica (config or host+pid). */
  replicaId?: string | undefined;
  advertiseUrl: string;
  /** gateway.cluster.secret: checked against the live replicas' at start (never stored itself). */
  secret: string;
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

/** What the secret check's HMAC is taken of (a new text would make old and new replicas refuse each other). */
const SECRET_CHECK_TEXT = "emceepee cluster secret check v1";

/**
 * Joins atomically unless a live replica conflicts. KEYS: secret check, replicas set, own heartbeat;
 * ARGV: check value, heartbeat key prefix, incarnation, advertised URL, lease ms.
 * → {'ok', ''} | {'url', holder} | {'secret', a live replica}.
 */
const JOIN_LUA = `
local live = nil
for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if m ~= ARGV[3] then
    local url = redis.call('GET', ARGV[2] .. m)
    if url then
      if url == ARGV[4] then return {'url', m} end
      live = live or m
    end
  end
end
local current = redis.call('GET', KEYS[1])
if live and current and current ~= ARGV[1] then return {'secret', live} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
redis.call('SADD', KEYS[2], ARGV[3])
return {'ok', ''}`;

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
  /** The wait before a second join attempt (close() ends it). */
  private joinWait: { timer: TimerHandle; resolve: () => void } | undefined;

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
    await this.join();
    this.schedule();
  }

  /** Writes the heartbeat and joins `P replicas`, unless the secret or URL conflicts with a live replica (see the header). */
  private async join(): Promise<void> {
    const { redis, advertiseUrl, leaseMs, logger } = this.o;
    const check = createHmac("sha256", this.o.secret).update(SECRET_CHECK_TEXT).digest("hex");
    for (let attempt = 0; ; attempt++) {
      const keys = [this.key("cluster", "secret-check"), this.key("replicas"), this.key("replica", this.incarnation)];
      const [verdict, other] = (await redis.eval(JOIN_LUA, 3, ...keys, check, this.key("replica", ""), this.incarnation, advertiseUrl, leaseMs)) as [
        string,
        string,
      ];
      if (verdict === "ok" || this.closed) return;
      if (attempt === 0) {
        // A replica that died without leaving keeps its heartbeat for up to a lease: only a live one renews it.
        logger.warn({ conflict: verdict, replica: other }, "cluster_join_conflict");
        await this.pause(leaseMs + Math.ceil(leaseMs / 3) + 200);
        // close() ended the wait: a closed replica writes no heartbeat or member record.
        if (this.closed) return;
        continue;
      }
      throw new GatewayError(
        ErrorCodes.CONFIG_INVALID,
        verdict === "url"
          ? `gateway.cluster.advertiseUrl ${advertiseUrl} is already advertised by the live replica ${other}; give each replica its own advertiseUrl (the address the other replicas reach this one at, e.g. http://<its host>:<its port>)`
          : `gateway.cluster.secret differs from the one the live replicas (e.g. ${other}) share (checked by an HMAC in ${this.key("cluster", "secret-check")}); give every replica the same secret (the same EMCEEPEE_CLUSTER_SECRET), or stop all replicas to change it`,
      );
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = this.o.clock.setTimeout(() => {
        this.joinWait = undefined;
        resolve();
      }, ms);
      this.joinWait = { timer, resolve };
    });
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
    if (this.joinWait) {
      this.o.clock.clearTimeout(this.joinWait.timer);
      this.joinWait.resolve();
      this.joinWait = undefined;
    }
    await this.o.redis.del(this.key("replica", this.incarnation)).catch(() => undefined);
    await this.o.redis.srem(this.key("replicas"), this.incarnation).catch(() => undefined);
  }
}
