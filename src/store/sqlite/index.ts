/**
 * The SQLite backend: one file (WAL), one connection, the stores of each
 * kind over it. Opening checks, migrates and write-probes the file
 * (sqlite/db.ts); failures are EMCP_STORE_UNAVAILABLE naming the file. With
 * `exclusive` (a gateway serving from it) the file is claimed for this
 * process until close (sqlite/owner.ts), before it is opened: a second
 * gateway on it is refused without touching it.
 */
import type { Clock } from "../../clock.js";
import type { Store } from "../contracts.js";
import { SqliteDb, type OpenSqliteOptions } from "./db.js";
import { SqliteActivityStore } from "./activity.js";
import { SqliteApprovalStore } from "./approvals.js";
import { SqlitePinStore } from "./pins.js";
import { SqliteCredentialStore, SqliteOAuthFlowStore } from "./credentials.js";
import { SqliteLeaseStore } from "./leases.js";
import { SqliteEventStore } from "./events.js";
import { SqliteDecisionStore } from "./decisions.js";
import { SqliteLoginStateStore } from "./logins.js";
import { SqliteSingleUseStore } from "./single-use.js";
import { SqliteRateLimitStore } from "./rate-limits.js";
import { StoreOwnership } from "./owner.js";
import { SqlitePendingRequestStore, SqliteServerStore, SqliteSessionStore } from "./records.js";
import { SqliteReplayStore } from "./replay.js";
import { SqliteTaskStore } from "./tasks.js";

export interface OpenSqliteStoreOptions extends OpenSqliteOptions {
  /** Claim the file for this process until close; another claim fails with EMCP_STORE_UNAVAILABLE naming the holder. @default false */
  exclusive?: boolean;
}

export function openSqliteStore(file: string, clock: Clock, options: OpenSqliteStoreOptions = {}): Store {
  const { exclusive, ...dbOptions } = options;
  // The claim comes first: a refused gateway (maybe another version) neither migrates nor writes the holder's file.
  const owner = exclusive ? StoreOwnership.claim(file, clock.now()) : undefined;
  let db: SqliteDb;
  try {
    db = SqliteDb.open(file, { ...dbOptions, clock });
  } catch (err) {
    owner?.release();
    throw err;
  }
  try {
    owner?.bind(db);
  } catch (err) {
    db.close();
    owner?.release();
    throw err;
  }
  const replay = new SqliteReplayStore(db);
  return {
    kind: "sqlite",
    location: db.file,
    tasks: new SqliteTaskStore(db),
    sessions: new SqliteSessionStore(db, clock),
    events: new SqliteEventStore(db),
    pending: new SqlitePendingRequestStore(db),
    replay,
    servers: new SqliteServerStore(db),
    logins: new SqliteLoginStateStore(db),
    singleUse: new SqliteSingleUseStore(db),
    rateLimits: new SqliteRateLimitStore(db),
    credentials: new SqliteCredentialStore(db),
    oauthFlows: new SqliteOAuthFlowStore(db),
    leases: new SqliteLeaseStore(db),
    decisions: new SqliteDecisionStore(db),
    approvals: new SqliteApprovalStore(db),
    pins: new SqlitePinStore(db),
    activity: new SqliteActivityStore(db),
    healthy: async () => db.healthy(),
    problem: () => db.problem(),
    announce: async ({ port }) => owner?.announce(port),
    close: async () => {
      try {
        db.close(); // the writes of this turn (SSE appends among them) still commit
      } finally {
        owner?.release();
      }
    },
  };
}
