/**
 * Server add/update/remove applied to every live session (design UP-2,
 * UP-11; docs/adr/0006 for the policy, docs/adr/0007 "Wiring" for the
 * store). Changes to one server name run one at a time; a runtime-added
 * server's change is written to the store (ServerStore) before it counts, so
 * a restart brings back exactly the servers added and not removed. The
 * sessions themselves (creation, expiry, resumption) stay in
 * session-manager.ts, which owns the live-session map this reads and
 * exposes these operations.
 */
import type { ServerConfig } from "../config/server-entry.js";
import { sessionHash } from "../logging.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import { configFor, describeTarget, ownerOf, sameServerConfig, toServerRecord, visibleTo, type RegisteredServer } from "../upstream/registry.js";
import type { Session, SessionDeps } from "./session.js";

/** What add_server did: a new name, a new config for a runtime-added name, or nothing (same config). */
export type AddServerOutcome = "added" | "updated" | "unchanged";

export class ServerChanges {
  /** The tail of the add/update/remove operations queued per server name. */
  private readonly queues = new Map<string, Promise<unknown>>();

  /** `sessions`: the live sessions (SessionManager's map, read at each change). */
  constructor(
    private readonly deps: SessionDeps,
    private readonly sessions: ReadonlyMap<string, Session>,
  ) {}

  private list(): Session[] {
    return [...this.sessions.values()];
  }

  /**
   * add_server. A new name is registered and the calling session connected; if
   * that connection fails nothing is kept (nothing half-added) and other
   * sessions learn about a kept server through `server_added`. The same name
   * with the same config is idempotent (the caller is connected). Otherwise
   * `authorize` (the caller's policy, docs/adr/0006) decides, in turn with the
   * other changes to this name, whether this config may be added or may
   * replace `existing`; it throws to refuse. A different config replaces the
   * server (see update).
   */
  add(
    caller: Session,
    name: string,
    config: ServerConfig,
    authorize: (existing: RegisteredServer | undefined) => void | Promise<void>,
  ): Promise<AddServerOutcome> {
    return this.oneAtATime(name, async () => {
      const { registry, clock } = this.deps;
      const existing = registry.get(name);
      // Another principal's runtime server (docs/adr/0015): not seen, not used, not replaced; its name is taken.
      if (existing && !visibleTo(existing, caller)) {
        throw new GatewayError(
          ErrorCodes.SERVER_EXISTS,
          `the name '${name}' is taken on this gateway by a server another user added, which you cannot see or change; add_server yours under another name`,
          { details: { server: name } },
        );
      }
      // Compared with what the caller would connect with: another session's server without its credentials (docs/adr/0015).
      if (existing && sameServerConfig(configFor(existing, caller.id), config)) {
        await caller.connection(name);
        return "unchanged";
      }
      await authorize(existing);
      if (existing) return this.update(caller, existing, config);
      const entry: RegisteredServer = { name, config, addedAt: clock.now(), addedBy: caller.id, ...ownedBy(caller) };
      registry.add(entry);
      try {
        await caller.connection(name);
        // Stored only once reachable: a restart brings back what add_server kept, nothing half-added.
        await this.deps.store.servers.put(toServerRecord(entry));
      } catch (err) {
        registry.remove(name);
        await caller.disconnect(name, "add_server failed");
        throw err;
      }
      this.announceAdded(entry, caller);
      return "added";
    });
  }

  /**
   * A server the config file gained (reload): registered as a config-file
   * server for every session, connected by each on next use; nothing is
   * tried now (the caller checks it in the background).
   */
  addConfig(name: string, config: ServerConfig): Promise<void> {
    return this.oneAtATime(name, async () => {
      const entry: RegisteredServer = { name, config, addedAt: this.deps.clock.now(), addedBy: "config" };
      this.deps.registry.add(entry);
      this.announceAdded(entry, undefined);
    });
  }

  /** Tells the sessions that see `entry` (its principal's, for a runtime server) that it was added. */
  private announceAdded(entry: RegisteredServer, caller: Session | undefined): void {
    const { name } = entry;
    for (const s of this.sessions.values()) {
      if (!visibleTo(entry, s)) continue;
      if (s !== caller) s.events.add("server_added", name, { name, addedBy: caller ? "another session" : "the config file" });
      s.serverSetChanged();
    }
  }

  /**
   * add_server's update (design UP-11): the new config replaces the old one for every
   * session. The caller reconnects with it first; if that fails the previous
   * config is put back and the error returned (the caller's old connection is
   * gone either way, and reconnects on next use). Then every other session
   * drops its connection (working tasks of that server fail, its pending
   * requests are rejected) and reconnects lazily, on next use, with the new
   * config; every session gets a `server_updated` event.
   */
  private async update(caller: Session, previous: RegisteredServer, config: ServerConfig): Promise<AddServerOutcome> {
    const { registry, clock } = this.deps;
    const { name } = previous;
    const reason = `server '${name}' was updated by add_server (new config)`;
    // Sessions not connected now could connect to the new config while the caller tries it; a rollback must undo that.
    const connectedBefore = new Set(this.list().filter((s) => s.view(name).status === "connected"));
    // A config-file server stays one when replaced (allowed by the policy): the file's config comes back on reload or restart.
    const entry: RegisteredServer =
      previous.addedBy === "config"
        ? { name, config, addedAt: clock.now(), addedBy: "config" }
        : { name, config, addedAt: clock.now(), addedBy: caller.id, ...ownedBy(caller) };
    registry.replace(entry);
    await caller.disconnect(name, reason);
    try {
      await caller.connection(name);
      // A runtime server's new config is what a restart brings back (a config-file server's is never stored).
      if (entry.addedBy !== "config") await this.deps.store.servers.put(toServerRecord(entry));
    } catch (err) {
      registry.replace(previous);
      const touched = this.list().filter((s) => s === caller || !connectedBefore.has(s));
      await Promise.allSettled(touched.map((s) => s.disconnect(name, "add_server could not connect with the new config")));
      throw err;
    }
    await Promise.allSettled(this.list().flatMap((s) => (s === caller ? [] : [s.disconnect(name, reason)])));
    for (const s of this.sessions.values()) {
      if (!visibleTo(entry, s)) continue;
      s.events.add("server_updated", name, { name, updatedBy: s === caller ? "this session" : "another session", ...describeTarget(config) });
      s.serverSetChanged();
    }
    this.deps.logger.info({ server: name, bySessionHash: sessionHash(caller.id), ...describeTarget(config) }, "server_config_updated");
    return "updated";
  }

  /**
   * Unregisters a server and disconnects every session from it (`caller`
   * undefined: the config file dropped it on reload). `authorize`, if given,
   * may refuse (throw) once it is this change's turn, seeing the entry it would remove.
   */
  remove(caller: Session | undefined, name: string, authorize?: (entry: RegisteredServer) => void | Promise<void>): Promise<number> {
    return this.oneAtATime(name, async () => {
      // Another principal's server is unknown to the caller (docs/adr/0015).
      const entry = this.deps.registry.require(name, caller);
      await authorize?.(entry);
      // Deleted first: if the store fails nothing changes, and a removed server never comes back after a restart.
      if (entry.addedBy !== "config") await this.deps.store.servers.delete(name);
      this.deps.registry.remove(name);
      const sessions = [...this.sessions.values()];
      await Promise.allSettled(
        sessions.map(async (s) => {
          await s.disconnect(name, `server '${name}' was removed`);
          if (!visibleTo(entry, s)) return;
          s.events.add("server_removed", name, { name, removedBy: s === caller ? "this session" : caller ? "another session" : "the config file" });
          s.serverSetChanged();
        }),
      );
      return sessions.filter((s) => visibleTo(entry, s)).length;
    });
  }

  /** Runs add/update/remove operations on one server name one after another. */
  private oneAtATime<T>(name: string, work: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(name) ?? Promise.resolve()).then(work, work);
    const tail = run.catch(() => undefined);
    this.queues.set(name, tail);
    void tail.then(() => {
      if (this.queues.get(name) === tail) this.queues.delete(name);
    });
    return run;
  }
}

/** The owner a runtime server added by `caller` records: its principal, when it has one. */
function ownedBy(caller: Session): Pick<RegisteredServer, "owner"> {
  return caller.principal ? { owner: ownerOf(caller.principal) } : {};
}
