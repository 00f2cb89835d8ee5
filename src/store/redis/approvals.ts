/**
 * Approvals in Redis: one hash `ap` (id → record JSON). update() is an
 * optimistic compare-and-set: read, apply, and write only if the stored JSON
 * is still the one read (one small script), retried on a lost race.
 */
import { applyApprovalUpdate, byCreation } from "../approval-update.js";
import type { ApprovalRecord, ApprovalState, ApprovalStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

/** Sets the field only if it still holds the JSON read (ARGV[2]); 1 when set. */
const SWAP = `if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) return 1 end return 0`;
const MAX_ATTEMPTS = 20;

export class RedisApprovalStore implements ApprovalStore {
  constructor(private readonly conn: RedisConn) {}

  private get key(): string {
    return this.conn.key("ap");
  }

  async create(r: ApprovalRecord): Promise<void> {
    await this.conn.run("store an approval", (redis) => redis.hset(this.key, r.id, JSON.stringify(r)));
  }

  async get(id: string): Promise<ApprovalRecord | undefined> {
    const json = await this.conn.run("read an approval", (redis) => redis.hget(this.key, id));
    return json === null ? undefined : (JSON.parse(json) as ApprovalRecord);
  }

  async list(query: { states?: readonly ApprovalState[]; limit?: number } = {}): Promise<ApprovalRecord[]> {
    const all = await this.conn.run("list approvals", (redis) => redis.hvals(this.key));
    return all
      .map((json) => JSON.parse(json) as ApprovalRecord)
      .filter((r) => query.states === undefined || query.states.includes(r.state))
      .sort(byCreation)
      .slice(0, query.limit ?? Infinity);
  }

  async update(
    id: string,
    patch: Parameters<ApprovalStore["update"]>[1],
    condition: Parameters<ApprovalStore["update"]>[2],
  ): Promise<ApprovalRecord | undefined> {
    return this.conn.run("update an approval", async (redis) => {
      for (let i = 0; i < MAX_ATTEMPTS; i++) {
        const json = await redis.hget(this.key, id);
        if (json === null) return undefined;
        const next = applyApprovalUpdate(JSON.parse(json) as ApprovalRecord, patch, condition);
        if (!next) return undefined;
        if ((await redis.eval(SWAP, 1, this.key, id, json, JSON.stringify(next))) === 1) return next;
      }
      throw new Error(`approval ${id} kept changing under ${MAX_ATTEMPTS} attempts to update it`);
    });
  }

  async deleteEndedBefore(before: number): Promise<number> {
    return this.conn.run("delete ended approvals", async (redis) => {
      const ended = (await redis.hvals(this.key))
        .map((json) => JSON.parse(json) as ApprovalRecord)
        .filter((r) => r.state !== "pending" && r.createdAt < before);
      return ended.length ? redis.hdel(this.key, ...ended.map((r) => r.id)) : 0;
    });
  }
}
