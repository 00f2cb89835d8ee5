/**
 * Replicas sharing one Redis (docs/adr/0013-replicas.md): createCluster()
 * builds the parts — membership (owner records, heartbeat), the forwarding
 * router the MCP endpoints ask about sessions they do not hold, the store
 * wrapper and pub/sub bridge for server changes, and the scoped start-up
 * recovery view, the peers the web console reads and answers through
 * (peers.ts), and a person's changed secrets (secret-sync.ts) — on two Redis
 * connections of its own (commands; pub/sub).
 * start() after the store is open, close() before it is closed.
 */
import { createRequire } from "node:module";
import type * as IoRedis from "ioredis";
import type { Clock, IdGenerator } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { SessionManager } from "../session/session-manager.js";
import type { Store } from "../store/contracts.js";
import { redactUrl } from "../store/redis/index.js";
import type { ServerRegistry } from "../upstream/registry.js";
import { createForwarder } from "./forward.js";
import { Membership } from "./membership.js";
import { createPeers, type Peers } from "./peers.js";
import { orphansOnly } from "./recovery-view.js";
import { ClusterRouter } from "./router.js";
import { SecretSync } from "./secret-sync.js";
import { ServerSync } from "./server-sync.js";

export { FORWARDED_HEADER } from "./forward.js";
export type { PeerReplica, Peers } from "./peers.js";

export interface ClusterDeps {
  settings: GatewaySettings;
  registry: ServerRegistry;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
}

export interface Cluster {
  readonly incarnation: string;
  readonly router: ClusterRouter;
  /** The other replicas, for the web console (usable after start()). */
  readonly peers: Peers;
  /** The store the gateway should use (server changes are announced). */
  wrap(store: Store): Store;
  /** What start-up recovery may settle: orphaned sessions only. */
  recoveryView(store: Store): Store;
  /** Tells the other replicas that `person`'s secret for `server` was replaced or removed (they end that person's connections to it). */
  secretChanged(server: string, person: { issuer: string; subject: string }): void;
  /** What this replica does when another tells it so (set before start()). */
  onSecretChanged(handler: (server: string, person: { issuer: string; subject: string }) => void): void;
  /** Heartbeat and subscription; `store` is the raw (unwrapped) store. */
  start(store: Store, sessions: SessionManager): Promise<void>;
  close(): Promise<void>;
}

/** Checks gateway.cluster against the store and builds the cluster (no I/O until start()). */
export function createCluster(deps: ClusterDeps): Cluster {
  const { settings, clock, logger } = deps;
  const c = settings.cluster;
  const store = settings.store;
  if (store.kind !== "redis" || store.url === undefined) {
    throw new GatewayError(
      ErrorCodes.CONFIG_INVALID,
      `gateway.cluster.enabled needs gateway.store.kind "redis" (the replicas share their state there), got "${store.kind}"; set gateway.store to { "kind": "redis", "url": "redis://…" }`,
    );
  }
  if (c.advertiseUrl === undefined || c.secret === undefined) {
    throw new GatewayError(ErrorCodes.CONFIG_INVALID, "gateway.cluster.enabled needs gateway.cluster.advertiseUrl and gateway.cluster.secret");
  }
  // ioredis (CommonJS) is required only by a gateway with replicas (docs/adr/0017-lazy-start.md).
  const { Redis } = createRequire(import.meta.url)("ioredis") as typeof IoRedis;
  const connect = () => {
    const redis = new Redis(store.url!, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2_000,
      commandTimeout: 5_000,
      retryStrategy: (times) => Math.min(times * 50, 1_000),
      ...(store.url!.toLowerCase().startsWith("rediss:") ? { tls: {} } : {}),
    });
    redis.on("error", () => undefined);
    return redis;
  };
  const redis = connect();
  const subscriber = connect();
  const prefix = store.keyPrefix;
  const membership = new Membership({
    redis,
    prefix,
    replicaId: c.replicaId,
    advertiseUrl: c.advertiseUrl,
    secret: c.secret,
    leaseMs: c.leaseMs,
    ownerTtlMs: settings.sessions.idleTimeoutMs + c.leaseMs,
    clock,
    logger,
  });
  const forwarder = createForwarder(c.secret, membership.incarnation);
  const sync = new ServerSync({ redis, subscriber, channel: `${prefix}cluster:servers`, incarnation: membership.incarnation, logger });
  const secrets = new SecretSync({ redis, subscriber, channel: `${prefix}cluster:secrets`, incarnation: membership.incarnation, logger });
  let rawStore: Store | undefined;
  const router = new ClusterRouter({
    membership,
    forwarder,
    secret: c.secret,
    leaseMs: c.leaseMs,
    maxBodyBytes: settings.http.maxBodyBytes,
    adopt: {
      get store(): Store {
        if (!rawStore) throw new GatewayError(ErrorCodes.CLOSED, "the cluster has not started");
        return rawStore;
      },
      registry: deps.registry,
      settings,
      clock,
      newId: deps.newId,
      logger,
    },
    clock,
    logger,
  });
  const peers = createPeers({ membership, forwarder, secret: c.secret, token: settings.token, maxBytes: settings.http.maxBodyBytes * 4 });
  let started = false;
  return {
    incarnation: membership.incarnation,
    router,
    peers,
    wrap: (s) => sync.wrap(s),
    recoveryView: (s) => orphansOnly(s, membership),
    secretChanged: (server, person) => {
      if (started) secrets.announce(server, person);
    },
    onSecretChanged: (handler) => secrets.onChanged(handler),
    async start(s, sessions) {
      rawStore = s;
      try {
        await Promise.all([redis.connect(), subscriber.connect()]);
        await membership.start();
        await sync.start(s, deps.registry, sessions);
        await secrets.start();
      } catch (err) {
        redis.disconnect();
        subscriber.disconnect();
        // A conflict with the live replicas (membership.ts) is the config's fault, not Redis's.
        if (err instanceof GatewayError && err.code === ErrorCodes.CONFIG_INVALID) throw err;
        throw new GatewayError(
          ErrorCodes.STORE_UNAVAILABLE,
          `the cluster could not join through ${redactUrl(store.url!)}: ${errorMessage(err)}; check that Redis is running and reachable`,
          { cause: err },
        );
      }
      started = true;
      logger.info({ incarnation: membership.incarnation, advertiseUrl: c.advertiseUrl }, "cluster_joined");
    },
    async close() {
      router.close();
      await membership.close();
      await sync.close();
      secrets.close();
      forwarder.close();
      if (started) await Promise.allSettled([redis.quit(), subscriber.quit()]);
      redis.disconnect();
      subscriber.disconnect();
    },
  };
}
