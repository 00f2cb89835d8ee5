/**
 * The SQLite driver (docs/adr/0020-sqlite-driver-per-node.md): better-sqlite3 13
 * (Node-API, prebuilt, installed as `better-sqlite3-napi`) on Node ≥ 22, and
 * better-sqlite3 12 (compiled at install) on Node 20, which 13 does not run on.
 * better-sqlite3 12 built against Node ≥ 24.19 headers aborts the process when a
 * statement is garbage-collected, so Node 22+ never falls back to it.
 */
import { createRequire } from "node:module";
import type Database from "better-sqlite3";
import { ErrorCodes, GatewayError, errorMessage } from "../../errors.js";

const require = createRequire(import.meta.url);

/** The package this Node loads, by major version. */
export function sqliteDriverPackage(nodeVersion: string = process.versions.node): "better-sqlite3" | "better-sqlite3-napi" {
  return Number(nodeVersion.split(".")[0]) >= 22 ? "better-sqlite3-napi" : "better-sqlite3";
}

let loaded: typeof Database | undefined;

/** better-sqlite3's Database class for this Node; a clear EMCP_STORE_UNAVAILABLE when it is not installed. */
export function sqliteDatabaseClass(): typeof Database {
  if (loaded) return loaded;
  const name = sqliteDriverPackage();
  try {
    loaded = require(name) as typeof Database;
    return loaded;
  } catch (err) {
    throw new GatewayError(
      ErrorCodes.STORE_UNAVAILABLE,
      `The SQLite store needs the optional package ${name} on Node ${process.versions.node}, and it could not be loaded (${errorMessage(err)}). ` +
        `Run \`npm install\` where emceepee is installed (on Node 20 it compiles, which needs a C++ toolchain), or use another store: --store memory or --store redis://….`,
      { cause: err },
    );
  }
}

/** `new Database(file, options)` with this Node's driver. */
export function openSqliteDatabase(file: string, options?: Database.Options): Database.Database {
  const Driver = sqliteDatabaseClass();
  return new Driver(file, options);
}
