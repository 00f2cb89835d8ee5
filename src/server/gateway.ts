/**
 * createGateway(config, deps): the composition root. It builds the parts in
 * the order they start and registers each one's close; close() walks that
 * list backwards (parts.ts), so the order of shutdown is read here in one
 * place. The parts' own wiring lives beside them: endpoints.ts (the MCP
 * routes), health.ts (probes), store-lifecycle.ts (the state store),
 * stdio.ts, ../upstream/sharing/factory.ts, recovery.ts, reload.ts, upstream-check.ts.
 *
 * State: "starting" → "ready" (listening, or serving stdio) → "closing".
 * close() keeps the listener open until the upstreams are gone, so probes see
 * 503 through the whole shutdown. listen() and close() run once: later calls
 * return the first call's promise. destroy() SIGKILLs every stdio upstream's
 * process group at once, for a forced exit.
 */
import type { TracerProvider } from "@opentelemetry/api";
import { createRequire } from "node:module";
import { systemClock, ulidGenerator, type Clock, type IdGenerator } from "../clock.js";
import { createCluster } from "../cluster/index.js";
import { loginCookieMatches } from "../console/cookies.js";
import { lazyConsole } from "../console/lazy.js";
import type { GatewayConfig } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { Governance } from "../governance/governance.js";
import { AuditRetention } from "../governance/audit-retention.js";
import { Approvals } from "../governance/approvals.js";
import { ApprovalRunner } from "../session/approval-runner.js";
import { createHttpServer } from "../http/server.js";
import { silentLogger, type Logger } from "../logging.js";
import { RateLimiter } from "../governance/rate-limits.js";
import { Curation } from "../governance/curation.js";
import { ToolViews } from "../session/tool-views.js";
import { ActivityLog } from "../session/activity-log.js";
import { Observability } from "../observability/observability.js";
import { SessionManager } from "../session/session-manager.js";
import type { Session } from "../session/session.js";
import type { Store } from "../store/contracts.js";
import { ChildProcessLimiter, ProcessGroups } from "../upstream/children.js";
import { ServerRegistry } from "../upstream/registry.js";
import { createTransportFactory } from "../upstream/transports.js";
import type { TransportFactory } from "../upstream/transport-types.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { createEndpoints } from "./endpoints.js";
import { createHealth, type GatewayState } from "./health.js";
import { Parts } from "./parts.js";
import { recoverState } from "./recovery.js";
import { Listener } from "./listener.js";
import { createReloader, type GatewayReloadReport } from "./reload.js";
import { serveStdioSession, type StdioFace, type StdioOptions } from "./stdio.js";
import { GatewayStore } from "./store-lifecycle.js";
import { UpstreamChecker, inBackground, type UpstreamCheckResult } from "./upstream-check.js";
import { createUpstreams } from "../upstream/sharing/factory.js";
import type { EarlyProcesses } from "../upstream/sharing/early-processes.js";
import { createUpstreamAuth } from "../upstream/auth/setup.js";

export type { GatewayReloadReport, GatewayState, StdioFace };

const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };

export interface GatewayDeps {
  clock?: Clock;
  newId?: IdGenerator;
  logger?: Logger;
  transportFactory?: TransportFactory;
  /** The state store, already open (tests, benches); else `gateway.store` is opened at start. Closing it stays the caller's. */
  store?: Store;
  /** Traces go to this provider (tests: an in-memory exporter); else the OTEL_* environment decides (off by default). */
  tracerProvider?: TracerProvider;
  /** The OTEL_* settings of the audit trail's log records (observability/audit-logs.ts); default process.env. */
  env?: NodeJS.ProcessEnv;
  /**
   * Upstream processes `serve` started before this gateway was made (docs/adr/0039): their transport factory and
   * process groups become this gateway's, and its first connection to each server takes the waiting process.
   */
  early?: EarlyProcesses;
}

export interface Gateway {
  readonly context: GatewayContext;
  readonly state: GatewayState;
  /** The parts' names in the order close() closes them. */
  readonly closeOrder: readonly string[];
  /** Serves HTTP; resolves with the MCP URL once listening. */
  listen(): Promise<{ url: string; port: number }>;
  /** Serves one session over stdin/stdout with the chosen face. */
  serveStdio(options?: StdioOptions): Promise<Session>;
  close(): Promise<void>;
  /** One throwaway connection per server (default: every config-file server), logged as upstream_check_ok/_failed. Never throws. */
  checkUpstreams(names?: readonly string[]): Promise<UpstreamCheckResult[]>;
  /** Applies a re-read config file to the config-file servers; `settingsChanged` names settings that need a restart. One at a time. */
  reload(config: GatewayConfig): Promise<GatewayReloadReport>;
  /** SIGKILLs every stdio upstream's process group this gateway started, now; for a forced exit and `process.on('exit')`. */
  destroy(): void;
}

export function createGateway(config: GatewayConfig, deps: GatewayDeps = {}): Gateway {
  const settings = config.gateway;
  const clock = deps.clock ?? systemClock;
  const newId = deps.newId ?? ulidGenerator(clock);
  const logger = deps.logger ?? silentLogger;
  const parts = new Parts(logger);
  const registry = new ServerRegistry();
  for (const [name, serverConfig] of Object.entries(config.mcpServers)) registry.add({ name, config: serverConfig, addedAt: clock.now(), addedBy: "config" });
  const observability = new Observability({ settings, version: pkg.version, logger, tracerProvider: deps.tracerProvider, env: deps.env });
  parts.add("observability", () => observability.close().catch((err: unknown) => logger.error({ err: errorMessage(err) }, "tracing_shutdown_failed")));
  // Replicas sharing a Redis store (docs/adr/0013): endpoints route sessions they do not hold through it.
  const cluster = settings.cluster.enabled ? createCluster({ settings, registry, clock, newId, logger }) : undefined;
  const store = new GatewayStore({ settings, clock, logger, observability, cluster, injected: deps.store });
  parts.add("store", () => store.close()); // last: everything closed before it may still write
  // What happened, for the console (src/session/activity-log.ts): written in batches, closed just before the store so the shutdown's own events land.
  const activity = new ActivityLog(settings.activity, { clock, newId, logger, store: () => store.opened() });
  parts.add("activity", () => activity.close());
  const listener = new Listener();
  parts.add("http", () => listener.close());
  const groups = deps.early?.groups ?? new ProcessGroups();
  parts.add("process-groups", () => groups.terminateAll()); // also groups whose leader crashed, still being reaped
  const { upstream } = settings;
  const baseFactory =
    deps.transportFactory ??
    createTransportFactory({
      killGraceMs: upstream.killGraceMs,
      maxMessageBytes: upstream.maxMessageBytes,
      groups,
      runtimeUrls: settings.servers.runtimeUrls,
    });
  const transportFactory = observability.transportFactory(baseFactory);
  // Sessions' and shared connections take a process started early; the start-up check's throwaway ones never do.
  const early = deps.early;
  if (early) {
    early.reportTo(({ event, ...fields }) => (event === "early_process_failed" ? logger.warn(fields, event) : logger.info(fields, event)));
    parts.add("early-processes", () => early.close());
  }
  const connectionFactory = early && !deps.transportFactory ? observability.transportFactory(early.factoryOver(baseFactory)) : transportFactory;
  const children = new ChildProcessLimiter(upstream.maxChildProcesses);
  const clientInfo = { name: "emceepee", version: pkg.version };
  const openedStore = () => store.opened();
  // Every upstream connection is made by this factory: own, warm or shared (docs/adr/0010), and the checks'.
  // Per-person upstream credentials (issue 23, docs/adr/0027-upstream-identity.md): the vault's keys are read once, here; the OAuth client on first use.
  const upstreamAuth = createUpstreamAuth(settings, {
    clock,
    store: openedStore,
    base: () => listenedBase,
    // Called only after start (a person saved a secret): `upstreams` is made just below. The other replicas end theirs too.
    secretChanged: (server, person) => {
      upstreams.renew(server, person);
      cluster?.secretChanged(server, person);
    },
  });
  let listenedBase: string | undefined;
  const upstreams = createUpstreams({
    registry,
    settings,
    transportFactory: connectionFactory,
    // The checks' processes run niced, behind the sessions' (upstream-check.ts).
    probeTransportFactory: observability.transportFactory(inBackground(baseFactory)),
    children,
    clientInfo,
    clock,
    newId,
    logger,
    store: openedStore,
    oauth: upstreamAuth?.oauth,
    secrets: upstreamAuth?.secrets,
    // Pinned tool definitions (docs/adr/0029): every session handle's tool lists pass the pins (governance is made below).
    toolReview: (server, tools) => (governance ? governance.pins.review(server, tools) : Promise.resolve(tools)),
  });
  parts.add("upstreams", () => upstreams.close());
  cluster?.onSecretChanged((server, person) => upstreams.renew(server, person));
  const sessions = new SessionManager({
    registry,
    settings,
    clock,
    newId,
    logger,
    upstreams: upstreams.factory,
    upstreamFailed: (session, server, reason) => activity.connectFailed(session, server, reason),
    get store() {
      return openedStore();
    },
  });
  parts.add("sessions", () => sessions.close());
  // Tool-call governance (docs/adr/0022): only when configured; its policy files are read in start().
  const governance = settings.governance.profile !== "off" ? new Governance(settings.governance, { clock, newId, logger, store: openedStore }) : undefined;
  // Rate limits (docs/adr/0023): token buckets in the store, shared by replicas; with none configured a call takes nothing (SIGHUP may add some).
  const rateLimits = new RateLimiter(settings.rateLimits, { clock, logger, store: openedStore });
  // Curation and virtual servers (docs/adr/0024), whatever the profile; and the faces' tool views, for list_changed on reload.
  const curation = new Curation(settings.governance);
  const toolViews = new ToolViews({ sessions: () => sessions.list(), curation: () => curation, governance: () => governance });
  const metrics = observability.metrics;
  if (metrics) rateLimits.onLimited = (scope) => metrics.rateLimited(scope);
  if (governance && metrics) governance.onDecided = (outcome) => metrics.governanceDecided(outcome);
  // The audit trail as OpenTelemetry log records when an exporter is set (observability/audit-logs.ts).
  const auditLog = observability.auditLogs;
  if (governance && auditLog) governance.onRecorded = (record) => auditLog.decision(record);
  // Human approval of calls a rule sends to `approve` (docs/adr/0025): a durable record and a task; the runner acts on decisions.
  // Both read governance.approvals as in force, so a SIGHUP reload of ttlMs, holdMs, keepAliveMs, pollMs and webhooks needs no restart.
  const approvalRecords = governance
    ? new Approvals(
        () => governance.settingsInForce.approvals,
        () => governance.settingsInForce.audit.storeArguments,
        {
          clock,
          newId,
          logger,
          store: openedStore,
          governance,
          baseUrl: () => listenedBase,
        },
      )
    : undefined;
  const approvals =
    governance && approvalRecords
      ? new ApprovalRunner({
          approvals: approvalRecords,
          governance,
          sessions,
          settings: {
            ...settings,
            get governance() {
              return governance.settingsInForce;
            },
          },
          clock,
          logger,
        })
      : undefined;
  if (approvals) parts.add("approvals", () => approvals.close());
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
    governance,
    auditLog,
    approvals,
    approvalRecords,
    rateLimits,
    curation,
    toolViews,
    activity,
    knownServers: upstreams.known,
  };
  activity.watch(sessions);
  // No spare is started beside sessions opening (ADR 0044 §7, amended in session 21).
  sessions.observe((c) => {
    if (c.type === "session_started" && !sessions.get(c.sessionId)?.stateless) upstreams.opening();
  });
  observability.watch({ sessions, registry, children, store: () => store.current, storeHealthy: () => store.healthy() });
  let stdioClose: (() => Promise<void>) | undefined;
  parts.add("stdio", () => stdioClose?.().catch(() => undefined));
  const endpoints = createEndpoints(context, observability, cluster?.router);
  sessions.onDestroyed = (id) => endpoints.release(id);
  parts.add("endpoints", () => endpoints.close());
  if (cluster) parts.add("cluster", () => cluster.close()); // the others adopt this one's sessions without waiting for its lease
  // The web console at /console (docs/adr/0012-console.md); with replicas it shows them all.
  const webConsole = settings.console.enabled
    ? lazyConsole({ context, childProcesses: () => children.count, peers: cluster?.peers, upstreamAuth: upstreamAuth?.completer(registry) })
    : undefined;
  if (webConsole) parts.add("console", () => webConsole.close());
  parts.add("sweeps", () => store.stopSweeps());
  // The decision records' retention sweep (governance.audit.sweepMs), as the audit block in force says.
  const auditRetention = governance ? new AuditRetention({ clock, logger, store: openedStore, audit: () => governance.settingsInForce.audit }) : undefined;
  if (auditRetention) parts.add("audit-retention", () => auditRetention.close());
  let starting: Promise<void> | undefined;
  parts.add("start", () => starting?.catch(() => undefined)); // a start in progress finishes (what it opened is closed after)
  // Once listening (the store open), a shared server's check connects the shared connection itself (docs/adr/0039 §7);
  // `emceepee check --connect` checks a gateway that never listens, with throwaway connections only.
  const checker = new UpstreamChecker({
    probe: upstreams.probe,
    shared: (server, a) => (listenedBase !== undefined ? upstreams.sharedCheck(server, a) : undefined),
    logger,
  });
  parts.add("checker", () => checker.close());

  let state: GatewayState = "starting";
  const health = createHealth(
    () => state,
    () => store.healthy(),
  );
  let listening: Promise<{ url: string; port: number }> | undefined;
  let closing: Promise<void> | undefined;

  /** Opens the store, settles what the last process left in it (recovery.ts), then starts the sweeps. Once. */
  function start(): Promise<void> {
    starting ??= (async () => {
      if (state === "closing") throw new GatewayError(ErrorCodes.CLOSED, "the gateway is shutting down");
      await governance?.start();
      const raw = await store.open();
      if (cluster) await cluster.start(raw, sessions);
      const open = store.opened();
      const report = await recoverState({ store: cluster ? cluster.recoveryView(open) : open, registry, settings, clock, newId, logger });
      logger.info({ store: open.kind, location: open.location, ...report }, "state_recovered");
      // After a key rotation: every credential sealed with an older key is sealed again with the current one.
      const resealed = await upstreamAuth?.reseal();
      if (resealed) logger.info({ count: resealed }, "vault_resealed");
      if ((state as GatewayState) === "closing") return; // close() ran meanwhile: no timers
      sessions.start();
      store.startSweeps();
      auditRetention?.start();
      approvals?.start();
    })();
    return starting;
  }

  return {
    context,
    get state() {
      return state;
    },
    closeOrder: parts.closeOrder,
    listen() {
      listening ??= (async () => {
        await start();
        upstreams.start();
        const pages = [...observability.pages(), ...(webConsole ? [webConsole.handle] : [])];
        const probes = { ...health.probes, ...upstreamAuth?.documents() };
        const server = createHttpServer(settings, { ...endpoints.routes, ...health, probes, pages, consoleCredential: loginCookieMatches }, logger);
        webConsole?.start();
        const address = await listener.listen(server, settings.host, settings.port);
        listenedBase = new URL(address.url).origin;
        await store.announce(address.port);
        if (state === "starting") state = "ready";
        return address;
      })();
      return listening;
    },
    async checkUpstreams(names) {
      const wanted = names ?? registry.list().flatMap((e) => (e.addedBy === "config" ? [e.name] : []));
      const servers = wanted.flatMap((name) => {
        const entry = registry.get(name);
        return entry ? [[name, entry.config] as const] : [];
      });
      const results = await checker.checkAll(servers);
      for (const r of results) {
        if (r.ok) logger.info({ server: r.server, tools: r.tools, serverInfo: r.serverInfo }, "upstream_check_ok");
        else logger.warn({ server: r.server, reason: r.reason }, "upstream_check_failed");
        activity.checked(r.server, r.ok ? { ok: true, tools: r.tools } : { ok: false, reason: r.reason });
      }
      return results;
    },
    reload: activity.reloads(createReloader(registry, sessions, settings, () => state === "closing", { governance, curation, rateLimits, toolViews })),
    async serveStdio(options = {}) {
      await start();
      const served = await serveStdioSession(context, observability, options);
      stdioClose = () => served.close();
      if (state === "starting") state = "ready";
      return served.session;
    },
    close() {
      closing ??= (async () => {
        // From here /readyz says 503 and MCP requests get 503 (probes keep answering until the listener closes, late).
        state = "closing";
        // Operator log events (design EV-13).
        logger.info({ serverCount: registry.names().length, sessionCount: sessions.size }, "registry_shutdown_start");
        await parts.close();
        logger.info({}, "registry_shutdown_complete");
        logger.info("gateway_closed");
      })();
      return closing;
    },
    destroy: () => groups.killAll(),
  };
}
