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
import type { TransportFactory } from "../transport-types.js";
import { SharedUpstreams } from "./shared-upstreams.js";
import { ANONYMOUS, withPrincipalAuth } from "../auth/connect.js";
import { isPassthrough, warnPassthrough, withPassthrough } from "../auth/passthrough.js";
import { isTokenExchange, TokenExchanges, withTokenExchange } from "../auth/token-exchange.js";
import { hasSecrets, type UpstreamSecrets } from "../auth/secrets.js";
import { inboundTokenOf } from "../../auth/principal.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { UpstreamOAuth } from "../auth/upstream-oauth.js";
import { WarmPool } from "./warm-pool.js";
import { WarmConnection } from "./warm-connection.js";
import { KnownServers } from "../known-servers.js";

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
  /**
   * The session serves one 2026-07-28 request (stateless: it ends with its answer). A session-mode server is then
   * reached through the principal's lingering connection instead of a process of its own per request (docs/adr/0058).
   */
  stateless?: boolean | undefined;
}

/** Makes a session's handle to `server` (as undici's Agent takes a `factory`); connect it with handle.connect(). */
export type UpstreamFactory = (server: string, attachment: UpstreamAttachment) => UpstreamHandle;

export interface UpstreamsOptions {
  registry: ServerRegistry;
  settings: GatewaySettings;
  transportFactory: TransportFactory;
  /** The start-up check's connections (default transportFactory): never a process started early for a session (docs/adr/0039). */
  probeTransportFactory?: TransportFactory | undefined;
  children: ChildProcessLimiter;
  clientInfo: Implementation;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  /** The open state store (receiver tasks are kept there). */
  store: () => Store;
  /** The OAuth client of servers with `auth` (absent: no vault key, and such servers fail with EMCP_VAULT_UNAVAILABLE). */
  oauth?: (() => UpstreamOAuth) | undefined;
  /** Per-user secrets of servers with `secrets` (absent: no vault key, and such servers fail with EMCP_VAULT_UNAVAILABLE). */
  secrets?: (() => UpstreamSecrets) | undefined;
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
  /**
   * For the start-up check of a config server in shared mode whose connection is everyone's (not one principal's):
   * a view of that shared connection, which the check connects and then leaves (the connection stays for the
   * sessions: docs/adr/0039 §7). Else undefined, and the check makes its own throwaway connection (`probe`).
   */
  readonly sharedCheck: (server: string, attachment: Pick<UpstreamAttachment, "handlers">) => UpstreamHandle | undefined;
  /** What each server answered when last connected (a transparent session's initialize answers from it: docs/adr/0034). */
  readonly known: KnownServers;
  /**
   * Drops `principal`'s live connections to `server` (own and shared), so their next use connects with the config
   * resolved again: a secret they replaced or removed is not used by a process started with the old one.
   */
  renew(server: string, principal: PrincipalRef | undefined): void;
  /** Entries of the per-principal maps (tests): (server, principal) keys with live connections, principals' shared sets, their newest principals. */
  perPrincipal(): { connections: number; shared: number; principals: number; stateless: number };
  /** A session opened: the warm pool starts no process while sessions are opening (docs/adr/0044 §7). */
  opening(): void;
  /** Turns the warm pool on (`serve`). */
  start(): void;
  /** Ends the shared connections and the waiting processes (after the sessions have closed). */
  close(): Promise<void>;
}

/** What differs between the connections made here (the rest is the gateway's). */
type ConnectionParts = Pick<UpstreamConnectionOptions, "handlers" | "logger" | "transportFactory"> &
  Partial<
    Pick<UpstreamConnectionOptions, "roots" | "persistence" | "receiverTasks" | "clientTaskStore" | "runtime" | "livenessPingMs" | "resolveConfig" | "children">
  >;

export type PrincipalRef = { issuer: string; subject: string };

/**
 * Whether connections to `config` carry one person's credentials (OAuth, secrets, their forwarded token): such a
 * connection is never used for another principal, in session and shared mode, and never comes from the warm pool.
 */
export function principalBound(config: ServerConfig): boolean {
  return hasSecrets(config) || isPassthrough(config) || isTokenExchange(config) || (!isStdioConfig(config) && config.auth !== undefined);
}

/**
 * The key of a principal's connections (shared per principal): JSON of [issuer, subject], "" for both without
 * authentication. The warm pool never serves principalBound servers, so it needs no key (issue 23).
 */
export function principalKey(principal: PrincipalRef | undefined): string {
  return JSON.stringify([principal?.issuer ?? "", principal?.subject ?? ""]);
}

/**
 * What of an own connection's `initialize` differs between sessions: the `roots` it declares (the downstream
 * client's). The rest is the gateway's (clientInfo, elicitation, sampling, tasks: every session connection has
 * receiver tasks). A connection made ahead with one key is taken only by a session with the same key.
 */
export function capabilityKey(roots: ClientCapabilities["roots"] | undefined): string {
  return JSON.stringify(roots ?? null);
}

function rootsOfKey(key: string): ClientCapabilities["roots"] | undefined {
  return (JSON.parse(key) as ClientCapabilities["roots"] | null) ?? undefined;
}

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

  const warm = new WarmPool<WarmConnection>(o.transportFactory, {
    size: upstream.warmPool,
    windowMs: upstream.warmPoolWindowMs,
    idleMs: upstream.warmPoolIdleMs,
    clock,
    children,
    logger,
    warmable: (name) => {
      const entry = registry.get(name);
      // A process started with one person's secrets is theirs: never warmed ahead for whoever comes next.
      return entry && isStdioConfig(entry.config) && !principalBound(entry.config) && entrySharing(entry, settings) === "session" ? entry.config : undefined;
    },
    // Connected ahead (docs/adr/0044): the process's own child slot is the pool's until a session takes it.
    initialize: (name, config, created, key, lost) =>
      new WarmConnection(
        (parts) => connection(name, config, { ...parts, logger, roots: rootsOfKey(key), transportFactory: () => created, children: undefined }),
        lost,
        logger,
      ),
  });
  children.reclaim = (server) => warm.reclaim(server);
  registry.onChange((name) => warm.evict(name));
  // The operator's passthrough opt-in is warned about at start and whenever a reload sets it (never with a token).
  for (const e of registry.list()) if (!isRuntime(e) && isPassthrough(e.config)) warnPassthrough(logger, e.name);
  registry.onChange((name) => {
    const e = registry.get(name);
    if (e && !isRuntime(e) && isPassthrough(e.config)) warnPassthrough(logger, name);
  });

  /** Exchanged tokens of servers with `auth: token_exchange`, per principal (memory, bounded: docs/adr/0027 §16). */
  const exchanges = new TokenExchanges({ clock, logger, refreshAheadMs: settings.vault.refreshAheadMs });

  /** A principal's credentials on a transport factory (OAuth token, forwarded token) and in the config (secrets). */
  const credentialed = (
    name: string,
    config: ServerConfig,
    base: TransportFactory,
    principal: PrincipalRef | undefined,
    runtime: boolean,
    bearer: () => string | undefined = () => inboundTokenOf(principal),
  ) => {
    const owner = principal ? { issuer: principal.issuer, subject: principal.subject } : ANONYMOUS;
    // Runtime servers cannot set passthrough or secrets (add_server has no such keys); refused here too, as a second wall.
    const passthrough = runtime ? base : withTokenExchange(withPassthrough(base, config, name, bearer), config, name, principal, bearer, exchanges);
    const secrets = o.secrets;
    const resolveConfig =
      hasSecrets(config) && !runtime
        ? (c: ServerConfig) => {
            if (!secrets) {
              throw new GatewayError(
                ErrorCodes.VAULT_UNAVAILABLE,
                `server ${name} takes per-person secrets, which need the vault: set EMCEEPEE_VAULT_KEY (or gateway.vault.keys / keyFile), e.g. from \`openssl rand -base64 32\``,
                { details: { server: name } },
              );
            }
            return secrets().resolve(name, c, owner);
          }
        : undefined;
    return { transportFactory: withPrincipalAuth(passthrough, config, name, principal, o.oauth), ...(resolveConfig ? { resolveConfig } : {}) };
  };

  /** Live principal-bound connections by server and principalKey() (renew() drops them); each leaves when it ends, and its key with the last. */
  const bound = new Map<string, Set<UpstreamConnection>>();
  /** `onEnded` of a principal-bound connection to `server` for `principal`: call track() with the connection once made. */
  const tracking = (server: string, principal: PrincipalRef | undefined) => {
    const k = `${server} ${principalKey(principal ?? ANONYMOUS)}`;
    let conn: UpstreamConnection | undefined;
    let ended = false;
    return {
      onEnded: () => {
        ended = true;
        const set = bound.get(k);
        if (!conn || !set?.delete(conn) || set.size > 0) return;
        bound.delete(k);
      },
      track: (made: UpstreamConnection): UpstreamConnection => {
        conn = made;
        if (ended) return made;
        let set = bound.get(k);
        if (!set) bound.set(k, (set = new Set()));
        set.add(made);
        return made;
      },
    };
  };

  /**
   * Shared connections of one principal (servers with `auth` or secrets), or of everyone (`undefined`). A principal's
   * close when their last session leaves, and `unused` is called when none is left (the set is forgotten).
   */
  const sharedFor = (principal: PrincipalRef | undefined, bearer?: () => string | undefined, unused?: () => void, stateless?: { lingerMs: number }) =>
    new SharedUpstreams(
      registry,
      {
        requestTimeoutMs: upstream.requestTimeoutMs,
        connection: (name, parts) => {
          const entry = registry.require(name);
          const t = principalBound(entry.config) ? tracking(name, principal) : undefined;
          const made = connection(name, entry.config, {
            ...parts,
            logger,
            // Shared runtime servers have no credentials (entrySharing); their URL rules still apply (docs/adr/0015).
            runtime: isRuntime(entry),
            // A stateless set's connection to a session-mode server may take the process started early or warm (ADR 0044).
            ...credentialed(
              name,
              entry.config,
              stateless && !principalBound(entry.config) ? warm.factory : o.transportFactory,
              principal,
              isRuntime(entry),
              bearer,
            ),
            receiverTasks: receivers(`shared:${name}`, name, logger),
            ...(t ? { onEnded: t.onEnded } : {}),
            // No `roots`: servers cache the roots per connection, and one session's roots must not reach another's calls (ADR 0010).
          });
          return t ? t.track(made) : made;
        },
        ...(unused ? { unused } : {}),
        ...(stateless ? { linger: { ms: stateless.lingerMs, clock } } : {}),
      },
      logger,
    );
  const shared = sharedFor(undefined);
  /**
   * Sets of shared connections keyed by principalKey(): a connection made with one person's credentials serves only
   * that person. A set is made on its principal's first use and forgotten (closed) when its last connection leaves.
   * `bearer` reads the newest principal object seen for the key: a forwarded token is the newest one (passthrough).
   */
  const principalSets = (stateless?: { lingerMs: number }) => {
    const sets = new Map<string, { upstreams: SharedUpstreams; principal: PrincipalRef | undefined }>();
    return {
      sets,
      for(principal: PrincipalRef | undefined): SharedUpstreams {
        const key = principalKey(principal);
        const have = sets.get(key);
        if (have) {
          if (principal) have.principal = principal;
          return have.upstreams;
        }
        const made: { upstreams: SharedUpstreams; principal: PrincipalRef | undefined } = {
          principal,
          upstreams: sharedFor(
            principal,
            () => inboundTokenOf(made.principal),
            () => {
              if (sets.get(key) !== made) return;
              sets.delete(key);
              void made.upstreams.close();
            },
            stateless,
          ),
        };
        sets.set(key, made);
        return made.upstreams;
      },
    };
  };
  /** Servers with `auth` or secrets in shared mode: each principal's own shared set. */
  const sharedByPrincipal = principalSets();
  /**
   * The connections 2026-07-28 requests use to session-mode servers. Each request's session ends with its answer;
   * the connection stays idleReleaseMs for the principal's next request (docs/adr/0058).
   */
  const statelessByPrincipal = principalSets({ lingerMs: upstream.idleReleaseMs });

  const known = new KnownServers();
  registry.onChange((name) => known.forget(name));
  /**
   * Every connect that succeeds teaches `known` what the server answers (for the server's config in the registry). Only a
   * session's own first connect counts as under way (KnownServers.answerFor): the start-up check's, niced and thrown away
   * in session mode, is slower than the early process a first session takes (ADR 0039 §6).
   */
  const learning = <H extends UpstreamHandle>(server: string, config: ServerConfig, handle: H): H => {
    const connect = handle.connect.bind(handle);
    handle.connect = async () => {
      await connect();
      if (known.learn(server, config, handle)) logger.info({ server }, "upstream_capabilities_changed");
    };
    return handle;
  };

  const factory: UpstreamFactory = (server, a) => {
    const handle = learning(server, registry.require(server).config, sessionHandle(server, a));
    const review = o.toolReview;
    if (review) handle.toolReview = (tools) => review(server, tools);
    return handle;
  };

  const sessionHandle: UpstreamFactory = (server, a) => {
    const entry = registry.require(server);
    const config = configFor(entry, a.sessionId);
    const perPrincipal = principalBound(entry.config);
    if (entrySharing(entry, settings) === "shared") {
      if (!perPrincipal) return shared.attach(server, { handlers: a.handlers, persistence: a.persistence });
      const mine = sharedByPrincipal.for(a.principal);
      return mine.attach(server, { handlers: a.handlers, persistence: a.persistence });
    }
    // A stateless request has no session to give a process to: its principal's lingering connection serves it, one
    // request at a time (what the upstream asks mid-call is then always that request's, as in a session of its own).
    // An own one, as before, while another request holds it; when it declares roots (a connection declaring them is
    // asked for that request's roots and may keep them); with idleReleaseMs 0 (kept for a session's life: one request).
    if (a.stateless && a.roots === undefined && !isRuntime(entry) && upstream.idleReleaseMs > 0) {
      const mine = statelessByPrincipal.for(a.principal);
      if ((mine.get(server)?.attached ?? 0) === 0) return mine.attach(server, { handlers: a.handlers, persistence: a.persistence });
    }
    if (!perPrincipal && !isRuntime(entry)) {
      // Connected ahead with this session's capabilities (docs/adr/0044): it becomes the session's, handlers and all.
      const ahead = warm.takeAhead(server, config, capabilityKey(a.roots));
      if (ahead) {
        const parts = { handlers: a.handlers, logger: a.logger, persistence: a.persistence, receiverTasks: receivers(a.sessionId, server, a.logger) };
        return ahead.value.take(parts, ahead.release);
      }
    }
    // A runtime server's credentials only for the session that added it (docs/adr/0015).
    const t = perPrincipal ? tracking(server, a.principal) : undefined;
    const own = connection(server, config, {
      handlers: a.handlers,
      logger: a.logger,
      roots: a.roots,
      persistence: a.persistence,
      runtime: isRuntime(entry),
      // A principal's own process or session is made for them, never taken from the warm pool.
      ...(perPrincipal ? credentialed(server, config, o.transportFactory, a.principal, isRuntime(entry)) : { transportFactory: warm.factory }),
      receiverTasks: receivers(a.sessionId, server, a.logger),
      ...(t ? { onEnded: t.onEnded } : {}),
    });
    return t ? t.track(own) : own;
  };

  return {
    factory,
    renew(server, principal) {
      for (const conn of bound.get(`${server} ${principalKey(principal ?? ANONYMOUS)}`) ?? []) conn.renew("the person's secret for it changed");
    },
    perPrincipal: () => ({
      connections: bound.size,
      shared: sharedByPrincipal.sets.size,
      principals: [...sharedByPrincipal.sets.values()].filter((s) => s.principal !== undefined).length,
      stateless: statelessByPrincipal.sets.size,
    }),
    probe: (server, config, a) =>
      learning(server, config, connection(server, config, { ...a, transportFactory: o.probeTransportFactory ?? o.transportFactory, livenessPingMs: 0 })),
    sharedCheck: (server, a) => {
      const entry = registry.get(server);
      if (!entry || isRuntime(entry) || entrySharing(entry, settings) !== "shared" || principalBound(entry.config)) return undefined;
      return learning(server, entry.config, shared.attach(server, { handlers: a.handlers }));
    },
    known,
    start: () => warm.start(),
    opening: () => warm.opening(),
    async close() {
      await shared.close();
      await Promise.all([...sharedByPrincipal.sets.values(), ...statelessByPrincipal.sets.values()].map((s) => s.upstreams.close()));
      await warm.close();
    },
  };
}
