/**
 * One gateway's observability, built by createGateway: the metrics registry
 * (unless `gateway.metrics.enabled` is false), tracing (tracing.ts), and the
 * hooks the composition root installs — the tapped transport factory, the tap
 * for each face's server transport, the timed store, the `/metrics` page and
 * the session faces/durations, and the audit trail's log records
 * (audit-logs.ts). close() stops observing the sessions and flushes what
 * tracing and the audit log records started.
 */
import type { TracerProvider } from "@opentelemetry/api";
import { callersAuthenticated } from "../auth/required.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { GatewaySettings } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { PageHandler } from "../http/server.js";
import type { Logger } from "../logging.js";
import { sessionHash } from "../logging.js";
import type { Store } from "../store/contracts.js";
import type { TransportFactory } from "../upstream/transport-types.js";
import { instrumentTransportFactory } from "./instrument-client.js";
import { instrumentServerTransport } from "./instrument-server.js";
import { GatewayMetrics } from "./metrics.js";
import type { NetworkTransport } from "./semconv.js";
import { SessionFaces, gatewaySources, type GatewayState } from "./sources.js";
import { timedStore } from "./store-timing.js";
import { setUpTracing, type Tracing } from "./tracing.js";
import { setUpAuditLogs, type AuditLogs } from "./audit-logs.js";

export interface ObservabilityOptions {
  settings: GatewaySettings;
  version: string;
  logger: Logger;
  /** Injected tracer provider (tests, embedders); else OTEL_* decides (tracing.ts). */
  tracerProvider?: TracerProvider | undefined;
  /** Where the OTEL_* settings of the audit log records are read (default process.env). */
  env?: NodeJS.ProcessEnv | undefined;
}

export class Observability {
  readonly metrics: GatewayMetrics | undefined;
  readonly faces: SessionFaces;
  private readonly tracing: Tracing;
  /** Decision records and console actions as OpenTelemetry log records; undefined unless OTEL_* sets a logs exporter. */
  readonly auditLogs: AuditLogs | undefined;
  private unwatch: (() => void) | undefined;

  constructor(private readonly options: ObservabilityOptions) {
    this.metrics = options.settings.metrics.enabled ? new GatewayMetrics({ principals: options.settings.metrics.principals }) : undefined;
    this.faces = new SessionFaces(this.metrics);
    this.tracing = setUpTracing({
      provider: options.tracerProvider,
      version: options.version,
      warn: (message) => options.logger.warn({ message }, "tracing_config_unsupported"),
    });
    this.auditLogs = setUpAuditLogs({
      version: options.version,
      env: options.env,
      warn: (message) => options.logger.warn({ message }, "audit_logs_config_unsupported"),
    });
  }

  get tracingEnabled(): boolean {
    return this.tracing.tracer !== undefined;
  }

  /**
   * The gauges read this state when scraped; the sessions' observer reports
   * session ends (durations) and upstream drops and reconnects (the
   * `server_disconnected` / `server_reconnected` events, design EV-13).
   */
  watch(state: Omit<GatewayState, "faces">): void {
    const metrics = this.metrics;
    if (!metrics) return;
    metrics.setSources(gatewaySources({ ...state, faces: this.faces }));
    state.sessions.limits.onRefused = (limit) => metrics.principalLimitRefused(limit);
    this.unwatch = state.sessions.observe((c) => {
      if (c.type === "session_ended") this.faces.ended(c.sessionId);
      else if (c.type === "change" && c.change.type === "server_reconnected") metrics.upstreamReconnected(c.change.server);
      else if (c.type === "change" && c.change.type === "server_disconnected") metrics.upstreamDisconnected(c.change.server);
    });
  }

  transportFactory(factory: TransportFactory): TransportFactory {
    return instrumentTransportFactory(factory, { metrics: this.metrics, tracer: this.tracing.tracer });
  }

  /** Taps a face's server transport, once, after its server is connected to it. */
  tapServer(transport: Transport, session: { id: string }, network: NetworkTransport, protocolVersion?: string): void {
    instrumentServerTransport(transport, {
      metrics: this.metrics,
      tracer: this.tracing.tracer,
      transport: network,
      sessionHash: sessionHash(session.id),
      protocolVersion,
      // Without a token or OAuth no request has a principal: no tap just for that.
      principals: callersAuthenticated(this.options.settings) ? { logSubject: this.options.settings.auth.logSubject } : undefined,
    });
  }

  store(store: Store): Store {
    return this.metrics ? timedStore(store, this.metrics) : store;
  }

  /** GET/HEAD `gateway.metrics.path`: the Prometheus text format (after the guards, so behind the token when one is set). */
  pages(): PageHandler[] {
    const metrics = this.metrics;
    if (!metrics) return [];
    const path = this.options.settings.metrics.path;
    return [
      (req, res, requested) => {
        if (requested !== path || (req.method !== "GET" && req.method !== "HEAD")) return false;
        metrics.scrape().then(
          ({ contentType, body }) => {
            res.writeHead(200, { "Content-Type": contentType, "Cache-Control": "no-store" });
            res.end(req.method === "HEAD" ? undefined : body);
          },
          (err: unknown) => {
            this.options.logger.error({ err: errorMessage(err) }, "metrics_scrape_failed");
            res.writeHead(500, { "Content-Type": "text/plain" });
            res.end(`metrics could not be collected: ${errorMessage(err)}\n`);
          },
        );
        return true;
      },
    ];
  }

  close(): Promise<void> {
    this.unwatch?.();
    return Promise.all([this.tracing.shutdown(), this.auditLogs?.shutdown()]).then(() => undefined);
  }
}
