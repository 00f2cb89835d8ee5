/**
 * The upstream factory: the one place upstream connections are made
 * (docs/design/upstreams-and-reliability.md, UP-17). A session asks it for
 * a handle and gets its own connection (a warm process when one waits) or
 * its view of the connection all sessions share (docs/adr/0010); shared
 * connections and the start-up check's connections are made here too. It
 * owns the warm pool and the shared connections and is closed after the
 * sessions (gateway.ts wires it).
 */
import type { ClientCapabilities, Implementation, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, IdGenerator } from "../../clock.js";
import type { GatewaySettings } from "../../config/schema.js";
import { isStdioConfig, type ServerConfig } from "../../config/server-entry.js";
import type { Logger } from "../../logging.js";
import type { Store } from "../../store/contracts.js";
import { ReceiverTaskStore, receiverTaskOptions } from "../receiver-tasks.js";
import type { ChildProcessLimiter } from "../children.js";
import type { UpstreamHandlers } from "../client-handlers.js";
import { UpstreamConnection, type UpstreamConnectionOptions } from "../connection.js";
import type { UpstreamHandle } from "../handle.js";
import { configFor, entrySharing, isRuntime, type ServerRegistry } from "../registry.js";
import type { ConnectionPersistence } from "../session-continuation.js";
import type { TransportFactory } from "../transports.js";
import { SharedUpstreams } from "./shared-upstreams.js";
import { withPrincipalAuth } from "../auth/connect.js";
import type { UpstreamOAuth } from "../auth/upstream-oauth.js";
import { WarmPool } from "./warm-pool.js";

/** Who a handle is for, and how it answers what the upstream sends. */
export interface UpstreamAttachment {
  /** The session: a runtime server's credentials are its adder's only (docs/adr/0015); its receiver tasks are stored under it. */
  sessionId: string;
  /** How the session answers and records what the upstream sends (its routing). */
  handlers: UpstreamHandlers;
  logger: Logger;
  /** Declared to an own connection when the downstream client has roots (never to a shared one: ADR 0010). */
  roots?: ClientCapabilities["roots"] | undefined;
  /** What a new connection continues or sets again (upstream session, logging level, subscriptions: ADR 0007). */
  persistence?: ConnectionPersistence | undefined;
  /**
   * The principal the session acts for (issue 23). A server with `auth` is connected with this principal's own
   * credentials: an own connection takes them, and a shared server is shared per principal, never across them.
   */
  principal?: { issuer: string; subject: string } | undefined;
}

/** Makes a session's handle to `server` (as undici's Agent takes a `factory`); connect it with handle.connect(). */
export type UpstreamFactory = (server: string, attachment: UpstreamAttachment) => UpstreamHandle;

export interface UpstreamsOptions {
  registry: ServerRegistry;
  settings: GatewaySettings;
  transportFactory: TransportFactory;
  children: ChildProcessLimiter;
  clientInfo: Implementation;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  /** The open state store (receiver tasks are kept there). */
  store: () => Store;
  /** The OAuth client of servers with `auth` (absent: no vault key, and such servers fail with EMCP_VAULT_UNAVAILABLE). */
  oauth?: (() => UpstreamOAuth) | undefined;
  /** Sees each session handle's tool lists before the gateway uses them (pinned definitions, docs/adr/0029). */
  toolReview?: ((server: string, tools: Tool[]) => Promise<Tool[]>) | undefined;
}

export interface Upstreams {
  /** Handles for sessions: own connection or view of the shared one, as the server's `sharing` says. */
  readonly factory: UpstreamFactory;
  /**
   * A throwaway own connection to `config` (the start-up check): no warm
   * process, no receiver tasks, no liveness pings; the caller closes it.
   */
  readonly probe: (server: string, config: ServerConfig, attachment: Pick<UpstreamAttachment, "handlers" | "logger">) => UpstreamConnection;
  /** Turns the warm pool on (`serve`). */
  start(): void;
  /** Ends the shared connections and the waiting processes (after the sessions have closed). */
  close(): Promise<void>;
}

/** What differs between the connections made here (the rest is the gateway's). */
type ConnectionParts = Pick<UpstreamConnectionOptions, "handlers" | "logger" | "transportFactory"> &
  Partial<Pick<UpstreamConnectionOptions, "roots" | "persistence" | "receiverTasks" | "runtime" | "livenessPingMs">>;

export function createUpstreams(o: UpstreamsOptions): Upstreams {
  const { registry, settings, children, clientInfo, clock, logger } = o;
  const { upstream } = settings;

  /** The one `new UpstreamConnection`. */
  const connection = (name: string, config: ServerConfig, parts: ConnectionParts): UpstreamConnection =>
    new UpstreamConnection({
      name,
      config,
      clientInfo,
      children,
      clock,
      connectTimeoutMs: upstream.connectTimeoutMs,
      requestTimeoutMs: upstream.requestTimeoutMs,
      livenessPingMs: upstream.livenessPingMs,
      pingTimeoutMs: upstream.pingTimeoutMs,
      ...parts,
    });
  /** Receiver tasks live and die with the connection they are made for. */
  const receivers = (sessionId: string, server: string, log: Logger) =>
    new ReceiverTaskStore(receiverTaskOptions(settings.tasks, { sessionId, server, store: o.store().tasks, logger: log, clock, newId: o.newId }));

  const warm = new WarmPool(o.transportFactory, {
    size: upstream.warmPool,
    children,
    logger,
    warmable: (name) => {
      const entry = registry.get(name);
      return entry && isStdioConfig(entry.config) && entrySharing(entry, settings) === "session" ? entry.config : undefined;
    },
  });
  children.reclaim = (server) => warm.reclaim(server);
  registry.onChange((name) => warm.evict(name));

  /** Shared connections of one principal (servers with `auth`), or of everyone (`undefined`). */
  const sharedFor = (principal: { issuer: string; subject: string } | undefined) =>
    new SharedUpstreams(
      registry,
      {
        requestTimeoutMs: upstream.requestTimeoutMs,
        connection: (name, parts) => {
          const entry = registry.require(name);
          return connection(name, entry.config, {
            ...parts,
            logger,
            // Shared runtime servers have no credentials (entrySharing); their URL rules still apply (docs/adr/0015).
            runtime: isRuntime(entry),
            transportFactory: withPrincipalAuth(o.transportFactory, entry.config, name, principal, o.oauth),
            receiverTasks: receivers(`shared:${name}`, name, logger),
            // No `roots`: servers cache the roots per connection, and one session's roots must not reach another's calls (ADR 0010).
          });
        },
      },
      logger,
    );
  const shared = sharedFor(undefined);
  /** Per principal, keyed by JSON of (issuer, subject): a connection made with one person's token serves only that person. */
  const sharedByPrincipal = new Map<string, SharedUpstreams>();

  const factory: UpstreamFactory = (server, a) => {
    const handle = sessionHandle(server, a);
    const review = o.toolReview;
    if (review) handle.toolReview = (tools) => review(server, tools);
    return handle;
  };

  const sessionHandle: UpstreamFactory = (server, a) => {
    const entry = registry.require(server);
    const config = configFor(entry, a.sessionId);
    const perPrincipal = !isStdioConfig(entry.config) && entry.config.auth !== undefined;
    if (entrySharing(entry, settings) === "shared") {
      if (!perPrincipal) return shared.attach(server, { handlers: a.handlers, persistence: a.persistence });
      const key = JSON.stringify([a.principal?.issuer ?? "", a.principal?.subject ?? ""]);
      let mine = sharedByPrincipal.get(key);
      if (!mine) sharedByPrincipal.set(key, (mine = sharedFor(a.principal)));
      return mine.attach(server, { handlers: a.handlers, persistence: a.persistence });
    }
    // A runtime server's credentials only for the session that added it (docs/adr/0015).
    return connection(server, config, {
      handlers: a.handlers,
      logger: a.logger,
      roots: a.roots,
      persistence: a.persistence,
      runtime: isRuntime(entry),
      transportFactory: perPrincipal ? withPrincipalAuth(warm.factory, config, server, a.principal, o.oauth) : warm.factory,
      receiverTasks: receivers(a.sessionId, server, a.logger),
    });
  };

  return {
    factory,
    probe: (server, config, a) => connection(server, config, { ...a, transportFactory: o.transportFactory, livenessPingMs: 0 }),
    start: () => warm.start(),
    async close() {
      await shared.close();
      await Promise.all([...sharedByPrincipal.values()].map((s) => s.close()));
      await warm.close();
    },
  };
}
