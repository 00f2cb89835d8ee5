/**
 * One Redis connection (ioredis) for the Redis backend: opening it with the
 * fail-fast settings of docs/adr/0007-durable-store.md ("Redis"), the Lua
 * scripts (scripts.ts), key naming, and the error boundary — every Redis or
 * network failure leaves as GatewayError EMCP_STORE_UNAVAILABLE naming the
 * server (password redacted) and what to check, with the ioredis error as
 * `cause`. Never a silent fallback to memory.
 *
 * Fail fast: no offline queue (a command while disconnected fails at once
 * instead of waiting for a reconnect), one retry per command, bounded connect
 * and command timeouts. ioredis reconnects on its own with a capped backoff;
 * commands work again as soon as it is back.
 */
import type { Redis } from "ioredis";
import { ErrorCodes, GatewayError, errorMessage } from "../../errors.js";
import { storeClosed } from "../policy.js";
import { SCRIPTS, type ScriptName } from "./scripts.js";

/** @default "emceepee:" */
export const DEFAULT_KEY_PREFIX = "emceepee:";

export interface OpenRedisOptions {
  /** Prepended to every key (several gateways, or tests, share one Redis). @default DEFAULT_KEY_PREFIX */
  keyPrefix?: string;
  /** How long opening (and each reconnect attempt) may take. @default 2000 */
  connectTimeoutMs?: number;
  /** How long one command may take before it fails. @default 5000 */
  commandTimeoutMs?: number;
}

const DEFAULTS = { connectTimeoutMs: 2_000, commandTimeoutMs: 5_000 } as const;
/** Reconnect backoff: 50 ms more per attempt, at most this. */
const MAX_RECONNECT_DELAY_MS = 1_000;

type ScriptArg = string | number;
type ScriptFn = (...args: ScriptArg[]) => Promise<unknown>;

export class RedisConn {
  private closed = false;
  private lastError: Error | undefined;

  private constructor(
    private readonly redis: Redis,
    /** The URL with any password replaced by `***` (named in every error). */
    readonly location: string,
    readonly prefix: string,
  ) {
    redis.on("error", (err: Error) => {
      this.lastError = err;
    });
  }

  /**
   * Connects and PINGs. Throws EMCP_CONFIG_INVALID for a URL that is not
   * redis:// or rediss://, and EMCP_STORE_UNAVAILABLE when the server cannot
   * be reached or refuses the credentials.
   */
  static async open(url: string, options: OpenRedisOptions = {}): Promise<RedisConn> {
    checkUrl(url);
    const location = redactUrl(url);
    const prefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
    // ioredis is loaded by the first Redis store, not by every process (docs/adr/0017-lazy-start.md).
    const { Redis } = await import("ioredis");
    const redis = new Redis(url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      commandTimeout: options.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs,
      retryStrategy: (times) => Math.min(times * 50, MAX_RECONNECT_DELAY_MS),
      ...(url.toLowerCase().startsWith("rediss:") ? { tls: {} } : {}),
    });
    const conn = new RedisConn(redis, location, prefix);
    for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { numberOfKeys: 0, lua });
    try {
      await redis.connect();
      await redis.ping();
    } catch (err) {
      redis.disconnect();
      throw conn.error("could not be reached", conn.lastError ?? err);
    }
    return conn;
  }

  /** A key under the prefix. */
  key(...parts: string[]): string {
    return this.prefix + parts.join(":");
  }

  /** Runs commands on the connection through the error boundary. */
  async run<T>(what: string, fn: (redis: Redis) => Promise<T>): Promise<T> {
    if (this.closed) throw storeClosed(this.location);
    try {
      return await fn(this.redis);
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      if (this.closed) throw storeClosed(this.location);
      throw this.error(`failed to ${what}`, err);
    }
  }

  /** Runs one script of scripts.ts (the prefix is passed as its first argument). */
  script(what: string, name: ScriptName, ...args: ScriptArg[]): Promise<unknown> {
    return this.run(what, (redis) => (redis as unknown as Record<ScriptName, ScriptFn>)[name](this.prefix, ...args));
  }

  /** Runs one script with its keys under `prefix` + `sub` (one script body serving two kinds of state, e.g. the take-once login scripts for OAuth flows). */
  scriptUnder(sub: string, what: string, name: ScriptName, ...args: ScriptArg[]): Promise<unknown> {
    return this.run(what, (redis) => (redis as unknown as Record<ScriptName, ScriptFn>)[name](this.prefix + sub, ...args));
  }

  /** Connected and answering PING; never throws. */
  async healthy(): Promise<boolean> {
    if (this.closed || this.redis.status !== "ready") return false;
    try {
      return (await this.redis.ping()) === "PONG";
    } catch {
      return false;
    }
  }

  /** Why the connection cannot serve now (with what to check), or undefined while it is ready. */
  problem(): string | undefined {
    if (this.closed) return `the state store ${this.location} is closed`;
    if (this.redis.status === "ready") return undefined;
    return this.error("is not connected", this.lastError ?? new Error(`connection ${this.redis.status}`)).message;
  }

  /** Quits (or, when the server is gone, drops) the connection and stops reconnecting; idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      if (this.redis.status === "ready") await this.redis.quit();
    } catch {
      /* the server is gone: nothing to flush */
    } finally {
      this.redis.disconnect();
    }
  }

  private error(doing: string, err: unknown): GatewayError {
    const message = errorMessage(err);
    let advice: string;
    if (/NOAUTH|WRONGPASS|invalid password|invalid username/i.test(message)) {
      advice = "the server refused the credentials: check the user and password in gateway.store.url (redis://user:password@host:port)";
    } else if (/NOSCRIPT|ERR .*script|user_script/i.test(message)) {
      advice = "the server refused a store script (is it Redis 6.2 or newer, with Lua scripting allowed?)";
    } else {
      advice =
        "check that Redis is running and reachable at that address (host, port, rediss:// for TLS, firewall); the gateway reconnects on its own when it is back";
    }
    return new GatewayError(ErrorCodes.STORE_UNAVAILABLE, `the state store ${this.location} ${doing}: ${message}; ${advice}`, {
      details: { url: this.location },
      cause: err,
    });
  }
}

/** A redis:// or rediss:// URL with a host, else EMCP_CONFIG_INVALID saying so. */
export function checkUrl(url: string): void {
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    u = undefined;
  }
  if (!u || (u.protocol !== "redis:" && u.protocol !== "rediss:") || u.hostname === "") {
    throw new GatewayError(
      ErrorCodes.CONFIG_INVALID,
      `gateway.store.url must be a redis:// or rediss:// URL with a host (redis://[user:password@]host[:port][/db]), got ${u ? `'${redactUrl(url)}'` : "a value that is not a URL (not shown: it may hold a password)"}`,
      { details: { url: redactUrl(url) } },
    );
  }
}

/** redis://user:secret@host → redis://user:***@host (errors and logs never show a password). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "<unparseable URL>";
  }
}
