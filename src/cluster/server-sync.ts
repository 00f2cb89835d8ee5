/**
 * add_server / remove_server across replicas (docs/adr/0013, "Registry
 * changes by pub/sub"). The gateway's store is wrapped so that a successful
 * `servers.put` or `servers.delete` publishes `{ op, name, from }` on
 * `P cluster:servers`; every other replica reads the record from the store
 * (the message carries no config: the store is the truth) and applies it to
 * its registry and live sessions — the events and reconnects of
 * src/session/server-changes.ts — without writing the store again.
 */
import type { Redis } from "ioredis";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { SessionManager } from "../session/session-manager.js";
import type { ServerRecord, Store } from "../store/contracts.js";
import { describeTarget, fromServerRecord, sameServerConfig, visibleTo, type ServerRegistry } from "../upstream/registry.js";

interface ServerMessage {
  op: "put" | "delete";
  name: string;
  from: string;
}

export interface ServerSyncOptions {
  /** Publishes (a command connection). */
  redis: Redis;
  /** Subscribes (a connection in subscriber mode: nothing else may run on it). */
  subscriber: Redis;
  channel: string;
  incarnation: string;
  logger: Logger;
}

export class ServerSync {
  private target: { store: Store; registry: ServerRegistry; sessions: SessionManager } | undefined;
  /** Applied one after another, in the order received. */
  private applying: Promise<void> = Promise.resolve();

  constructor(private readonly o: ServerSyncOptions) {}

  /** The store the gateway uses: `store` whose server writes are announced to the other replicas. */
  wrap(store: Store): Store {
    const servers = store.servers;
    const publish = (op: ServerMessage["op"], name: string) => {
      const message: ServerMessage = { op, name, from: this.o.incarnation };
      return this.o.redis.publish(this.o.channel, JSON.stringify(message)).then(
        () => undefined,
        (err: unknown) => this.o.logger.error({ err: errorMessage(err), server: name }, "cluster_publish_failed"),
      );
    };
    return {
      ...store,
      kind: store.kind,
      location: store.location,
      healthy: () => store.healthy(),
      close: () => store.close(),
      servers: {
        get: (name) => servers.get(name),
        list: () => servers.list(),
        async put(record: ServerRecord) {
          await servers.put(record);
          await publish("put", record.name);
        },
        async delete(name: string) {
          const deleted = await servers.delete(name);
          if (deleted) await publish("delete", name);
          return deleted;
        },
      },
    };
  }

  /** Starts applying the other replicas' changes to `registry` and the live sessions. */
  async start(store: Store, registry: ServerRegistry, sessions: SessionManager): Promise<void> {
    this.target = { store, registry, sessions };
    this.o.subscriber.on("message", (channel: string, raw: string) => {
      if (channel !== this.o.channel) return;
      let message: ServerMessage;
      try {
        message = JSON.parse(raw) as ServerMessage;
      } catch {
        return;
      }
      if (message.from === this.o.incarnation) return;
      this.applying = this.applying.then(() =>
        this.apply(message).catch((err: unknown) => this.o.logger.error({ err: errorMessage(err), server: message.name }, "cluster_server_sync_failed")),
      );
    });
    await this.o.subscriber.subscribe(this.o.channel);
  }

  private async apply({ op, name, from }: ServerMessage): Promise<void> {
    const t = this.target;
    if (!t) return;
    const existing = t.registry.get(name);
    const live = t.sessions.list();
    if (op === "delete") {
      if (!existing || existing.addedBy === "config") return;
      t.registry.remove(name);
      await Promise.allSettled(
        live.map(async (s) => {
          await s.disconnect(name, `server '${name}' was removed on another replica`);
          // Only the sessions that saw it (its principal's, for a runtime server: docs/adr/0015) hear of it.
          if (!visibleTo(existing, s)) return;
          s.events.add("server_removed", name, { name, removedBy: "another session" });
          s.serverSetChanged();
        }),
      );
      this.o.logger.info({ server: name, from }, "cluster_server_removed");
      return;
    }
    const record = await t.store.servers.get(name);
    if (!record) return;
    if (existing && sameServerConfig(existing.config, record.config)) return;
    const entry = fromServerRecord(record);
    if (existing) {
      t.registry.replace(entry);
      await Promise.allSettled(live.map((s) => s.disconnect(name, `server '${name}' was updated on another replica (new config)`)));
      for (const s of live) {
        if (!visibleTo(entry, s)) continue;
        s.events.add("server_updated", name, { name, updatedBy: "another session", ...describeTarget(record.config) });
        s.serverSetChanged();
      }
    } else {
      t.registry.add(entry);
      for (const s of live) {
        if (!visibleTo(entry, s)) continue;
        s.events.add("server_added", name, { name, addedBy: "another session" });
        s.serverSetChanged();
      }
    }
    this.o.logger.info({ server: name, from, ...describeTarget(record.config) }, "cluster_server_applied");
  }

  async close(): Promise<void> {
    this.target = undefined;
    await this.applying;
  }
}
