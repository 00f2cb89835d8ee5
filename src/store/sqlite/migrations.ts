/**
 * The SQLite schema as an ordered list of steps; `PRAGMA user_version` says
 * which have run. Each step runs in the opening transaction, so a file is
 * always at one whole version. Append steps; never edit one that has shipped.
 *
 * Version 1 is the minimal layout (each record as JSON under its key) and
 * version 2 the indexed one: the first migration — new columns back-filled
 * from the JSON, with every row kept — is exercised from the start
 * (test/unit/store-sqlite.test.ts opens a version-1 file).
 *
 * Every row keeps its whole record as JSON (`record`); the other columns are
 * copies of the fields the hot lookups filter or sort on, each with an index.
 */
import type Database from "better-sqlite3";

export interface Migration {
  version: number;
  description: string;
  up(db: Database.Database): void;
}

/** A task that has not ended (the partial indexes and their queries use this exact text). */
export const ACTIVE_SQL = "status IN ('working', 'input_required')";

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "records as JSON by key: tasks, sessions, runtime-added servers",
    up(db) {
      db.exec(`
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE tasks (task_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, record TEXT NOT NULL);
        CREATE INDEX tasks_by_session ON tasks (session_id, task_id);
        CREATE TABLE sessions (session_id TEXT PRIMARY KEY, record TEXT NOT NULL);
        CREATE TABLE servers (name TEXT PRIMARY KEY, record TEXT NOT NULL);
      `);
    },
  },
  {
    version: 2,
    description: "indexed columns for hot lookups (back-filled), events, SSE replay, pending requests",
    up(db) {
      db.exec(`
        ALTER TABLE tasks ADD COLUMN kind TEXT NOT NULL DEFAULT 'tool';
        ALTER TABLE tasks ADD COLUMN server TEXT NOT NULL DEFAULT '';
        ALTER TABLE tasks ADD COLUMN status TEXT NOT NULL DEFAULT 'working';
        ALTER TABLE tasks ADD COLUMN upstream_task_id TEXT;
        ALTER TABLE tasks ADD COLUMN last_updated_at INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE tasks ADD COLUMN result_bytes INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE tasks ADD COLUMN retain_until INTEGER;
        UPDATE tasks SET
          kind = coalesce(json_extract(record, '$.kind'), 'tool'),
          server = json_extract(record, '$.server'),
          status = json_extract(record, '$.status'),
          upstream_task_id = json_extract(record, '$.upstreamTaskId'),
          last_updated_at = json_extract(record, '$.lastUpdatedAt'),
          result_bytes = coalesce(json_extract(record, '$.resultBytes'), 0),
          retain_until = json_extract(record, '$.retainUntil');
        CREATE INDEX tasks_by_upstream ON tasks (session_id, server, upstream_task_id) WHERE upstream_task_id IS NOT NULL;
        CREATE INDEX tasks_active ON tasks (task_id) WHERE ${ACTIVE_SQL};
        CREATE INDEX tasks_by_retain_until ON tasks (retain_until) WHERE retain_until IS NOT NULL;
        CREATE INDEX tasks_ended ON tasks (session_id, kind, last_updated_at, task_id, result_bytes) WHERE NOT ${ACTIVE_SQL};

        ALTER TABLE sessions ADD COLUMN last_activity_at INTEGER NOT NULL DEFAULT 0;
        UPDATE sessions SET last_activity_at = json_extract(record, '$.lastActivityAt');
        CREATE INDEX sessions_by_activity ON sessions (last_activity_at, session_id);

        ALTER TABLE servers ADD COLUMN added_at INTEGER NOT NULL DEFAULT 0;
        UPDATE servers SET added_at = json_extract(record, '$.addedAt');

        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO counters (name, value) VALUES ('events_total', 0);

        -- gseq: the gateway-wide order (eviction of the oldest across sessions); seq: the session's own.
        CREATE TABLE events (
          gseq INTEGER PRIMARY KEY AUTOINCREMENT,
          session_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          id TEXT NOT NULL,
          record TEXT NOT NULL
        );
        CREATE UNIQUE INDEX events_by_session ON events (session_id, seq);
        CREATE INDEX events_by_id ON events (session_id, id);
        CREATE TABLE event_sessions (
          session_id TEXT PRIMARY KEY,
          next_seq INTEGER NOT NULL,
          delivered_seq INTEGER NOT NULL,
          count INTEGER NOT NULL,
          evicted_session INTEGER NOT NULL,
          evicted_gateway INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE replay (
          session_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          stream_id TEXT NOT NULL,
          bytes INTEGER NOT NULL,
          message TEXT NOT NULL,
          PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX replay_by_stream ON replay (session_id, stream_id, seq);
        CREATE TABLE replay_sessions (session_id TEXT PRIMARY KEY, next_seq INTEGER NOT NULL, count INTEGER NOT NULL, bytes INTEGER NOT NULL) WITHOUT ROWID;

        CREATE TABLE pending (
          request_id TEXT PRIMARY KEY,
          session_id TEXT NOT NULL,
          kind TEXT NOT NULL,
          server TEXT NOT NULL,
          created_at INTEGER NOT NULL,
          expires_at INTEGER NOT NULL,
          record TEXT NOT NULL
        );
        CREATE INDEX pending_by_session ON pending (session_id, created_at, request_id);
        CREATE INDEX pending_by_expiry ON pending (expires_at);
      `);
    },
  },
  {
    version: 3,
    description: "started console logins (OpenID Connect state, take-once, expiring)",
    up(db) {
      db.exec(`
        CREATE TABLE logins (state TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
        CREATE INDEX logins_by_expiry ON logins (expires_at, state);
      `);
    },
  },
  {
    version: 4,
    description: "governance decision records (the audit trail), append-only with retention",
    up(db) {
      db.exec(`
        CREATE TABLE decisions (id TEXT PRIMARY KEY, at INTEGER NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
        CREATE INDEX decisions_by_time ON decisions (at, id);
      `);
    },
  },
  {
    version: 5,
    description: "rate-limit token buckets (gateway.rateLimits), shared by replicas on one file",
    up(db) {
      db.exec(`
        CREATE TABLE rate_buckets (key TEXT PRIMARY KEY, tokens REAL NOT NULL, at INTEGER NOT NULL, idle_until INTEGER NOT NULL) WITHOUT ROWID;
        CREATE INDEX rate_buckets_by_idle ON rate_buckets (idle_until);
      `);
    },
  },
  {
    version: 6,
    description: "approvals: tool calls waiting for (or past) a person's decision, by state and creation time",
    up(db) {
      db.exec(`
        CREATE TABLE approvals (id TEXT PRIMARY KEY, state TEXT NOT NULL, created_at INTEGER NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
        CREATE INDEX approvals_by_state ON approvals (state, created_at, id);
      `);
    },
  },
  {
    version: 7,
    description: "pins: the pinned definition of each upstream tool and a quarantined newer one (gateway.governance.pins)",
    up(db) {
      db.exec(`
        CREATE TABLE pins (server TEXT NOT NULL, tool TEXT NOT NULL, quarantined INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (server, tool)) WITHOUT ROWID;
        CREATE INDEX pins_quarantined ON pins (quarantined, server, tool);
      `);
    },
  },
  {
    version: 8,
    description: "activity: what happened at the gateway (tool calls, tasks, answers, connections, reloads, console actions), with retention",
    up(db) {
      db.exec(`
        CREATE TABLE activity (
          id TEXT PRIMARY KEY,
          at INTEGER NOT NULL,
          kind TEXT NOT NULL,
          server TEXT,
          session_hash TEXT,
          principal_hash TEXT,
          outcome TEXT,
          record TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX activity_by_time ON activity (at, id);
        CREATE INDEX activity_by_session ON activity (session_hash, at);
        CREATE INDEX activity_by_principal ON activity (principal_hash, at);
      `);
    },
  },
  {
    version: 9,
    description: "the vault: sealed upstream credentials per (principal, upstream, slot), started upstream OAuth flows (take-once, expiring)",
    up(db) {
      db.exec(`
        CREATE TABLE credentials (
          issuer TEXT NOT NULL,
          subject TEXT NOT NULL,
          upstream TEXT NOT NULL,
          slot TEXT NOT NULL,
          key_id TEXT NOT NULL,
          record TEXT NOT NULL,
          PRIMARY KEY (issuer, subject, upstream, slot)
        ) WITHOUT ROWID;
        CREATE INDEX credentials_by_key ON credentials (key_id);
        CREATE TABLE oauth_flows (state TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
        CREATE INDEX oauth_flows_by_expiry ON oauth_flows (expires_at, state);
      `);
    },
  },
  {
    version: 12,
    description: "decisions: indexes for the audit page's filters (principal, server and tool, outcome; each then time)",
    up(db) {
      db.exec(`
        CREATE INDEX decisions_by_principal ON decisions (json_extract(record, '$.principalHash'), at, id);
        CREATE INDEX decisions_by_call ON decisions (json_extract(record, '$.server'), json_extract(record, '$.tool'), at, id);
        CREATE INDEX decisions_by_outcome ON decisions (json_extract(record, '$.outcome'), at, id);
      `);
    },
  },
  {
    version: 13,
    description: "single_use: marks of keys used once until their expiry (a modern upstream's sealed requestState, across replicas)",
    up(db) {
      db.exec(`
        CREATE TABLE single_use (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;
        CREATE INDEX single_use_by_expiry ON single_use (expires_at);
      `);
    },
  },
  {
    version: 14,
    description: "leases: short exclusive holds shared by replicas (one refresh of an upstream grant at a time)",
    up(db) {
      db.exec(`CREATE TABLE leases (key TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;`);
    },
  },
  {
    version: 15,
    description:
      "SSE replay: one B-tree written per stored message (issue 27) — the stream index goes (a session's lookups scan its own rows, at most " +
      "its bound), and the per-session counters are read from the rows once per process instead of updated with every message",
    up(db) {
      db.exec(`
        DROP INDEX replay_by_stream;
        DROP TABLE replay_sessions;
      `);
    },
  },
];

/** The version a fully migrated file has. */
export const LATEST_VERSION = MIGRATIONS.at(-1)!.version;
