/**
 * createGateway(config, deps): the composition root. (Over 400 lines on
 * purpose: it is the one place where every part is created, started and
 * closed, and the order of those steps is read here in one piece; the parts'
 * own wiring lives beside them, e.g. upstream-sharing.ts, recovery.ts.) Wires the registry,
 * session manager and faces, and serves them over HTTP (listen) or stdio
 * (serveStdio). close() drains everything: sessions, upstream connections,
 * child processes (each stdio upstream's whole process group) and timers;
 * destroy() SIGKILLs those groups at once, for a forced exit.
 *
 * State: "starting" → "ready" (listening, or serving stdio) → "closing".
 * /healthz says "ok" whenever the process answers; /readyz is 200 only while
 * ready. close() keeps the listener open until the upstreams are gone, so
 * probes see 503 through the whole shutdown while MCP requests get 503 too.
 * checkUpstreams() and reload() are the operator's: a one-off reachability
 * check per server (upstream-check.ts) and a re-read config applied to the
 * config-file servers (reload.ts).
 *
 * The state store (`gateway.store`, docs/adr/0007) is opened once, by the
 * first listen()/serveStdio(), before any session exists: then recovery.ts
 * settles what a previous process left in it and brings back the servers
 * added at runtime, and a sweep timer deletes expired rows. A store that
 * cannot be opened fails the start (EMCP_STORE_UNAVAILABLE), never falls back
 * to memory. close() closes it last; an injected `deps.store` is the caller's.
 * /readyz is also 503 (`store_unavailable`) while the store's health check
 * fails (checked at most once per READY_CHECK_MS, so probes stay cheap).
 *
 * Replicas (src/cluster, ADR 0013): with gateway.cluster.enabled the store is
 * wrapped so server changes reach the other replicas, start-up recovery only
 * settles orphaned sessions, and the endpoints route sessions they do not hold.
 *
 * Observability (src/observability, ADR 0011): metrics and tracing are built
 * here and hooked in at four places — the upstream transport factory, each
 * face's server transport, the store (timed), and the `/metrics` page.
 */
import type http from "node:http";
import type { TracerProvider } from "@opentelemetry/api";
import { createRequire } from "node:module";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { systemClock, ulidGenerator, type Clock, type IdGenerator } from "../clock.js";
import { createCluster, type Cluster } from "../cluster/index.js";
import { createConsole } from "../console/index.js";
import type { GatewayConfig, GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { createMetaServer } from "../faces/meta/server.js";
import { createTransparentServer } from "../faces/transparent/server.js";
import { McpEndpoint } from "../http/mcp-endpoint.js";
import { createHttpServer, listen } from "../http/server.js";
import { silentLogger, type Logger } from "../logging.js";
import { Observability } from "../observability/observability.js";
import { SessionManager } from "../session/session-manager.js";
import type { Session } from "../session/session.js";
import type { Store } from "../store/contracts.js";
import { openStore } from "../store/open.js";
import { ChildProcessLimiter, ProcessGroups } from "../upstream/children.js";
import { ServerRegistry } from "../upstream/registry.js";
import { createTransportFactory, type TransportFactory } from "../upstream/transports.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { recoverState, sweepStoreLogged } from "./recovery.js";
import { changedSettings, reloadServers, type ReloadReport } from "./reload.js";
import { UpstreamChecker, type UpstreamCheckResult } from "./upstream-check.js";
import { createUpstreamSharing } from "../upstream/sharing/factory.js";

/** A path segment's text, or "" for malformed percent-encoding (no server has that name: 404). */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}

const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };

export type StdioFace = { kind: "meta" } | { kind: "all" } | { kind: "server"; server: string };

export type GatewayState = "starting" | "ready" | "closing";

/** What reload() did, and the `gateway` settings that differ but need a restart. */
export interface GatewayReloadReport extends ReloadReport {
  settingsChanged: string[];
}

export interface GatewayDeps {
  clock?: Clock;
  newId?: IdGenerator;
  logger?: Logger;
  transportFactory?: TransportFactory;
  /** The state store, already open (tests, benches); else `gateway.store` is opened at start. Closing it stays the caller's. */
  store?: Store;
  /** Traces go to this provider (tests: an in-memory exporter); else the OTEL_* environment decides (off by default). */
  tracerProvider?: TracerProvider;
}

/** How long a /readyz store health check answers for later probes. */
const READY_CHECK_MS = 1_000;
/** A store health check that takes longer counts as failed. */
const READY_CHECK_TIMEOUT_MS = 2_000;

export interface Gateway {
  readonly context: GatewayContext;
  readonly state: GatewayState;
  /** Serves HTTP; resolves with the MCP URL once listening. */
  listen(): Promise<{ url: string; port: number }>;
  /** Serves one session over stdin/stdout with the chosen face. */
  serveStdio(options?: { face?: StdioFace; stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream }): Promise<Session>;
  close(): Promise<void>;
  /**
   * One throwaway connection per server (default: every config-file server),
   * closed before its result is logged as `upstream_check_ok` or
   * `upstream_check_failed` (with the reason). Never throws.
   */
  checkUpstreams(names?: readonly string[]): Promise<UpstreamCheckResult[]>;
  /**
   * Applies a re-read config file: config-file servers added, removed or
   * changed for every session (runtime-added ones untouched). Settings are not
   * re-applied; `settingsChanged` names those that differ. One reload at a time.
   */
  reload(config: GatewayConfig): Promise<GatewayReloadReport>;
  /**
   * Kills now, synchronously: SIGKILL to every stdio upstream's process group
   * this gateway started (its transports; an injected transportFactory is on
   * its own). Nothing is drained; for a forced exit and `process.on('exit')`.
   */
  destroy(): void;
}

export function createGateway(config: GatewayConfig, deps: GatewayDeps = {}): Gateway {
  const settings = config.gateway;
  const clock = deps.clock ?? systemClock;
  const newId = deps.newId ?? ulidGenerator(clock);
  const logger = deps.logger ?? silentLogger;
  const registry = new ServerRegistry();
  for (const [name, serverConfig] of Object.entries(config.mcpServers)) {
    registry.add({ name, config: serverConfig, addedAt: clock.now(), addedBy: "config" });
  }
  const groups = new ProcessGroups();
  const observability = new Observability({ settings, version: pkg.version, logger, tracerProvider: deps.tracerProvider });
  const transportFactory = observability.transportFactory(
    deps.transportFactory ??
      createTransportFactory({
        killGraceMs: settings.upstream.killGraceMs,
        maxMessageBytes: settings.upstream.maxMessageBytes,
        groups,
        runtimeUrls: settings.servers.runtimeUrls,
      }),
  );
  const children = new ChildProcessLimiter(settings.upstream.maxChildProcesses);
  const clientInfo = { name: "emceepee", version: pkg.version };
  // Opened by start(); sessions exist only after it, so every reader below finds it open.
  let store: Store | undefined = deps.store && observability.store(deps.store);
  const openedStore = (): Store => {
    if (!store) throw new GatewayError(ErrorCodes.CLOSED, "the state store is not open: the gateway has not started (listen() or serveStdio())");
    return store;
  };
  // The warm pool and shared connections (docs/adr/0010).
  const sharing = createUpstreamSharing({ registry, settings, transportFactory, children, clientInfo, clock, newId, logger, store: openedStore });
  const sessions = new SessionManager({
    registry,
    settings,
    clock,
    newId,
    logger,
    transportFactory: sharing.transportFactory,
    get store() {
      return openedStore();
    },
    clientInfo,
    children,
    shared: sharing.shared,
  });
  const checker = new UpstreamChecker({ transportFactory, children, clientInfo, settings, logger });
  const context: GatewayContext = {
    registry,
    sessions,
    settings,
    clock,
    newId,
    logger,
    version: pkg.version,
    get store() {
      return openedStore();
    },
  };
  observability.watch({ sessions, registry, children, store: () => store });
  const tap = (transport: Transport, session: Session, protocolVersion?: string) => observability.tapServer(transport, session, "tcp", protocolVersion);
  // Replicas sharing a Redis store (docs/adr/0013): endpoints route sessions they do not hold through it.
  const cluster: Cluster | undefined = settings.cluster.enabled ? createCluster({ settings, registry, clock, newId, logger }) : undefined;
  const router = cluster?.router;
  const meta = new McpEndpoint(context, {
    face: (session) => {
      observability.faces.opened(session.id, "meta", "tcp");
      return createMetaServer({ session, gateway: context });
    },
    tap,
    router,
    // Lazy by default: listing servers must not spawn them; a session connects a server on first use.
    connectAll: settings.upstream.eagerConnect,
    attachable: true,
    kind: { kind: "meta" },
  });
  const separator = settings.transparent.separator;
  const all = new McpEndpoint(context, {
    face: (session, init) => {
      observability.faces.opened(session.id, "all", "tcp");
      return createTransparentServer({ session, gateway: context, target: { kind: "all", separator }, init });
    },
    tap,
    router,
    connectAll: false,
    kind: { kind: "all" },
  });
  const perServer = new Map<string, McpEndpoint>();
  const serverEndpoint = (name: string): McpEndpoint | undefined => {
    if (!registry.get(name)) return perServer.get(name);
    let endpoint = perServer.get(name);
    if (!endpoint) {
      endpoint = new McpEndpoint(context, {
        face: (session, init) => {
          observability.faces.opened(session.id, "server", "tcp");
          return createTransparentServer({ session, gateway: context, target: { kind: "server", server: name }, init }).catch((err: unknown) => {
            throw singleFaceUnavailable(name, session, err);
          });
        },
        tap,
        router,
        connectAll: false,
        kind: { kind: "server", server: name },
      });
      perServer.set(name, endpoint);
    }
    return endpoint;
  };
  // The web console at /console (docs/adr/0012-console.md), a page after the guards; with replicas it shows them all.
  const webConsole = settings.console.enabled ? createConsole({ context, childProcesses: () => children.count, peers: cluster?.peers }) : undefined;
  const endpoints = () => [meta, all, ...perServer.values()];
  sessions.onDestroyed = (id) => endpoints().forEach((e) => e.release(id));
  const routes = {
    describe: "/mcp (meta-tools), /all/mcp (all upstreams, prefixed), /servers/<name>/mcp (one upstream)",
    endpoint(path: string): McpEndpoint | undefined {
      if (path === "/mcp") return meta;
      if (path === "/all/mcp") return all;
      const m = /^\/servers\/([^/]+)\/mcp$/.exec(path);
      return m ? serverEndpoint(decodePathSegment(m[1]!)) : undefined;
    },
  };
  let httpServer: http.Server | undefined;
  let stdioClose: (() => Promise<void>) | undefined;
  let closing: Promise<void> | undefined;
  let state: GatewayState = "starting";
  let reloading: Promise<unknown> = Promise.resolve();
  let currentSettings: GatewaySettings = settings;
  let starting: Promise<void> | undefined;
  let sweepTimer: ReturnType<Clock["setTimeout"]> | undefined;
  let sweeping: Promise<void> = Promise.resolve();
  // A function, so that checks after an await read the state then (not the narrowed one before it).
  const closingNow = () => state === "closing";
  /** The store start() opened, unwrapped (for announce and problem). */
  let opened: Store | undefined;
  let storeCheck: { at: number; ok: boolean } | undefined;
  let storeChecking: Promise<boolean> | undefined;
  /** The store's health, asked at most once per READY_CHECK_MS (concurrent probes share one check). */
  const storeHealthy = (): boolean | Promise<boolean> => {
    const current = store;
    if (!current) return true;
    if (storeCheck && clock.now() - storeCheck.at < READY_CHECK_MS) return storeCheck.ok;
    storeChecking ??= boundedHealthCheck(current, clock).then((ok) => {
      storeCheck = { at: clock.now(), ok };
      storeChecking = undefined;
      if (!ok) logger.warn({ store: current.kind, location: current.location, reason: (opened ?? deps.store)?.problem?.() }, "store_unhealthy");
      return ok;
    });
    return storeChecking;
  };
  const readiness = (storeOk: boolean) => {
    if (state !== "ready") return { status: 503, body: { status: state === "closing" ? "shutting_down" : "starting" } };
    return storeOk ? { status: 200, body: { status: "ready" } } : { status: 503, body: { status: "store_unavailable" } };
  };
  const probes = {
    // Liveness and readiness only: no counts, names or versions (these answer without a token).
    "/healthz": () => ({ status: 200, body: { status: "ok" } }),
    "/readyz": () => {
      if (state !== "ready") return readiness(true);
      const ok = storeHealthy();
      return typeof ok === "boolean" ? readiness(ok) : ok.then(readiness);
    },
  };
  const unavailable = () => (state === "closing" ? "the gateway is shutting down; reconnect when it is back" : undefined);

  /** Opens the store, settles what the last process left in it, then starts the sweeps. Once. */
  function start(): Promise<void> {
    starting ??= (async () => {
      if (state === "closing") throw new GatewayError(ErrorCodes.CLOSED, "the gateway is shutting down");
      let raw: Store | undefined;
      if (!store) {
        // Exclusive: a second gateway on the same SQLite file is refused, naming this one (ADR 0007, "One gateway per file").
        raw = await openStore(settings.store, { clock, exclusive: true, logger });
        opened = raw;
        store = observability.store(cluster ? cluster.wrap(raw) : raw);
      }
      if (cluster) await cluster.start(raw ?? store, sessions);
      const report = await recoverState({ store: cluster ? cluster.recoveryView(store) : store, registry, settings, clock, newId, logger });
      logger.info({ store: store.kind, location: store.location, ...report }, "state_recovered");
      if (closingNow()) return; // close() ran meanwhile: no timers
      sessions.start();
      scheduleSweep();
    })();
    return starting;
  }

  /** Deletes expired task and pending-request rows every sessions.sweepIntervalMs. */
  function scheduleSweep(): void {
    sweepTimer = clock.setTimeout(() => {
      sweeping = sweepStoreLogged(openedStore(), clock.now(), logger).then(async () => {
        await storeHealthy(); // logs store_unhealthy with the reason, also when no probe asks (a deleted file, a full disk)
        if (!closingNow()) scheduleSweep();
      });
    }, settings.sessions.sweepIntervalMs);
  }

  async function checkUpstreams(names?: readonly string[]): Promise<UpstreamCheckResult[]> {
    const wanted = names ?? registry.list().flatMap((e) => (e.addedBy === "config" ? [e.name] : []));
    const servers = wanted.flatMap((name) => {
      const entry = registry.get(name);
      return entry ? [[name, entry.config] as const] : [];
    });
    const results = await checker.checkAll(servers);
    for (const r of results) {
      if (r.ok) logger.info({ server: r.server, tools: r.tools, serverInfo: r.serverInfo }, "upstream_check_ok");
      else logger.warn({ server: r.server, reason: r.reason }, "upstream_check_failed");
    }
    return results;
  }

  return {
    context,
    get state() {
      return state;
    },
    async listen() {
      await start();
      sharing.start();
      httpServer = createHttpServer(
        settings,
        { ...routes, probes, unavailable, pages: [...observability.pages(), ...(webConsole ? [webConsole.handle] : [])] },
        logger,
      );
      webConsole?.start();
      const address = await listen(httpServer, settings.host, settings.port);
      await opened?.announce?.({ port: address.port }).catch((err: unknown) => logger.warn({ err: errorMessage(err) }, "store_owner_not_recorded"));
      if (state === "starting") state = "ready";
      const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
      return { url: `http://${host}:${address.port}/mcp`, port: address.port };
    },
    checkUpstreams,
    reload(next) {
      const run = reloading.then(async (): Promise<GatewayReloadReport> => {
        if (state === "closing") throw new GatewayError(ErrorCodes.CLOSED, "the gateway is shutting down; the config was not reloaded");
        const report = await reloadServers(registry, sessions, next.mcpServers);
        const settingsChanged = changedSettings(currentSettings, next.gateway);
        currentSettings = next.gateway;
        return { ...report, settingsChanged };
      });
      reloading = run.catch(() => undefined);
      return run;
    },
    async serveStdio({ face = { kind: "meta" } as StdioFace, stdin = process.stdin, stdout = process.stdout } = {}) {
      await start();
      // One session per process: it lives as long as stdin, never expired as one-shot.
      const session = sessions.create({ connect: face.kind === "meta" && settings.upstream.eagerConnect, oneShot: false });
      observability.faces.opened(session.id, "stdio", "pipe");
      const server =
        face.kind === "meta"
          ? createMetaServer({ session, gateway: context })
          : await createTransparentServer({
              session,
              gateway: context,
              target: face.kind === "server" ? { kind: "server", server: face.server } : { kind: "all", separator },
            });
      const transport = new StdioServerTransport(stdin as never, stdout as never);
      await server.connect(transport);
      observability.tapServer(transport, session, "pipe");
      stdioClose = () => server.close();
      if (state === "starting") state = "ready";
      return session;
    },
    close() {
      closing ??= (async () => {
        // From here /readyz says 503 and MCP requests get 503 (probes keep answering until the listener closes, last).
        state = "closing";
        // Operator log events (design EV-13): registry_shutdown_start / registry_shutdown_complete.
        logger.info({ serverCount: registry.names().length, sessionCount: sessions.size }, "registry_shutdown_start");
        await checker.close();
        // A start in progress finishes first (its store is then closed below).
        await starting?.catch(() => undefined);
        clock.clearTimeout(sweepTimer);
        webConsole?.close();
        // Leaves the cluster first: the other replicas adopt this one's sessions without waiting for its lease.
        await cluster?.close();
        await Promise.allSettled(endpoints().map((e) => e.close()));
        await stdioClose?.().catch(() => undefined);
        await sessions.close();
        await sharing.close();
        // Groups whose leader crashed are still being reaped in the background: wait for them too.
        await groups.terminateAll();
        if (httpServer) {
          const server = httpServer;
          await new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          });
        }
        await sweeping;
        // Last: everything above may still write (sessions keep their records for the next start).
        if (store && !deps.store) await store.close().catch((err: unknown) => logger.error({ err: errorMessage(err) }, "store_close_failed"));
        await observability.close().catch((err: unknown) => logger.error({ err: errorMessage(err) }, "tracing_shutdown_failed"));
        logger.info({}, "registry_shutdown_complete");
        logger.info("gateway_closed");
      })();
      return closing;
    },
    destroy() {
      groups.killAll();
    },
  };
}

/** store.healthy(), false when it fails or takes longer than READY_CHECK_TIMEOUT_MS (its timer is cleared either way). */
async function boundedHealthCheck(store: Store, clock: Clock): Promise<boolean> {
  let timer: ReturnType<Clock["setTimeout"]> | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = clock.setTimeout(() => resolve(false), READY_CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([store.healthy().catch(() => false), timeout]);
  } finally {
    clock.clearTimeout(timer);
  }
}

/**
 * `/servers/<name>/mcp` is that one upstream: without it no session can start
 * (502). Its message must not point to meta-face tools this face lacks, so it
 * says why the upstream failed and where the operator looks instead.
 */
function singleFaceUnavailable(name: string, session: Session, err: unknown): unknown {
  if (!(err instanceof GatewayError) || err.code !== ErrorCodes.UPSTREAM_UNAVAILABLE) return err;
  const why = session.view(name).lastError ?? errorMessage(err.cause ?? err);
  return new GatewayError(
    ErrorCodes.UPSTREAM_UNAVAILABLE,
    `upstream '${name}' is unavailable: ${why}. This endpoint serves only '${name}', so no session can start until it is reachable; the next initialize tries again. See the gateway's log (upstream_check_failed), or run \`emceepee check --config <file> --connect\`.`,
    { details: { server: name }, cause: err },
  );
}
