/**
 * The Redis backend: one connection (conn.ts), the stores of each kind over
 * it, all keys under `keyPrefix`. Several gateway replicas can share it
 * (docs/adr/0013-replicas.md); every read-modify-write is one script or an
 * optimistic compare-and-set, so they never need a lock.
 */
import type { Clock } from "../../clock.js";
import type { Store } from "../contracts.js";
import { RedisConn, type OpenRedisOptions } from "./conn.js";
import { RedisActivityStore } from "./activity.js";
import { RedisApprovalStore } from "./approvals.js";
import { RedisPinStore } from "./pins.js";
import { RedisCredentialStore, RedisOAuthFlowStore } from "./credentials.js";
import { RedisLeaseStore } from "./leases.js";
import { RedisDecisionStore } from "./decisions.js";
import { RedisEventStore, RedisReplayStore } from "./events.js";
import { RedisLoginStateStore } from "./logins.js";
import { RedisSingleUseStore } from "./single-use.js";
import { RedisRateLimitStore } from "./rate-limits.js";
import { RedisPendingRequestStore, RedisServerStore, RedisSessionStore } from "./records.js";
import { RedisTaskStore } from "./tasks.js";

export { DEFAULT_KEY_PREFIX, redactUrl, type OpenRedisOptions } from "./conn.js";

export async function openRedisStore(url: string, clock: Clock, options: OpenRedisOptions = {}): Promise<Store> {
  const conn = await RedisConn.open(url, options);
  return {
    kind: "redis",
    location: conn.location,
    tasks: new RedisTaskStore(conn),
    sessions: new RedisSessionStore(conn, clock),
    events: new RedisEventStore(conn),
    pending: new RedisPendingRequestStore(conn),
    replay: new RedisReplayStore(conn),
    servers: new RedisServerStore(conn),
    logins: new RedisLoginStateStore(conn),
    singleUse: new RedisSingleUseStore(conn),
    rateLimits: new RedisRateLimitStore(conn),
    credentials: new RedisCredentialStore(conn),
    oauthFlows: new RedisOAuthFlowStore(conn),
    leases: new RedisLeaseStore(conn),
    decisions: new RedisDecisionStore(conn),
    approvals: new RedisApprovalStore(conn),
    pins: new RedisPinStore(conn),
    activity: new RedisActivityStore(conn),
    healthy: () => conn.healthy(),
    problem: () => conn.problem(),
    close: () => conn.close(),
  };
}
