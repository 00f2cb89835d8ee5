/** Single-use marks as `su:<key>` with a PX expiry (SET NX: one caller wins; Redis forgets them itself); see SingleUseStore. */
import type { SingleUseStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

export class RedisSingleUseStore implements SingleUseStore {
  constructor(private readonly conn: RedisConn) {}

  async use(key: string, expiresAt: number, now: number): Promise<boolean> {
    const name = this.conn.key("su", key);
    if (expiresAt <= now) return (await this.conn.run("check a single-use mark", (redis) => redis.exists(name))) === 0;
    const set = await this.conn.run("mark a key used", (redis) => redis.set(name, "1", "PX", Math.max(1, Math.ceil(expiresAt - now)), "NX"));
    return set === "OK";
  }

  async deleteExpired(): Promise<number> {
    return 0; // expired by Redis
  }
}
