/**
 * The gateway's Prometheus metrics: one registry per gateway, state read when
 * scraped, bounded labels. See docs/design/sessions-and-events.md,
 * "How the code keeps it".
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import { buildInfo, type BuildInfo } from "./build-info.js";
import { FastHistogram } from "./histogram.js";
import { DURATION_BUCKETS, type NetworkTransport } from "./semconv.js";

/** Distinct `gen_ai_tool_name` values kept per gateway; later names are "other". */
export const MAX_TOOL_LABELS = 200;

/** How a task came to be (`emceepee_tasks{kind}`). */
export type TaskKindLabel = "promoted" | "upstream" | "gateway" | "receiver";

/** What the collect-time gauges read when scraped. */
export interface MetricsSources {
  /** Open sessions by face ("meta", "all", "server", "stdio"). */
  sessionsByFace(): Record<string, number>;
  /** One entry per upstream connection of every session. */
  upstreamConnections(): Array<{ upstream: string; status: string }>;
  /** Running stdio upstream processes. */
  stdioChildren(): number;
  /** Their cap (gateway.upstream.maxChildProcesses). */
  stdioChildLimit?(): number;
  /** Whether the state store can serve (what /readyz asks; cached there). */
  storeHealthy?(): boolean | Promise<boolean>;
  /** Elicitation and sampling requests waiting for a client. */
  pendingClientRequests(): Array<{ kind: string }>;
  /** The tasks of the open sessions. */
  tasks(): Promise<Array<{ status: string; kind: TaskKindLabel }>>;
}

/** One finished MCP operation (a request and its response). */
export interface OperationSample {
  method: string;
  tool?: string | undefined;
  /** Undefined when it succeeded; a JSON-RPC error code, `tool_error`, `cancelled` or `transport_closed`. */
  errorType?: string | undefined;
  transport: NetworkTransport;
  seconds: number;
}

const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

let processMetrics: Registry | undefined;

/** The Node process metrics, collected once per process (see the header). */
function processRegistry(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    // Event-loop delay sampled every 100 ms, not prom-client's 10 ms: an idle gateway wakes 10 times a second, not 100.
    collectDefaultMetrics({ register: processMetrics, eventLoopMonitoringPrecision: 100 });
  }
  return processMetrics;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly serverOps: FastHistogram;
  private readonly clientOps: FastHistogram;
  private readonly sessionDuration: FastHistogram;
  private readonly upstreamSessionDuration: FastHistogram;
  private readonly storeOps: FastHistogram;
  private readonly reconnects: Counter;
  private readonly disconnects: Counter;
  private readonly evicted: Counter;
  private readonly principalRefusals: Counter;
  private readonly rateLimitedCalls: Counter;
  private readonly governanceDecisions: Counter;
  private readonly storeErrors: Counter;
  private readonly toolNames = new Set<string>();
  private readonly principalRequests: Counter | undefined;
  private readonly principalLabels = new Set<string>();
  private sources: MetricsSources | undefined;

  /**
   * @param options.principals principals labelled in emceepee_principal_requests_total (`metrics.principals`; 0: no such counter)
   * @param options.build what emceepee_build_info says (default: this process's build)
   */
  constructor(private readonly options: { principals?: number; build?: BuildInfo } = {}) {
    processRegistry();
    const registers = [this.registry];
    // Opt-in and bounded: a label per principal is a series per person, which an operator must ask for (ADR 0018).
    this.principalRequests =
      (options.principals ?? 0) > 0
        ? new Counter({
            name: "emceepee_principal_requests_total",
            help: `MCP requests served per principal (its 16-hex hash, never the subject) and method; principals beyond the first ${options.principals} seen are "other"`,
            labelNames: ["principal_hash", "mcp_method_name"],
            registers,
          })
        : undefined;
    // The per-request histograms are FastHistograms (histogram.ts): labels mcp_method_name, gen_ai_tool_name, error_type, network_transport (+ upstream).
    this.serverOps = new FastHistogram(
      "mcp_server_operation_duration_seconds",
      "MCP request duration as observed by the gateway serving it, from receipt until its response is sent (OTel mcp.server.operation.duration)",
      DURATION_BUCKETS,
    );
    this.clientOps = new FastHistogram(
      "mcp_client_operation_duration_seconds",
      "MCP request duration as observed by the gateway sending it upstream, until its response arrives (OTel mcp.client.operation.duration)",
      DURATION_BUCKETS,
    );
    this.storeOps = new FastHistogram(
      "emceepee_store_operation_duration_seconds",
      "State store call duration, by store kind and operation (e.g. tasks.get)",
      STORE_BUCKETS,
    );
    // The session durations too: 100 sessions ended at once each hashed their labels in prom-client's (issue 27).
    this.sessionDuration = new FastHistogram(
      "mcp_server_session_duration_seconds",
      "Duration of ended downstream MCP sessions (OTel mcp.server.session.duration)",
      DURATION_BUCKETS,
    );
    this.upstreamSessionDuration = new FastHistogram(
      "mcp_client_session_duration_seconds",
      "Duration of ended upstream connections, from their transport's start to its close (OTel mcp.client.session.duration)",
      DURATION_BUCKETS,
    );
    for (const h of [this.serverOps, this.clientOps, this.storeOps, this.sessionDuration, this.upstreamSessionDuration])
      this.registry.registerMetric(h.asMetric());
    this.reconnects = new Counter({
      name: "emceepee_upstream_reconnects_total",
      help: "Upstream connections made again after a drop (server_reconnected events)",
      labelNames: ["upstream"],
      registers,
    });
    this.disconnects = new Counter({
      name: "emceepee_upstream_disconnects_total",
      help: "Upstream connections that dropped (server_disconnected events)",
      labelNames: ["upstream"],
      registers,
    });
    this.evicted = new Counter({
      name: "emceepee_events_evicted_total",
      help: "Session events evicted by the per-session or gateway-wide bound (gateway.events.*)",
      labelNames: ["bound"],
      registers,
    });
    this.principalRefusals = new Counter({
      name: "emceepee_principal_limit_refusals_total",
      help: "Sessions and task-creating calls refused by a per-principal limit (gateway.sessions/tasks.maxPerPrincipal), by limit",
      labelNames: ["limit"],
      registers,
    });
    for (const limit of ["sessions", "tasks"]) this.principalRefusals.inc({ limit }, 0); // both series exist from the start
    this.rateLimitedCalls = new Counter({
      name: "emceepee_rate_limited_total",
      help: "Tool calls refused by a gateway.rateLimits bucket, by the refusing limit's scope (never who)",
      labelNames: ["scope"],
      registers,
    });
    this.governanceDecisions = new Counter({
      name: "emceepee_governance_decisions_total",
      help: "Tool-call decisions of gateway.governance by outcome (allow, deny, approval_required, error, would_deny, would_require_approval; approval_approved, approval_rejected, approval_expired, approval_cancelled)",
      labelNames: ["outcome"],
      registers,
    });
    this.storeErrors = new Counter({
      name: "emceepee_store_errors_total",
      help: "State store calls that failed (the backend unreachable or closed, a full disk, a conflict), by store kind and operation; each operation's series exists from its first call",
      labelNames: ["store", "operation"],
      registers,
    });
    const build = options.build ?? buildInfo();
    new Gauge({
      name: "emceepee_build_info",
      help: "Always 1; its labels name the build: package version, SQLite store schema version it migrates to, Node.js version",
      labelNames: ["version", "schema", "node"],
      registers,
    }).set({ version: build.version, schema: String(build.schema), node: build.node }, 1);
    const sources = () => this.sources;
    new Gauge({
      name: "emceepee_sessions",
      help: "Open downstream sessions by face",
      labelNames: ["face"],
      registers,
      collect() {
        this.reset();
        for (const [face, n] of Object.entries(sources()?.sessionsByFace() ?? {})) this.set({ face }, n);
      },
    });
    new Gauge({
      name: "emceepee_upstream_connections",
      help: "Upstream connections of the open sessions by upstream and status",
      labelNames: ["upstream", "status"],
      registers,
      collect() {
        this.reset();
        for (const c of sources()?.upstreamConnections() ?? []) this.inc({ upstream: c.upstream, status: c.status });
      },
    });
    new Gauge({
      name: "emceepee_stdio_child_processes",
      help: "Running stdio upstream processes",
      registers,
      collect() {
        this.set(sources()?.stdioChildren() ?? 0);
      },
    });
    new Gauge({
      name: "emceepee_stdio_child_processes_limit",
      help: "The cap on running stdio upstream processes (gateway.upstream.maxChildProcesses); at it, new stdio connections are refused",
      registers,
      collect() {
        const limit = sources()?.stdioChildLimit?.();
        if (limit === undefined) this.reset();
        else this.set(limit);
      },
    });
    new Gauge({
      name: "emceepee_store_up",
      help: "1 while the state store can serve (as /readyz reports it), else 0",
      registers,
      async collect() {
        const healthy = sources()?.storeHealthy?.();
        this.set((healthy === undefined ? true : await healthy) ? 1 : 0);
      },
    });
    new Gauge({
      name: "emceepee_pending_client_requests",
      help: "Elicitation and sampling requests waiting for a client, by kind",
      labelNames: ["kind"],
      registers,
      collect() {
        this.reset();
        this.set({ kind: "elicitation" }, 0);
        this.set({ kind: "sampling" }, 0);
        for (const p of sources()?.pendingClientRequests() ?? []) this.inc({ kind: p.kind });
      },
    });
    new Gauge({
      name: "emceepee_tasks",
      help: "Tasks of the open sessions by status and kind (promoted execute_tool calls, native upstream tasks, gateway-owned task-augmented calls, receiver tasks)",
      labelNames: ["status", "kind"],
      registers,
      async collect() {
        const tasks = (await sources()?.tasks()) ?? [];
        this.reset();
        for (const t of tasks) this.inc({ status: t.status, kind: t.kind });
      },
    });
  }

  /** Where the collect-time gauges read the gateway's state (set once the gateway is built). */
  setSources(sources: MetricsSources): void {
    this.sources = sources;
  }

  /** A request the gateway served. `known`: the tool name may be a label (its call got a result). */
  serverOperation(sample: OperationSample, known: boolean): void {
    const tool = sample.tool === undefined ? undefined : this.toolLabel(sample.tool, known);
    const key = `${sample.method}\u0000${tool ?? ""}\u0000${sample.errorType ?? ""}\u0000${sample.transport}`;
    this.serverOps.observe(key, () => operationLabels(sample, tool), sample.seconds);
  }

  /** A request the gateway sent to `upstream`. */
  clientOperation(upstream: string, sample: OperationSample, known: boolean): void {
    const tool = sample.tool === undefined ? undefined : this.toolLabel(sample.tool, known);
    const key = `${sample.method}\u0000${tool ?? ""}\u0000${sample.errorType ?? ""}\u0000${sample.transport}\u0000${upstream}`;
    this.clientOps.observe(key, () => ({ ...operationLabels(sample, tool), upstream }), sample.seconds);
  }

  sessionEnded(face: string, transport: NetworkTransport, seconds: number): void {
    this.sessionDuration.observe(`${face}\u0000${transport}`, () => ({ face, network_transport: transport }), seconds);
  }

  upstreamSessionEnded(upstream: string, transport: NetworkTransport, seconds: number): void {
    this.upstreamSessionDuration.observe(`${upstream}\u0000${transport}`, () => ({ upstream, network_transport: transport }), seconds);
  }

  /** Observes the calls of one store operation (e.g. `tasks.get`): the series is looked up per call, its labels made once. */
  storeTimer(store: string, operation: string): (seconds: number) => void {
    const key = `${store}\u0000${operation}`;
    const labels = () => ({ store, operation });
    return (seconds) => this.storeOps.observe(key, labels, seconds);
  }

  /** Counts the failures of one store operation; its series exists (at 0) from this call on, so rate() sees the first failure. */
  storeErrorCounter(store: string, operation: string): () => void {
    const child = this.storeErrors.labels({ store, operation });
    child.inc(0);
    return () => child.inc();
  }

  upstreamReconnected(upstream: string): void {
    this.reconnects.inc({ upstream });
  }

  upstreamDisconnected(upstream: string): void {
    this.disconnects.inc({ upstream });
  }

  eventsEvicted(bound: string, count: number): void {
    if (count > 0) this.evicted.inc({ bound }, count);
  }

  /** A request served for the principal with hash `hash` (counted only when `metrics.principals` is above 0). */
  principalRequest(hash: string, method: string): void {
    const counter = this.principalRequests;
    if (!counter) return;
    let label = hash;
    if (!this.principalLabels.has(hash)) {
      if (this.principalLabels.size >= (this.options.principals ?? 0)) label = "other";
      else this.principalLabels.add(hash);
    }
    counter.inc({ principal_hash: label, mcp_method_name: method });
  }

  /** A per-principal limit refused a session or a task (`limit`: "sessions" or "tasks"; never who). */
  principalLimitRefused(limit: string): void {
    this.principalRefusals.inc({ limit });
  }

  /** A gateway.rateLimits bucket refused a tool call (`scope`: the limit's scope, e.g. "principal+tool"). */
  rateLimited(scope: string): void {
    this.rateLimitedCalls.inc({ scope });
  }

  /** gateway.governance decided a tool call (docs/adr/0022). */
  governanceDecided(outcome: string): void {
    this.governanceDecisions.inc({ outcome });
  }

  /** The Prometheus text exposition. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    const [own, node] = await Promise.all([this.registry.metrics(), processRegistry().metrics()]);
    return { contentType: this.registry.contentType, body: `${own}${own.endsWith("\n") ? "" : "\n"}${node}` };
  }

  private toolLabel(name: string, known: boolean): string {
    if (this.toolNames.has(name)) return name;
    if (!known || this.toolNames.size >= MAX_TOOL_LABELS) return "other";
    this.toolNames.add(name);
    return name;
  }
}

/** The labels of an operation series, in the order they are exposed. */
function operationLabels(sample: OperationSample, tool: string | undefined): Record<string, string> {
  const labels: Record<string, string> = { mcp_method_name: sample.method, network_transport: sample.transport };
  if (tool !== undefined) labels.gen_ai_tool_name = tool;
  if (sample.errorType !== undefined) labels.error_type = sample.errorType;
  return labels;
}
