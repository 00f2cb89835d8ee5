/**
 * Pinned tool definitions in Redis: one hash `pins` (JSON [server, tool] →
 * record JSON). pinIfAbsent is HSETNX; quarantine and accept are an
 * optimistic compare-and-set (the field still holds the JSON read), retried
 * on a lost race, as the approvals store does.
 */
import type { PinnedDefinition, PinRecord, PinStore } from "../contracts.js";
import { accepted, byServerTool, matchesQuery, withPending } from "../pin-update.js";
import type { RedisConn } from "./conn.js";

const SWAP = `if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) return 1 end return 0`;
const MAX_ATTEMPTS = 20;
const fieldOf = (server: string, tool: string) => JSON.stringify([server, tool]);

export class RedisPinStore implements PinStore {
  constructor(private readonly conn: RedisConn) {}

  private get key(): string {
    return this.conn.key("pins");
  }

  async get(server: string, tool: string): Promise<PinRecord | undefined> {
    const json = await this.conn.run("read a pinned tool definition", (r) => r.hget(this.key, fieldOf(server, tool)));
    return json === null ? undefined : (JSON.parse(json) as PinRecord);
  }

  async list(query: { server?: string; quarantined?: boolean } = {}): Promise<PinRecord[]> {
    const all = await this.conn.run("list pinned tool definitions", (r) => r.hvals(this.key));
    return all
      .map((json) => JSON.parse(json) as PinRecord)
      .filter((r) => matchesQuery(r, query))
      .sort(byServerTool);
  }

  async pinIfAbsent(server: string, tool: string, first: PinnedDefinition): Promise<PinRecord> {
    const field = fieldOf(server, tool);
    return this.conn.run("pin a tool definition", async (r) => {
      await r.hsetnx(this.key, field, JSON.stringify({ server, tool, pinned: first } satisfies PinRecord));
      return JSON.parse((await r.hget(this.key, field))!) as PinRecord;
    });
  }

  private async swap(what: string, server: string, tool: string, change: (r: PinRecord) => PinRecord | undefined): Promise<PinRecord | undefined> {
    const field = fieldOf(server, tool);
    return this.conn.run(what, async (redis) => {
      for (let i = 0; i < MAX_ATTEMPTS; i++) {
        const json = await redis.hget(this.key, field);
        if (json === null) return undefined;
        const had = JSON.parse(json) as PinRecord;
        const next = change(had);
        if (!next || next === had) return next;
        if ((await redis.eval(SWAP, 1, this.key, field, json, JSON.stringify(next))) === 1) return next;
      }
      throw new Error(`the pin of '${tool}' on '${server}' kept changing under ${MAX_ATTEMPTS} attempts to update it`);
    });
  }

  async quarantine(server: string, tool: string, seen: PinnedDefinition): Promise<boolean> {
    return (await this.swap("quarantine a tool definition", server, tool, (r) => withPending(r, seen))) !== undefined;
  }

  async accept(server: string, tool: string, digest: string, by: string, at: number): Promise<PinRecord | undefined> {
    return this.swap("accept a tool definition", server, tool, (r) => accepted(r, digest, by, at));
  }
}
