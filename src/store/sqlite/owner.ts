/**
 * Exclusive ownership of a SQLite store file by one gateway (docs/adr/0007,
 * "One gateway per file"). A second gateway on the same file would take the
 * first's running calls for leftovers of a crash and fail them, so a serving
 * gateway holds an EXCLUSIVE transaction on a side file `<db>-owner` for as
 * long as the store is open. The lock is SQLite's own (POSIX advisory locks):
 * the kernel drops it when the process dies, `kill -9` included, so a stale
 * holder never blocks a restart and no heartbeat is needed. The lock is taken
 * before the main file is opened for writing (no migration, check or write
 * touches a file another gateway serves from). Who holds it (pid, host, port,
 * since when) is a row in the main file's `meta` table, read read-only by the
 * gateway that is refused, for its message.
 */
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type Database from "better-sqlite3";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { SqliteDb } from "./db.js";
import { storeError } from "./db.js";
import { openSqliteDatabase } from "./driver.js";

/** What the refused gateway is told about the holder. */
export interface OwnerInfo {
  pid: number;
  hostname: string;
  startedAt: number;
  port?: number;
}

const OWNER_KEY = "owner";

export class StoreOwnership {
  /** The open main file, once bound: the holder row is written there. */
  private db: SqliteDb | undefined;

  private constructor(
    private readonly lock: Database.Database,
    private info: OwnerInfo,
  ) {}

  /** The side file that carries the lock. */
  static lockFile(file: string): string {
    return `${file}-owner`;
  }

  /**
   * Takes the lock without waiting, before the main file is opened. Throws
   * EMCP_STORE_UNAVAILABLE naming the file, the holder and the fix when
   * another process (or another store in this one) holds it. `bind` then
   * records this process as the holder.
   */
  static claim(file: string, now: number): StoreOwnership {
    const absolute = path.resolve(file);
    const lockFile = StoreOwnership.lockFile(absolute);
    let lock: Database.Database | undefined;
    try {
      mkdirSync(path.dirname(absolute), { recursive: true });
      lock = openSqliteDatabase(lockFile, { timeout: 0 });
      lock.exec("BEGIN EXCLUSIVE");
    } catch (err) {
      lock?.close();
      if ((err as { code?: unknown }).code === "SQLITE_BUSY") throw inUse(absolute);
      throw storeError(absolute, `could not take ownership (lock file ${lockFile})`, err);
    }
    return new StoreOwnership(lock, { pid: process.pid, hostname: os.hostname(), startedAt: now });
  }

  /** Records this process as the holder in the opened main file. */
  bind(db: SqliteDb): void {
    this.db = db;
    this.record();
  }

  /** Adds the port this gateway serves on to the holder row. */
  announce(port: number): void {
    this.info = { ...this.info, port };
    this.record();
  }

  /** Drops the lock (the row stays: the next holder overwrites it). Idempotent. */
  release(): void {
    if (!this.lock.open) return;
    this.lock.close(); // closing the connection rolls back and unlocks
  }

  private record(): void {
    const db = this.db;
    db?.write("record the store's owner", () => db.stmt("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)").run(OWNER_KEY, JSON.stringify(this.info)));
  }
}

/** The refusal: which file, who holds it (read read-only: the holder's file is not touched), what to do. */
function inUse(file: string): GatewayError {
  let holder: OwnerInfo | undefined;
  let reader: Database.Database | undefined;
  try {
    reader = openSqliteDatabase(file, { readonly: true, fileMustExist: true, timeout: 1_000 });
    const row = reader.prepare("SELECT value FROM meta WHERE key = ?").get(OWNER_KEY) as { value: string } | undefined;
    holder = row ? (JSON.parse(row.value) as OwnerInfo) : undefined;
  } catch {
    holder = undefined; // the refusal matters more than the detail
  } finally {
    reader?.close();
  }
  const who = holder
    ? `pid ${holder.pid} on ${holder.hostname}${holder.port !== undefined ? `, port ${holder.port}` : ", no port: emceepee stdio, or still starting"}, since ${new Date(holder.startedAt).toISOString()}`
    : "a process that has not said who it is yet";
  return new GatewayError(
    ErrorCodes.STORE_UNAVAILABLE,
    `the state store ${file} is in use by another emceepee (${who}); two gateways on one file would each fail the other's running calls as leftovers of a restart. ` +
      `Stop that one, or start this one on its own state: --store sqlite:<other file> (gateway.store.path), or --store memory`,
    { details: { path: file, reason: "in_use", ...(holder ? { holder } : {}) } },
  );
}
