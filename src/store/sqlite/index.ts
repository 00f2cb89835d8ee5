/**
 * The SQLite backend: one file (WAL), one connection, the stores of each
 * kind over it. Opening checks, migrates and write-probes the file
 * (sqlite/db.ts); failures are EMCP_STORE_UNAVAILABLE naming the file.
 */
import type { Clock } from "../../clock.js";
import type { Store } from "../contracts.js";
import { SqliteDb, type OpenSqliteOptions } from "./db.js";
import { SqliteEventStore } from "./events.js";
import { SqlitePendingRequestStore, SqliteServerStore, SqliteSessionStore } from "./records.js";
import { SqliteReplayStore } from "./replay.js";
import { SqliteTaskStore } from "./tasks.js";

export function openSqliteStore(file: string, clock: Clock, options: OpenSqliteOptions = {}): Store {
  const db = SqliteDb.open(file, options);
  return {
    kind: "sqlite",
    location: db.file,
    tasks: new SqliteTaskStore(db),
    sessions: new SqliteSessionStore(db, clock),
    events: new SqliteEventStore(db),
    pending: new SqlitePendingRequestStore(db),
    replay: new SqliteReplayStore(db),
    servers: new SqliteServerStore(db),
    healthy: async () => db.healthy(),
    close: async () => db.close(),
  };
}
