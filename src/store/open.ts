/**
 * openStore(): the one way to get a Store from `gateway.store`.
 * `{ kind: "memory" }` keeps everything in the process; `{ kind: "sqlite",
 * path? }` opens (creating) the file, or the per-user state file
 * (default-path.ts) when no path is given; `{ kind: "redis", url, keyPrefix }` connects
 * (and PINGs) the server. A file or server that cannot be used is an
 * EMCP_STORE_UNAVAILABLE error naming it — never a fallback to memory, which
 * would silently lose what the operator asked to keep.
 */
import { systemClock, type Clock } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { Logger } from "../logging.js";
import type { Store } from "./contracts.js";
import { defaultStorePath } from "./default-path.js";
import { createMemoryStore } from "./memory/index.js";

/** `gateway.store` as the schema gives it (keyPrefix may be left to its default). */
export type StoreConfig = Omit<GatewaySettings["store"], "keyPrefix"> & { keyPrefix?: string };

export interface OpenStoreOptions {
  /** For `touch()` without a time. @default systemClock */
  clock?: Clock;
  /** Where the default SQLite file is looked for. @default process.env */
  env?: NodeJS.ProcessEnv;
  /** Redis: how long connecting may take before the start fails. @default 2000 */
  connectTimeoutMs?: number;
  /** SQLite: claim the file for this process until close (a gateway serving from it; docs/adr/0007, "One gateway per file"). @default false */
  exclusive?: boolean;
  /** SQLite: where `store_recovered` is logged (a deleted or replaced file written back to its path). */
  logger?: Logger;
}

export async function openStore(config: StoreConfig, options: OpenStoreOptions = {}): Promise<Store> {
  const clock = options.clock ?? systemClock;
  switch (config.kind) {
    case "memory":
      if (config.path !== undefined) {
        throw new GatewayError(ErrorCodes.CONFIG_INVALID, 'gateway.store.path is only used with kind "sqlite"; remove it or set kind: "sqlite"');
      }
      return createMemoryStore(clock);
    case "sqlite": {
      // Each backend (and better-sqlite3's native module, ioredis) is loaded by the first store of its kind (docs/adr/0017-lazy-start.md).
      const { openSqliteStore } = await import("./sqlite/index.js");
      return openSqliteStore(config.path ?? defaultStorePath(options.env), clock, {
        exclusive: options.exclusive ?? false,
        onRecovered: (what) => options.logger?.warn({ store: "sqlite", reason: what }, "store_recovered"),
      });
    }
    case "redis": {
      if (config.url === undefined || config.path !== undefined) {
        throw new GatewayError(ErrorCodes.CONFIG_INVALID, "a redis store takes gateway.store.url (redis://host:6379) and no path; set url and remove path");
      }
      const { openRedisStore } = await import("./redis/index.js");
      return openRedisStore(config.url, clock, {
        ...(config.keyPrefix !== undefined ? { keyPrefix: config.keyPrefix } : {}),
        ...(options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
      });
    }
  }
}
