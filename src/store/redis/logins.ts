/** Started console logins in Redis (scripts.ts: loginPut, loginTake, loginDeleteExpired): take-once, expiring, bounded, shared by every replica. */
import type { LoginStateRecord, LoginStateStore } from "../contracts.js";
import type { RedisConn } from "./conn.js";

export class RedisLoginStateStore implements LoginStateStore {
  constructor(private readonly conn: RedisConn) {}

  async put(record: LoginStateRecord, max: number): Promise<void> {
    await this.conn.script("store a started login", "loginPut", record.state, record.createdAt, record.expiresAt, JSON.stringify(record), max);
  }

  async take(state: string, now: number): Promise<LoginStateRecord | undefined> {
    const json = (await this.conn.script("take a started login", "loginTake", state, now)) as string | null;
    return json === null ? undefined : (JSON.parse(json) as LoginStateRecord);
  }

  async deleteExpired(now: number): Promise<number> {
    return (await this.conn.script("delete expired logins", "loginDeleteExpired", now)) as number;
  }

  async count(): Promise<number> {
    return this.conn.run("count started logins", (r) => r.zcard(this.conn.key("lexp")));
  }
}
