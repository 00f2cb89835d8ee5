/**
 * The one contract suite every store backend must pass (memory, SQLite and
 * Redis), in the style of undici's cache-store tests: each backend's test file
 * calls `storeContract(name, factory)`, and the cases are the same for all
 * (what only one backend has, its file or its connection, is tested beside
 * it in that file). A backend is interchangeable with the others exactly when
 * it passes this.
 *
 * Each test gets a fresh store from the factory and closes it afterwards. The
 * cases live per kind of state in the files next to this one: tasks; events
 * and SSE replay; sessions, pending requests, runtime-added servers and the
 * store's lifecycle; started console logins; governance decisions; pinned tool definitions; rate-limit buckets; the
 * vault's credentials and started upstream OAuth flows; leases; activity.
 */
import { describe } from "node:test";
import type { Store } from "../../src/store/contracts.js";
import type { ManualClock } from "../fixtures/manual-clock.js";
import { activityContract } from "./contract-activity.js";
import { approvalContract } from "./contract-approvals.js";
import { credentialContract } from "./contract-credentials.js";
import { decisionContract } from "./contract-decisions.js";
import { eventContract } from "./contract-events.js";
import { leaseContract } from "./contract-leases.js";
import { loginContract } from "./contract-logins.js";
import { pinContract } from "./contract-pins.js";
import { rateLimitContract } from "./contract-rate-limits.js";
import { singleUseContract } from "./contract-single-use.js";
import { recordContract } from "./contract-records.js";
import { taskContract } from "./contract-tasks.js";

export interface StoreUnderTest {
  store: Store;
  /** The clock the store was opened with (touch() without a time reads it). */
  clock: ManualClock;
  /** Removes what the backend left behind (temp files); the store is closed first. */
  cleanup?: () => Promise<void>;
}

export type StoreFactory = () => Promise<StoreUnderTest>;

export function storeContract(name: string, factory: StoreFactory): void {
  describe(`store contract: ${name}`, () => {
    taskContract(factory);
    eventContract(factory);
    recordContract(factory);
    loginContract(factory);
    decisionContract(factory);
    rateLimitContract(factory);
    singleUseContract(factory);
    credentialContract(factory);
    leaseContract(factory);
    approvalContract(factory);
    pinContract(factory);
    activityContract(factory);
  });
}
