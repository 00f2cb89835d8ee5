/**
 * src/observability in-process: the metrics registry and its bounded labels,
 * the taps on real SDK Servers and Clients linked by InMemoryTransport (the
 * SDK's own), trace context in `_meta`, the timed memory store, trace ids on
 * log lines, and when the OTEL_* environment turns tracing on.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { context, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { parseConfig } from "../../src/config/load.js";
import { createLogger } from "../../src/logging.js";
import { installContextManager } from "../../src/observability/context-manager.js";
import { instrumentTransportFactory } from "../../src/observability/instrument-client.js";
import { instrumentServerTransport } from "../../src/observability/instrument-server.js";
import { GatewayMetrics, MAX_TOOL_LABELS, type MetricsSources } from "../../src/observability/metrics.js";
import { timedStore } from "../../src/observability/store-timing.js";
import { extractFromMeta, injectIntoParams } from "../../src/observability/trace-context.js";
import { OTLPTraceExporter as OtlpJsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as OtlpProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { ConsoleSpanExporter } from "@opentelemetry/sdk-trace-base";
import { spanExporter, tracingConfigured } from "../../src/observability/tracing.js";
import { openStore } from "../../src/store/open.js";

/** The sample lines of one metric (name and labels as written, then the value), without HELP/TYPE. */
async function lines(metrics: GatewayMetrics, name: string): Promise<string[]> {
  const { body } = await metrics.scrape();
  return body.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

const ok = (method: string, tool?: string) => ({ method, tool, transport: "tcp" as const, seconds: 0.004 });

describe("GatewayMetrics", () => {
  test("collect-time gauges read the sources when scraped", async () => {
    const metrics = new GatewayMetrics();
    let sessions: Record<string, number> = { meta: 2, all: 1 };
    const sources: MetricsSources = {
      sessionsByFace: () => sessions,
      upstreamConnections: () => [
        { upstream: "a", status: "connected" },
        { upstream: "a", status: "connected" },
        { upstream: "b", status: "error" },
      ],
      stdioChildren: () => 3,
      pendingClientRequests: () => [{ kind: "sampling" }],
      tasks: async () => [
        { status: "working", kind: "promoted" },
        { status: "completed", kind: "upstream" },
        { status: "completed", kind: "upstream" },
      ],
    };
    metrics.setSources(sources);
    assert.deepEqual(await lines(metrics, "emceepee_sessions"), ['emceepee_sessions{face="meta"} 2', 'emceepee_sessions{face="all"} 1']);
    assert.deepEqual(await lines(metrics, "emceepee_upstream_connections"), [
      'emceepee_upstream_connections{upstream="a",status="connected"} 2',
      'emceepee_upstream_connections{upstream="b",status="error"} 1',
    ]);
    assert.deepEqual(await lines(metrics, "emceepee_stdio_child_processes"), ["emceepee_stdio_child_processes 3"]);
    assert.deepEqual(await lines(metrics, "emceepee_pending_client_requests"), [
      'emceepee_pending_client_requests{kind="elicitation"} 0',
      'emceepee_pending_client_requests{kind="sampling"} 1',
    ]);
    assert.deepEqual(await lines(metrics, "emceepee_tasks"), [
      'emceepee_tasks{status="working",kind="promoted"} 1',
      'emceepee_tasks{status="completed",kind="upstream"} 2',
    ]);
    // Read again at the next scrape: a face with no sessions left is gone, not stale.
    sessions = { meta: 1 };
    assert.deepEqual(await lines(metrics, "emceepee_sessions"), ['emceepee_sessions{face="meta"} 1']);
  });

  test("tool names are labels only once a call of theirs got a result, and at most MAX_TOOL_LABELS of them; unknown methods are 'other'", async () => {
    const metrics = new GatewayMetrics();
    metrics.serverOperation({ ...ok("tools/call", "never-answered"), errorType: "-32602" }, false);
    metrics.serverOperation(ok("tools/call", "echo"), true);
    metrics.serverOperation({ ...ok("tools/call", "echo"), errorType: "tool_error" }, false);
    for (let i = 0; i < MAX_TOOL_LABELS + 5; i++) metrics.serverOperation(ok("tools/call", `t${i}`), true);
    const counts = await lines(metrics, "mcp_server_operation_duration_seconds_count");
    assert.ok(counts.includes('mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="tcp",gen_ai_tool_name="echo"} 1'));
    assert.ok(
      counts.includes(
        'mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="tcp",gen_ai_tool_name="echo",error_type="tool_error"} 1',
      ),
      "a known tool keeps its name on its errors",
    );
    assert.ok(
      counts.includes(
        'mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="tcp",gen_ai_tool_name="other",error_type="-32602"} 1',
      ),
    );
    assert.ok(counts.includes('mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="tcp",gen_ai_tool_name="other"} 6'));
    const toolLabels = new Set(counts.map((l) => /gen_ai_tool_name="([^"]*)"/.exec(l)?.[1]));
    assert.equal(toolLabels.size, MAX_TOOL_LABELS + 1, "the bound plus 'other'");
  });

  test("store latency, reconnects, disconnects and evictions are recorded as they happen", async () => {
    const metrics = new GatewayMetrics();
    metrics.upstreamReconnected("a");
    metrics.upstreamReconnected("a");
    metrics.upstreamDisconnected("a");
    metrics.eventsEvicted("session", 3);
    metrics.eventsEvicted("gateway", 0);
    assert.deepEqual(await lines(metrics, "emceepee_upstream_reconnects_total"), ['emceepee_upstream_reconnects_total{upstream="a"} 2']);
    assert.deepEqual(await lines(metrics, "emceepee_upstream_disconnects_total"), ['emceepee_upstream_disconnects_total{upstream="a"} 1']);
    assert.deepEqual(await lines(metrics, "emceepee_events_evicted_total"), ['emceepee_events_evicted_total{bound="session"} 3']);
  });

  test("one registry per gateway: two gateways in a process do not share series", async () => {
    const a = new GatewayMetrics();
    const b = new GatewayMetrics();
    a.upstreamReconnected("x");
    assert.deepEqual(await lines(b, "emceepee_upstream_reconnects_total"), []);
    assert.ok((await lines(a, "process_cpu_user_seconds_total")).length === 1, "Node process metrics in each registry");
  });
});

describe("the timed store (store-timing.ts)", () => {
  test("every sub-store call is observed and behaves as before; evictions are counted from events.append", async () => {
    const metrics = new GatewayMetrics();
    const store = timedStore(await openStore({ kind: "memory" }), metrics);
    assert.equal(store.kind, "memory");
    const limits = { maxPerSession: 10, maxTotal: 1000 };
    for (let i = 0; i < 11; i++) {
      await store.events.append("s1", { id: `e${i}`, type: "server_connected", server: "a", createdAt: i, data: {} }, limits);
    }
    assert.equal((await store.events.stats("s1")).count, 10, "the proxy changes nothing: the oldest 10% went");
    assert.equal(await store.healthy(), true);
    const counts = await lines(metrics, "emceepee_store_operation_duration_seconds_count");
    assert.deepEqual(counts.sort(), [
      'emceepee_store_operation_duration_seconds_count{store="memory",operation="events.append"} 11',
      'emceepee_store_operation_duration_seconds_count{store="memory",operation="events.stats"} 1',
    ]);
    assert.deepEqual(await lines(metrics, "emceepee_events_evicted_total"), ['emceepee_events_evicted_total{bound="session"} 1']);
    await store.close();
    assert.equal(await store.healthy(), false);
    await assert.rejects(store.tasks.get("x"), /closed|EMCP_CLOSED/i, "a failing call still fails (and is observed)");
    assert.deepEqual(await lines(metrics, "emceepee_store_operation_duration_seconds_count").then((l) => l.filter((x) => x.includes("tasks.get"))), [
      'emceepee_store_operation_duration_seconds_count{store="memory",operation="tasks.get"} 1',
    ]);
  });
});

describe("trace context in _meta (trace-context.ts)", () => {
  const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

  test("extract → inject keeps the trace; the caller's params are not changed", () => {
    const params = { name: "t", _meta: { traceparent, baggage: "k=v", progressToken: 7 } };
    const ctx = extractFromMeta(params);
    assert.equal(trace.getSpanContext(ctx)?.traceId, "0af7651916cd43dd8448eb211c80319c");
    const out = injectIntoParams({ name: "t", _meta: { progressToken: 7 } }, ctx) as { _meta: Record<string, unknown> };
    assert.deepEqual(out._meta, { progressToken: 7, traceparent, baggage: "k=v" });
    assert.deepEqual(params._meta, { traceparent, baggage: "k=v", progressToken: 7 });
  });

  test("nothing to propagate: the params are returned as they were; a malformed traceparent starts no trace", () => {
    const params = { name: "t" };
    assert.equal(injectIntoParams(params, context.active()), params);
    assert.equal(trace.getSpanContext(extractFromMeta({ _meta: { traceparent: "garbage" } })), undefined);
    assert.equal(trace.getSpanContext(extractFromMeta(undefined)), undefined);
  });
});

/** A real McpServer with tools `echo` (returns its request _meta) and `slow` (waits until aborted), linked to a real Client. */
async function linkedPair(tap: { server?: (t: InMemoryTransport) => void; clientTransport?: (t: InMemoryTransport) => InMemoryTransport } = {}) {
  const server = new McpServer({ name: "unit", version: "1.0.0" });
  server.registerTool("echo", { inputSchema: { text: z.string() } }, ({ text }, extra) => ({
    content: [
      { type: "text", text },
      { type: "text", text: JSON.stringify(extra._meta ?? {}) },
    ],
  }));
  let slowStarted = 0;
  server.registerTool("slow", {}, (extra) => {
    slowStarted++;
    return new Promise((_, reject) => extra.signal.addEventListener("abort", () => reject(new Error("aborted"))));
  });
  server.registerTool("fails", {}, () => ({ isError: true, content: [{ type: "text", text: "no" }] }));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  tap.server?.(serverSide);
  const client = new Client({ name: "unit", version: "1.0.0" });
  await client.connect(tap.clientTransport ? tap.clientTransport(clientSide) : clientSide);
  /** Resolves once `n` calls of `slow` have reached the server (instead of sleeping). */
  const slowRunning = async (n: number) => {
    for (const end = Date.now() + 30_000; slowStarted < n && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
    assert.equal(slowStarted, n, "the slow call reached the server");
  };
  return { server, client, slowRunning };
}

describe("the server tap (instrument-server.ts)", () => {
  test("each request is one observation: results, tool errors, JSON-RPC errors, cancellations and the close", async () => {
    const metrics = new GatewayMetrics();
    const { client, server, slowRunning } = await linkedPair({ server: (t) => instrumentServerTransport(t, { metrics, transport: "pipe" }) });
    await client.callTool({ name: "echo", arguments: { text: "a" } });
    await client.callTool({ name: "fails", arguments: {} });
    await assert.rejects(client.request({ method: "prompts/list" }, CallToolResultSchema), /-32601|Method not found/);
    const abort = new AbortController();
    const slow = client.callTool({ name: "slow", arguments: {} }, undefined, { signal: abort.signal });
    await slowRunning(1);
    abort.abort("enough");
    await assert.rejects(slow);
    const counts = await lines(metrics, "mcp_server_operation_duration_seconds_count");
    assert.deepEqual(counts.sort(), [
      'mcp_server_operation_duration_seconds_count{mcp_method_name="initialize",network_transport="pipe"} 1',
      'mcp_server_operation_duration_seconds_count{mcp_method_name="prompts/list",network_transport="pipe",error_type="-32601"} 1',
      'mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="pipe",gen_ai_tool_name="echo"} 1',
      'mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="pipe",gen_ai_tool_name="other",error_type="cancelled"} 1',
      'mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="pipe",gen_ai_tool_name="other",error_type="tool_error"} 1',
    ]);
    // A request still running when the transport closes ends as transport_closed.
    void client.callTool({ name: "slow", arguments: {} }).catch(() => undefined);
    await slowRunning(2);
    await client.close();
    assert.ok(
      (await lines(metrics, "mcp_server_operation_duration_seconds_count")).includes(
        'mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="pipe",gen_ai_tool_name="other",error_type="transport_closed"} 1',
      ),
    );
    await server.close();
  });

  test("with a tracer: a SERVER span per request, child of the client's traceparent, active in the handler", async () => {
    const exporter = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer("unit");
    installContextManager();
    const { client, server } = await linkedPair({
      server: (t) => instrumentServerTransport(t, { tracer, transport: "pipe", sessionHash: "abcd1234" }),
    });
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    await client.request({ method: "tools/call", params: { name: "echo", arguments: { text: "x" }, _meta: { traceparent } } }, CallToolResultSchema);
    const span = exporter.getFinishedSpans().find((s) => s.name === "tools/call echo");
    assert.ok(
      span,
      exporter
        .getFinishedSpans()
        .map((s) => s.name)
        .join(", "),
    );
    assert.equal(span.spanContext().traceId, "0af7651916cd43dd8448eb211c80319c");
    assert.equal(span.parentSpanContext?.spanId, "b7ad6b7169203331");
    assert.equal(span.attributes["mcp.session.id"], "abcd1234");
    assert.equal(span.attributes["mcp.protocol.version"] !== undefined, true, "learned from initialize");
    assert.equal(span.attributes["network.transport"], "pipe");
    assert.ok(exporter.getFinishedSpans().some((s) => s.name === "initialize"));
    await client.close();
    await server.close();
  });
});

describe("the client tap (instrument-client.ts)", () => {
  test("tracing off: the upstream sees the caller's _meta as given; the duration is labelled with the upstream", async () => {
    const metrics = new GatewayMetrics();
    const factory = instrumentTransportFactory(() => ({ transport: pending! }), { metrics });
    let pending: InMemoryTransport | undefined;
    const { client, server } = await linkedPair({
      clientTransport: (t) => {
        pending = t;
        return factory("up", { url: "http://127.0.0.1:1/mcp" }).transport as InMemoryTransport;
      },
    });
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const r = await client.request({ method: "tools/call", params: { name: "echo", arguments: { text: "x" }, _meta: { traceparent } } }, CallToolResultSchema);
    assert.deepEqual(JSON.parse((r.content[1] as { text: string }).text), { traceparent });
    assert.ok(
      (await lines(metrics, "mcp_client_operation_duration_seconds_count")).includes(
        'mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call",network_transport="tcp",gen_ai_tool_name="echo",upstream="up"} 1',
      ),
    );
    await client.close();
    await server.close();
  });

  test("tracing on: a CLIENT span child of the active span, and its traceparent (not the caller's) in the upstream's _meta", async () => {
    const exporter = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer("unit");
    installContextManager();
    let pending: InMemoryTransport | undefined;
    const factory = instrumentTransportFactory(() => ({ transport: pending! }), { tracer });
    const { client, server } = await linkedPair({
      clientTransport: (t) => {
        pending = t;
        return factory("up", { command: "unused", args: [] }).transport as InMemoryTransport;
      },
    });
    const parent = tracer.startSpan("served request");
    const r = await context.with(trace.setSpan(context.active(), parent), () =>
      client.request({ method: "tools/call", params: { name: "echo", arguments: { text: "x" } } }, CallToolResultSchema),
    );
    parent.end();
    const span = exporter.getFinishedSpans().find((s) => s.name === "tools/call echo");
    assert.ok(span);
    assert.equal(span.parentSpanContext?.spanId, parent.spanContext().spanId);
    assert.equal(span.attributes["network.transport"], "pipe", "a stdio config is a pipe");
    const meta = JSON.parse((r.content[1] as { text: string }).text) as { traceparent: string };
    assert.equal(meta.traceparent, `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`);
    await client.close();
    await server.close();
  });
});

describe("logs and settings", () => {
  test("a line logged inside an active span carries trace_id and span_id; outside, neither", () => {
    installContextManager();
    const out: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        out.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger("info", sink);
    const span = new BasicTracerProvider().getTracer("unit").startSpan("request");
    context.with(trace.setSpan(context.active(), span), () => logger.info("inside"));
    logger.info("outside");
    span.end();
    const [inside, outside] = out.map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(inside?.trace_id, span.spanContext().traceId);
    assert.equal(inside?.span_id, span.spanContext().spanId);
    assert.equal(outside?.trace_id, undefined);
  });

  test("gateway.metrics.path may not hide an MCP endpoint, a probe or the console", () => {
    for (const taken of ["/mcp", "/all/mcp", "/servers/x/mcp", "/healthz", "/readyz", "/console"]) {
      assert.throws(() => parseConfig({ mcpServers: {}, gateway: { metrics: { path: taken } } }), /gateway\.metrics\.path: path is taken/);
    }
    assert.throws(() => parseConfig({ mcpServers: {}, gateway: { metrics: { path: "metrics" } } }), /must start with \//);
    assert.equal(parseConfig({ mcpServers: {}, gateway: { metrics: { path: "/internal/prometheus" } } }).gateway.metrics.path, "/internal/prometheus");
    assert.deepEqual(parseConfig({ mcpServers: {} }).gateway.metrics, { enabled: true, path: "/metrics", principals: 0 });
  });

  test("tracing is on only when the OTEL_* environment asks for it", () => {
    assert.equal(tracingConfigured({}), false);
    assert.equal(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }), true);
    assert.equal(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" }), true);
    assert.equal(tracingConfigured({ OTEL_TRACES_EXPORTER: "otlp" }), true);
    assert.equal(tracingConfigured({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }), false);
  });

  test("the exporter follows OTEL_TRACES_EXPORTER and the OTLP protocol; gRPC is refused with a warning", async () => {
    const warnings: string[] = [];
    const pick = (env: NodeJS.ProcessEnv) => spanExporter(env, (m) => warnings.push(m));
    const exporters = [pick({}), pick({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }), pick({ OTEL_TRACES_EXPORTER: "console" })];
    assert.deepEqual(
      exporters.map((e) => e.constructor),
      [OtlpProtoExporter, OtlpJsonExporter, ConsoleSpanExporter],
    );
    assert.deepEqual(warnings, []);
    const grpc = pick({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc" });
    assert.equal(grpc.constructor, OtlpProtoExporter);
    assert.match(warnings[0] ?? "", /grpc is not supported.*http\/protobuf/);
    await Promise.all([...exporters, grpc].map((e) => e.shutdown()));
  });
});
