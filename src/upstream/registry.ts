/**
 * ServerRegistry: the server configurations shared by all sessions
 * (name → config). Sessions own their connections; this owns only configs.
 * A name is added once; replace() swaps its config (add_server's update,
 * design UP-11), and sameServerConfig() says
 * whether two configs mean the same server (add_server is then idempotent).
 *
 * Two sources: the config file (`addedBy: "config"`, registered at start and
 * on reload; never stored — the file is their source) and add_server (stored
 * as ServerRecords by the SessionManager; restoreRuntime() brings them back
 * at start, after the file's, which wins a name both have).
 */
import { mayUseOwned, type Owner } from "../auth/ownership.js";
import type { Principal } from "../auth/principal.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import { sharingOf, type GatewaySettings } from "../config/schema.js";
import { isStdioConfig, remoteTransportOf, type ServerConfig } from "../config/server-entry.js";
import type { SharingMode } from "../config/server-entry.js";
import type { ServerRecord } from "../store/contracts.js";

export interface RegisteredServer {
  name: string;
  config: ServerConfig;
  /** Epoch ms. */
  addedAt: number;
  /** "config" for servers from the config file, else the session id that added it. */
  addedBy: string;
  /** A runtime server's adding principal (issuer, subject), when that session had one: only its sessions see it (docs/adr/0015). */
  owner?: Owner | undefined;
}

/** Who looks at the registry: a session (its principal); see visibleTo(). */
export interface ServerViewer {
  readonly principal: Principal | undefined;
}

/** A server's entry was replaced or removed (what holds processes or connections of its old config lets them go). */
export type RegistryChange = (name: string) => void;

export class ServerRegistry {
  private readonly servers = new Map<string, RegisteredServer>();
  private readonly listeners = new Set<RegistryChange>();

  /** Calls `listener` after each replace() or remove(); returns the unsubscribe. */
  onChange(listener: RegistryChange): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  add(entry: RegisteredServer): void {
    if (this.servers.has(entry.name)) {
      throw new GatewayError(ErrorCodes.SERVER_EXISTS, `a server named '${entry.name}' already exists; remove_server it first or pick another name`, {
        details: { server: entry.name },
      });
    }
    this.servers.set(entry.name, entry);
  }

  /** Sets the entry of an existing name (an update, or putting the previous entry back). */
  replace(entry: RegisteredServer): RegisteredServer {
    const previous = this.require(entry.name);
    this.servers.set(entry.name, entry);
    this.changed(entry.name);
    return previous;
  }

  remove(name: string): RegisteredServer {
    const entry = this.require(name);
    this.servers.delete(name);
    this.changed(name);
    return entry;
  }

  private changed(name: string): void {
    for (const listener of this.listeners) listener(name);
  }

  get(name: string): RegisteredServer | undefined {
    return this.servers.get(name);
  }

  /** The entry of `name`; EMCP_UNKNOWN_SERVER when there is none, or `viewer` may not see it (the same answer). */
  require(name: string, viewer?: ServerViewer): RegisteredServer {
    const entry = this.servers.get(name);
    if (!entry || (viewer && !visibleTo(entry, viewer))) {
      const known = this.names(viewer);
      throw new GatewayError(
        ErrorCodes.UNKNOWN_SERVER,
        `no server named '${name}'. Known servers: ${known.length ? known.join(", ") : "(none)"}. Call list_servers, or add_server to add one.`,
        { details: { server: name } },
      );
    }
    return entry;
  }

  /** Every entry, or those `viewer` may see. */
  list(viewer?: ServerViewer): RegisteredServer[] {
    const all = [...this.servers.values()];
    return viewer ? all.filter((e) => visibleTo(e, viewer)) : all;
  }

  /**
   * Registers stored runtime servers (start-up, after the config file's).
   * A name the registry already has (the config file declares it now) stays
   * the file's: returned in `shadowed` for the caller to log. `refuse` may
   * turn one down (the operator's policy changed since it was added): it
   * returns why, and the server is returned in `refused`.
   */
  restoreRuntime(
    records: readonly ServerRecord[],
    refuse: (record: ServerRecord) => string | undefined = () => undefined,
  ): { restored: string[]; shadowed: string[]; refused: Array<{ name: string; reason: string }> } {
    const out = { restored: [] as string[], shadowed: [] as string[], refused: [] as Array<{ name: string; reason: string }> };
    for (const record of records) {
      if (this.servers.has(record.name)) {
        out.shadowed.push(record.name);
        continue;
      }
      const reason = refuse(record);
      if (reason !== undefined) {
        out.refused.push({ name: record.name, reason });
        continue;
      }
      this.servers.set(record.name, fromServerRecord(record));
      out.restored.push(record.name);
    }
    return out;
  }

  /** Every name, or those `viewer` may see. */
  names(viewer?: ServerViewer): string[] {
    return this.list(viewer).map((e) => e.name);
  }
}

/**
 * Whether `viewer` sees (and may use) the entry (docs/adr/0015): config-file
 * servers are everyone's; a runtime server is its adding principal's
 * sessions' only, and one added without authentication is seen by callers
 * without authentication and the static token's operator (mayUseOwned).
 */
export function visibleTo(entry: RegisteredServer, viewer: ServerViewer): boolean {
  return !isRuntime(entry) || mayUseOwned(entry.owner, viewer.principal);
}

/** Whether the entry was added at runtime (add_server), not by the config file. */
export function isRuntime(entry: RegisteredServer): boolean {
  return entry.addedBy !== "config";
}

/** Whether a config carries credentials: `headers` (remote) or `env` (stdio). */
export function hasCredentials(config: ServerConfig): boolean {
  return Object.keys((isStdioConfig(config) ? config.env : config.headers) ?? {}).length > 0;
}

/** The config without its credentials (`headers`, `env`). */
export function withoutCredentials(config: ServerConfig): ServerConfig {
  if (isStdioConfig(config)) {
    const { env: _env, ...rest } = config;
    return rest;
  }
  const { headers: _headers, ...rest } = config;
  return rest;
}

/**
 * The config session `sessionId` connects with (docs/adr/0015): a runtime
 * server's credentials are only for the session that added it; every other
 * session gets the server without them. Config-file servers are the
 * operator's: everyone gets them whole.
 */
export function configFor(entry: RegisteredServer, sessionId: string): ServerConfig {
  return !isRuntime(entry) || entry.addedBy === sessionId ? entry.config : withoutCredentials(entry.config);
}

/** The entry's sharing mode: a runtime server with credentials is always per session (a shared connection would carry them to everyone). */
export function entrySharing(entry: RegisteredServer, settings: GatewaySettings): SharingMode {
  return isRuntime(entry) && hasCredentials(entry.config) ? "session" : sharingOf(entry.config, settings);
}

/** A runtime-added entry as the ServerStore keeps it. */
export function toServerRecord(entry: RegisteredServer): ServerRecord {
  return { name: entry.name, config: entry.config, addedAt: entry.addedAt, addedBy: entry.addedBy, ...(entry.owner ? { owner: ownerOf(entry.owner) } : {}) };
}

/** A stored runtime server as the registry keeps it. */
export function fromServerRecord(record: ServerRecord): RegisteredServer {
  return {
    name: record.name,
    config: record.config,
    addedAt: record.addedAt,
    addedBy: record.addedBy,
    ...(record.owner ? { owner: ownerOf(record.owner) } : {}),
  };
}

/** Issuer and subject only (a Principal carries scopes and claims, which are not stored). */
export function ownerOf(p: Owner): Owner {
  return { issuer: p.issuer, subject: p.subject };
}

/** A description of where a server lives that never includes secrets (env, headers). */
export function describeTarget(config: ServerConfig): { transport: string; target: string } {
  if (isStdioConfig(config)) return { transport: "stdio", target: config.command };
  const url = new URL(config.url);
  url.username = "";
  url.password = "";
  url.search = "";
  return { transport: remoteTransportOf(config), target: url.toString() };
}

/**
 * Whether two configs describe the same server: equal after normalising what
 * the schema lets one spell two ways (`type` vs `transport`, absent vs empty
 * `args`/`env`/`headers`) and ignoring key order.
 */
export function sameServerConfig(a: ServerConfig, b: ServerConfig): boolean {
  return canonicalConfig(a) === canonicalConfig(b);
}

function canonicalConfig(c: ServerConfig): string {
  // Secret slots, passthrough and token exchange change what a connection carries: a reload that changes them reconnects (issue 23).
  const slots = Object.entries(c.secrets ?? {}).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  if (isStdioConfig(c)) return JSON.stringify(["stdio", c.command, c.args, sortedEntries(c.env), c.cwd ?? null, c.sharing ?? null, slots]);
  return JSON.stringify([remoteTransportOf(c), c.url, sortedEntries(c.headers), c.sharing ?? null, slots, c.passthrough ?? false, c.tokenExchange ?? null]);
}

function sortedEntries(record: Record<string, string> | undefined): [string, string][] {
  return Object.entries(record ?? {}).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
}
