/**
 * The vault's sealed credentials and started OAuth flows in Redis.
 * Credentials: one hash per principal (`cr:<issuer,subject as JSON>`, field
 * `<upstream,slot as JSON>` → record JSON) and the set `crp` of those hashes
 * (what a key rotation walks). Flows: the take-once login scripts
 * (scripts.ts) under the sub-prefix `of:`, shared by every replica.
 */
import type { CredentialKey, CredentialRecord, CredentialStore, OAuthFlowRecord, OAuthFlowStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

const field = (k: CredentialKey) => JSON.stringify([k.upstream, k.slot]);
const byUpstreamAndSlot = (a: CredentialRecord, b: CredentialRecord) => (field(a) < field(b) ? -1 : field(a) > field(b) ? 1 : 0);

export class RedisCredentialStore implements CredentialStore {
  constructor(private readonly conn: RedisConn) {}

  private hash(issuer: string, subject: string): string {
    return this.conn.key("cr", JSON.stringify([issuer, subject]));
  }

  async put(r: CredentialRecord): Promise<void> {
    const hash = this.hash(r.issuer, r.subject);
    await this.conn.run("store a credential", async (redis) => {
      await redis.multi().hset(hash, field(r), JSON.stringify(r)).sadd(this.conn.key("crp"), hash).exec();
    });
  }

  async replaceIf(r: CredentialRecord, expectedSealed: string): Promise<boolean> {
    const replaced = await this.conn.script(
      "re-seal a credential",
      "credentialReplaceIf",
      this.hash(r.issuer, r.subject),
      field(r),
      expectedSealed,
      JSON.stringify(r),
    );
    return replaced === 1;
  }

  async get(key: CredentialKey): Promise<CredentialRecord | undefined> {
    const json = await this.conn.run("read a credential", (redis) => redis.hget(this.hash(key.issuer, key.subject), field(key)));
    return json === null ? undefined : (JSON.parse(json) as CredentialRecord);
  }

  async delete(key: CredentialKey): Promise<boolean> {
    return (await this.conn.run("delete a credential", (redis) => redis.hdel(this.hash(key.issuer, key.subject), field(key)))) > 0;
  }

  async listByPrincipal(issuer: string, subject: string): Promise<CredentialRecord[]> {
    const all = await this.conn.run("list a principal's credentials", (redis) => redis.hvals(this.hash(issuer, subject)));
    return all.map((json) => JSON.parse(json) as CredentialRecord).sort(byUpstreamAndSlot);
  }

  async listNotSealedWith(keyId: string, limit: number): Promise<CredentialRecord[]> {
    return this.conn.run("list credentials to re-seal", async (redis) => {
      const out: CredentialRecord[] = [];
      if (limit <= 0) return out;
      for (const hash of await redis.smembers(this.conn.key("crp"))) {
        for (const json of await redis.hvals(hash)) {
          const r = JSON.parse(json) as CredentialRecord;
          if (r.keyId !== keyId) out.push(r);
          if (out.length >= limit) return out;
        }
      }
      return out;
    });
  }
}

export class RedisOAuthFlowStore implements OAuthFlowStore {
  constructor(private readonly conn: RedisConn) {}

  async put(record: OAuthFlowRecord, max: number): Promise<void> {
    await this.conn.scriptUnder("of:", "store a started OAuth flow", "loginPut", record.state, record.createdAt, record.expiresAt, JSON.stringify(record), max);
  }

  async take(state: string, now: number): Promise<OAuthFlowRecord | undefined> {
    const json = (await this.conn.scriptUnder("of:", "take a started OAuth flow", "loginTake", state, now)) as string | null;
    return json === null ? undefined : (JSON.parse(json) as OAuthFlowRecord);
  }

  async peek(state: string, now: number): Promise<OAuthFlowRecord | undefined> {
    const json = await this.conn.run("read a started OAuth flow", (redis) => redis.get(this.conn.key("of:l", state)));
    const r = json === null ? undefined : (JSON.parse(json) as OAuthFlowRecord);
    return r && r.expiresAt > now ? r : undefined;
  }

  async deleteExpired(now: number): Promise<number> {
    return (await this.conn.scriptUnder("of:", "delete expired OAuth flows", "loginDeleteExpired", now)) as number;
  }

  async count(): Promise<number> {
    return this.conn.run("count started OAuth flows", (r) => r.zcard(this.conn.key("of:lexp")));
  }
}
