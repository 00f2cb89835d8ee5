/**
 * One SQLite database file (better-sqlite3): opening it with the durability
 * settings of docs/adr/0007-durable-store.md, migrating its schema, the
 * prepared-statement cache, one IMMEDIATE transaction per read-modify-write,
 * and the error boundary — every SQLite or file-system failure leaves as
 * GatewayError EMCP_STORE_UNAVAILABLE naming the file and what to do, with the
 * original error as `cause`. Never a silent fallback to memory.
 *
 * better-sqlite3 is synchronous: a statement runs to completion on the calling
 * thread, so the async store methods above it are atomic within the process,
 * and the transactions make them atomic against other processes on the file.
 * Writes that need not block their caller (`inTurn`) are committed together
 * at the end of the event loop's turn (one commit instead of one each, issue 27);
 * any other use of the connection commits them first, so statements still
 * run in the order they were asked for.
 */
import { mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import type Database from "better-sqlite3";
import { systemClock, type Clock } from "../../clock.js";
import { ErrorCodes, GatewayError, errorMessage } from "../../errors.js";
import { storeClosed } from "../policy.js";
import { openSqliteDatabase } from "./driver.js";
import { MIGRATIONS, type Migration } from "./migrations.js";

/** How long a statement waits for another connection's lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5_000;
/** healthy() after a failed write commits (then deletes) this much, so a disk still full is not called healthy. */
const PROBE_BYTES = 64 * 1024;
/** Failures of the file, the disk or the lock (not of a statement): they make the store unhealthy until a write succeeds. */
const UNAVAILABLE = /^SQLITE_(FULL|IOERR|READONLY|CANTOPEN|CORRUPT|NOTADB|BUSY|LOCKED|PERM|AUTH|NOMEM|PROTOCOL)/;

/** A write waiting for its turn's commit (inTurn). */
export interface TurnWrite {
  what: string;
  fn: () => unknown;
  resolve(value: unknown): void;
  /** With the store's error (EMCP_STORE_UNAVAILABLE). */
  reject(err: Error): void;
}

/** What a turn's write came to: its result, or why it failed. */
type TurnOutcome = { ok: true; value: unknown } | { ok: false; err: unknown };

/** The WAL file is truncated back to this after a checkpoint (it is reused, not grown, in between). */
const JOURNAL_SIZE_LIMIT = 32 * 1024 * 1024;

export interface OpenSqliteOptions {
  /** The schema steps to apply (tests pass a prefix to build an old file). @default MIGRATIONS */
  migrations?: readonly Migration[];
  /** Called with every statement as run, values bound (tests check the query plans; debugging). */
  verbose?: (sql: string) => void;
  /** Told (for the log line `store_recovered`) when the file was deleted or replaced and the open database was written back to its path. */
  onRecovered?: (what: string) => void;
  /** What `meta.last_opened_at` records. @default systemClock */
  clock?: Clock | undefined;
}

export class SqliteDb {
  private readonly statements = new Map<string, Database.Statement>();
  private inTransaction: Database.Transaction<(fn: () => unknown) => unknown>;
  private closed = false;
  /** The file's identity when it was opened: a path that later names another file (or none) means ours was deleted or replaced. */
  private identity: { dev: number; ino: number };
  /** Why the file is unusable (deleted or replaced, and writing it back failed): every use fails until it can be written back. */
  private fileGone: string | undefined;
  /** The last backend failure of a read or write, until a write succeeds. */
  private failing: string | undefined;
  /** Writes waiting for this turn's commit (undefined: none, no commit scheduled). */
  private turn: TurnWrite[] | undefined;

  private constructor(
    private db: Database.Database,
    /** The absolute file path (named in every error). */
    readonly file: string,
    private readonly options: OpenSqliteOptions,
  ) {
    this.inTransaction = db.transaction((fn: () => unknown) => fn());
    const { dev, ino } = statSync(file);
    this.identity = { dev, ino };
  }

  /**
   * Opens (creating the file and its folder if missing), checks and migrates
   * the store file. Throws EMCP_STORE_UNAVAILABLE when the file is corrupt,
   * not a database, newer than this build, or cannot be written.
   */
  static open(file: string, options: OpenSqliteOptions = {}): SqliteDb {
    const absolute = path.resolve(file);
    let db: Database.Database | undefined;
    try {
      mkdirSync(path.dirname(absolute), { recursive: true });
      if (statSync(absolute, { throwIfNoEntry: false })?.isDirectory()) {
        throw Object.assign(new Error(`${absolute} is a folder`), { code: "EISDIR" });
      }
      db = connect(absolute, options);
      const check = db.pragma("quick_check", { simple: true });
      if (check !== "ok") throw Object.assign(new Error(`integrity check failed: ${String(check)}`), { code: "SQLITE_CORRUPT" });
      const store = new SqliteDb(db, absolute, options);
      store.migrate(options.migrations ?? MIGRATIONS);
      // A write at every start: a file or folder we cannot write fails now, not at the first task.
      store.stmt("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_opened_at', ?)").run(String((options.clock ?? systemClock).now()));
      return store;
    } catch (err) {
      try {
        db?.close();
      } catch {
        /* already failing: the first error is the one to report */
      }
      throw storeError(absolute, "could not be opened", err);
    }
  }

  /** The schema version the file is at (PRAGMA user_version). */
  get version(): number {
    return this.db.pragma("user_version", { simple: true }) as number;
  }

  /** A cached prepared statement. */
  stmt(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)));
    return s;
  }

  /** Runs a read (one statement, or several that need no common snapshot). */
  read<T>(what: string, fn: () => T): T {
    this.commitTurn();
    return this.guard(what, fn);
  }

  /**
   * Runs `fn` (statements that change the file) in the transaction that commits
   * every write asked for in this turn of the event loop, once the turn's I/O
   * callbacks are done (setImmediate); resolves with its result once that
   * transaction committed, so nothing is confirmed before it is on the file.
   * Each runs in its own savepoint: one that throws is undone and rejected
   * alone; a failed commit rejects them all. Any read or write that does not
   * wait commits the waiting ones first (the order of statements is the order
   * of the calls). For writes many callers make at once: a session stored,
   * its rows deleted, an SSE message appended.
   */
  inTurn<T>(what: string, fn: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => this.queueInTurn({ what, fn, resolve, reject }));
  }

  /** inTurn with callbacks, called synchronously as the turn's transaction commits or fails (before any other statement runs). */
  queueInTurn(write: TurnWrite): void {
    if (this.closed) return write.reject(storeClosed(this.file));
    if (this.turn === undefined) {
      this.turn = [];
      setImmediate(() => this.commitTurn());
    }
    this.turn.push(write);
  }

  /**
   * Commits the writes waiting for this turn (inTurn), now; each caller is told. A write's `fn` must not queue
   * another (it would wait for the next turn's commit).
   */
  commitTurn(): void {
    const turn = this.turn;
    if (turn === undefined || this.db.inTransaction) return; // inside a transaction: its own commit comes first, then the turn's
    this.turn = undefined;
    if (turn.length === 0) return;
    const outcomes: TurnOutcome[] = [];
    const failing = this.failing;
    try {
      this.write(turn.length === 1 ? turn[0]!.what : `${turn[0]!.what} and ${turn.length - 1} more writes`, () => {
        for (const w of turn) {
          if (turn.length === 1) {
            outcomes.push({ ok: true, value: w.fn() }); // alone: its failure is the transaction's
            continue;
          }
          this.db.exec("SAVEPOINT turn_write");
          try {
            outcomes.push({ ok: true, value: w.fn() });
            this.db.exec("RELEASE turn_write");
          } catch (err) {
            // Some failures (a full disk, an I/O error) end the whole transaction: then they are the turn's failure.
            if (!this.db.inTransaction) throw err;
            this.db.exec("ROLLBACK TO turn_write");
            this.db.exec("RELEASE turn_write");
            outcomes.push({ ok: false, err });
          }
        }
      });
    } catch (err) {
      this.settle(turn, () => ({ ok: false, err }));
      return;
    }
    // A turn whose writes all failed wrote nothing: it is no sign that the store works again (healthy()).
    if (!outcomes.some((o) => o.ok)) this.failing = failing;
    this.settle(turn, (i) => outcomes[i]!);
  }

  /** Tells each write of a turn its outcome; a callback that throws does not keep the others from being told. */
  private settle(turn: readonly TurnWrite[], outcome: (i: number) => TurnOutcome): void {
    let thrown: { err: unknown } | undefined;
    turn.forEach((w, i) => {
      const o = outcome(i);
      try {
        if (o.ok) w.resolve(o.value);
        else w.reject(this.failure(w.what, o.err));
      } catch (err) {
        thrown ??= { err };
      }
    });
    if (thrown) throw thrown.err;
  }

  /**
   * Runs `fn` in one IMMEDIATE transaction (the write lock is taken first, so
   * a compare-and-set cannot interleave). A success ends a failure healthy()
   * reported (the disk has room again).
   */
  write<T>(what: string, fn: () => T): T {
    this.commitTurn();
    const result = this.guard(what, () => this.inTransaction.immediate(fn) as T);
    this.failing = undefined;
    return result;
  }

  /**
   * False while the store cannot serve: closed, the file deleted or replaced
   * and writing it back failed (then every read and write fails too), or the
   * last read/write failed (disk full, I/O error) and a probe write of
   * PROBE_BYTES still fails. Never throws; problem() says why.
   */
  healthy(): boolean {
    if (this.closed) return false;
    try {
      this.ensureFile();
    } catch {
      return false;
    }
    try {
      if (this.failing !== undefined) {
        // The failure may be over (space freed): a write that needs new pages tells, and leaves nothing behind.
        this.write("probe the file with a write", () => {
          this.stmt("INSERT OR REPLACE INTO meta (key, value) VALUES ('health_probe', zeroblob(?))").run(PROBE_BYTES);
          this.stmt("DELETE FROM meta WHERE key = 'health_probe'").run();
        });
        return true;
      }
      return this.db.prepare("SELECT 1 AS ok").get() !== undefined;
    } catch (err) {
      this.failing ??= err instanceof GatewayError ? err.message : errorMessage(err);
      return false;
    }
  }

  /** Why the store is unhealthy (with what to do), or undefined. */
  problem(): string | undefined {
    if (this.closed) return `the state store ${this.file} is closed`;
    return this.fileGone ?? this.failing;
  }

  /**
   * The path still names the file opened, or it is made to again: when the
   * file was deleted or replaced, the open database (which still has
   * everything) is written to a temporary file in the same folder, the old
   * connection closed, the copy renamed over the path and opened
   * (`store_recovered`). If that fails, throws EMCP_STORE_UNAVAILABLE (and so
   * does every use until it succeeds): nothing is confirmed that a restart would lose.
   */
  private ensureFile(): void {
    if (this.fileGone === undefined && this.db.open && this.db.inTransaction) return; // checked when the transaction began
    let now: { dev: number; ino: number } | undefined;
    try {
      now = statSync(this.file, { throwIfNoEntry: false });
    } catch {
      now = undefined; // the folder cannot be read: as good as gone
    }
    if (this.fileGone === undefined && now && now.dev === this.identity.dev && now.ino === this.identity.ino) return;
    const what = `the state store ${this.file} was ${now ? "replaced by another file" : "deleted"} while emceepee had it open`;
    try {
      this.recover();
    } catch (err) {
      this.fileGone =
        `${what}, and writing it back failed: ${errorMessage(err)}. Nothing is stored until it can be (each use tries again): make its folder ` +
        `writable, or restart emceepee (sessions, tasks and results not stored are lost), or set gateway.store.path to a file that stays`;
      throw new GatewayError(ErrorCodes.STORE_UNAVAILABLE, this.fileGone, { details: { path: this.file, reason: "file_gone" }, cause: err });
    }
    this.fileGone = undefined;
    this.options.onRecovered?.(`${what}; its contents were written back to that path and it is used again`);
  }

  /** Writes the open database back to its path (a temporary copy renamed over it) and reopens it there. */
  private recover(): void {
    const tmp = path.join(path.dirname(this.file), `.${path.basename(this.file)}.recover-${process.pid}`);
    mkdirSync(path.dirname(this.file), { recursive: true });
    if (this.db.open) {
      rmSync(tmp, { force: true });
      try {
        this.db.prepare("VACUUM INTO ?").run(tmp);
      } catch (err) {
        rmSync(tmp, { force: true });
        throw err;
      }
      this.statements.clear();
      this.db.close();
    }
    // SQLite leaves a moved file's -wal and -shm at the path: the copy must not inherit (replay) them.
    rmSync(`${this.file}-wal`, { force: true });
    rmSync(`${this.file}-shm`, { force: true });
    renameSync(tmp, this.file); // a failure leaves the copy, renamed at the next try
    const db = connect(this.file, this.options);
    this.db = db;
    this.inTransaction = db.transaction((fn: () => unknown) => fn());
    const { dev, ino } = statSync(this.file);
    this.identity = { dev, ino };
  }

  /** Closes the file (SQLite checkpoints the WAL into it); idempotent. */
  close(): void {
    if (this.closed) return;
    this.commitTurn(); // what this turn asked for still commits
    this.closed = true;
    this.statements.clear();
    try {
      this.db.close();
    } catch (err) {
      throw storeError(this.file, "could not be closed cleanly", err);
    }
  }

  private guard<T>(what: string, fn: () => T): T {
    if (this.closed) throw storeClosed(this.file);
    this.ensureFile();
    try {
      return fn();
    } catch (err) {
      throw this.failure(what, err);
    }
  }

  /** `err` (thrown doing `what`) as the store's error; a failure of the file, the disk or the lock makes it unhealthy. */
  private failure(what: string, err: unknown): GatewayError {
    if (err instanceof GatewayError) return err;
    const error = storeError(this.file, `failed to ${what}`, err);
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code === "string" && UNAVAILABLE.test(code)) this.failing = error.message;
    return error;
  }

  private migrate(migrations: readonly Migration[]): void {
    const latest = migrations.at(-1)?.version ?? 0;
    const step = this.db.transaction(() => {
      // Read inside the write lock: two processes opening one old file migrate it once.
      const current = this.version;
      if (current > latest) {
        throw new GatewayError(
          ErrorCodes.STORE_UNAVAILABLE,
          `the state store ${this.file} has schema version ${current}, newer than this emceepee knows (${latest}); run the newer emceepee, or set gateway.store.path to another file`,
          { details: { path: this.file, version: current, supported: latest } },
        );
      }
      for (const m of migrations) {
        if (m.version <= current) continue;
        m.up(this.db);
        this.db.pragma(`user_version = ${m.version}`);
      }
    });
    step.immediate();
  }
}

/** A connection to the file with the durability settings of ADR 0007. */
function connect(file: string, options: OpenSqliteOptions): Database.Database {
  const db = openSqliteDatabase(file, { timeout: BUSY_TIMEOUT_MS, ...(options.verbose ? { verbose: (sql: unknown) => options.verbose?.(String(sql)) } : {}) });
  try {
    // The first statement reads the header: a file that is not a database fails here (SQLITE_NOTADB).
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (mode !== "wal") throw new Error(`the file system refused write-ahead logging (journal_mode is '${String(mode)}')`);
    // WAL + NORMAL: a commit is in the WAL (the OS's cache) before it returns, so a killed process
    // loses nothing; only a power loss / kernel crash can drop the last commits (ADR 0007).
    db.pragma("synchronous = NORMAL");
    db.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT}`);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** SQLite / file-system error codes by what the operator should do about them. */
const UNWRITABLE = new Set(["SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH", "EACCES", "EPERM", "EROFS", "ENOTDIR", "EISDIR", "EEXIST"]);
const CORRUPT = new Set(["SQLITE_NOTADB", "SQLITE_CORRUPT"]);

/** The one mapping from a backend failure to EMCP_STORE_UNAVAILABLE. */
export function storeError(file: string, doing: string, err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const raw = (err as { code?: unknown } | null)?.code;
  const code = typeof raw === "string" ? raw : "";
  const family = code.replace(/^(SQLITE_[A-Z]+)_.*$/, "$1");
  const where = 'or set gateway.store.path to another file (or gateway.store.kind to "memory" to run without durable state)';
  let advice: string;
  if (CORRUPT.has(family)) advice = `it is not a readable SQLite database (corrupt, or another kind of file). Move it aside or restore a backup, ${where}`;
  else if (UNWRITABLE.has(family)) advice = `it cannot be opened for writing. Make the file and its folder writable by this user, ${where}`;
  else if (family === "SQLITE_FULL") advice = "the disk (or its quota) is full: nothing was written. Free space; the store keeps what it had";
  else if (family === "SQLITE_BUSY" || family === "SQLITE_LOCKED") {
    advice = `another process held it locked for more than ${BUSY_TIMEOUT_MS}ms (is another emceepee using the same file?)`;
  } else advice = `check the file, its folder and the disk, ${where}`;
  return new GatewayError(ErrorCodes.STORE_UNAVAILABLE, `the state store ${file} ${doing}: ${errorMessage(err)}; ${advice}`, {
    details: { path: file, ...(code ? { reason: code } : {}) },
    cause: err,
  });
}
