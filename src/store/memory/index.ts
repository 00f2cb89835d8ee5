/**
 * The memory backend: every kind of state in Maps with the same indexes and
 * semantics as the durable backends (test/store/contract.ts proves it), and
 * nothing survives the process. The default for tests and for library use.
 */
import type { Clock } from "../../clock.js";
import type { Store } from "../contracts.js";
import { MemoryActivityStore } from "./activity.js";
import { MemoryApprovalStore } from "./approvals.js";
import { MemoryPinStore } from "./pins.js";
import { MemoryCredentialStore, MemoryOAuthFlowStore } from "./credentials.js";
import { MemoryLeaseStore } from "./leases.js";
import { MemoryDecisionStore } from "./decisions.js";
import { MemoryEventStore } from "./events.js";
import { MemoryGuard } from "./guard.js";
import { MemoryLoginStateStore } from "./logins.js";
import { MemorySingleUseStore } from "./single-use.js";
import { MemoryRateLimitStore } from "./rate-limits.js";
import { MemoryPendingRequestStore, MemoryServerStore, MemorySessionStore } from "./records.js";
import { MemoryReplayStore } from "./replay.js";
import { MemoryTaskStore } from "./tasks.js";

export function createMemoryStore(clock: Clock): Store {
  const guard = new MemoryGuard();
  return {
    kind: "memory",
    location: "memory",
    tasks: new MemoryTaskStore(guard),
    sessions: new MemorySessionStore(guard, clock),
    events: new MemoryEventStore(guard),
    pending: new MemoryPendingRequestStore(guard),
    replay: new MemoryReplayStore(guard),
    servers: new MemoryServerStore(guard),
    logins: new MemoryLoginStateStore(guard),
    singleUse: new MemorySingleUseStore(guard),
    rateLimits: new MemoryRateLimitStore(guard),
    credentials: new MemoryCredentialStore(guard),
    oauthFlows: new MemoryOAuthFlowStore(guard),
    leases: new MemoryLeaseStore(guard),
    decisions: new MemoryDecisionStore(guard),
    approvals: new MemoryApprovalStore(guard),
    pins: new MemoryPinStore(guard),
    activity: new MemoryActivityStore(guard),
    healthy: async () => !guard.isClosed,
    close: async () => guard.close(),
  };
}
