/**
 * Observability over real traffic: a gateway over HTTP with real upstreams
 * (server-everything, the meta-echo and slow-server fixtures) and real SDK
 * clients. /metrics is scraped after known traffic — meta calls, a promoted
 * task, transparent calls with upstream errors, a reconnect — and the exact
 * series and counts are asserted; an in-memory span exporter shows the span
 * tree and that a client's `traceparent` reaches the upstream's `_meta`;
 * /readyz reports a failed store; the CLI writes pretty logs when asked.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { PassThrough } from "node:stream";
import { SpanKind } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { parseConfig } from "../../src/config/load.js";
import { sessionHash } from "../../src/logging.js";
import { createGateway } from "../../src/server/gateway.js";
import { openStore } from "../../src/store/open.js";
import { EventLedger, allText, awaitUntil, promote, sessionOf, waitTerminal } from "../helpers/async-extra.js";
import { CLI_ARGS, cliEnv, stopChild } from "../helpers/core-extra.js";
import { ROOT, call, connectClient, everythingStdio, fixtureArgs, slowServerStdio, startGateway, waitConnected, type TestGateway } from "../helpers/gateway.js";

const metaEcho = () => ({ command: process.execPath, args: fixtureArgs("meta-echo-server"), cwd: ROOT });

const gateways: TestGateway[] = [];
const clients: Client[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
});

async function gatewayWith(...args: Parameters<typeof startGateway>): Promise<TestGateway> {
  const gw = await startGateway(...args);
  gateways.push(gw);
  return gw;
}

async function client(url: string): Promise<Client> {
  const c = await connectClient(url);
  clients.push(c);
  return c;
}

const faceUrl = (gw: TestGateway, path: string) => gw.url.replace(/\/mcp$/, path);

// --- the Prometheus text format, parsed into series ---

interface Series {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseMetrics(text: string): Series[] {
  const series: Series[] = [];
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    series.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return series;
}

async function scrape(gw: TestGateway, headers: Record<string, string> = {}): Promise<Series[]> {
  const res = await fetch(faceUrl(gw, "/metrics"), { headers });
  assert.equal(res.status, 200, await res.clone().text());
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return parseMetrics(await res.text());
}

/** The value of the one series `name` with exactly `labels`, or undefined. */
function value(series: Series[], name: string, labels: Record<string, string>): number | undefined {
  const want = JSON.stringify(Object.entries(labels).sort());
  const found = series.filter((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want);
  assert.ok(found.length <= 1, `${name} ${want} appears ${found.length} times`);
  return found[0]?.value;
}

const sortedJson = (labels: Record<string, string>) => JSON.stringify(Object.fromEntries(Object.entries(labels).sort()));

/** Every label set of `name` (e.g. the _count series of a histogram) that matches `filter`, as sorted JSON. */
function labelSets(series: Series[], name: string, filter: Record<string, string> = {}): string[] {
  return series
    .filter((s) => s.name === name && Object.entries(filter).every(([k, v]) => s.labels[k] === v))
    .map((s) => sortedJson(s.labels))
    .sort();
}

const tool = (name: string, extra: Record<string, string> = {}) => ({
  mcp_method_name: "tools/call",
  network_transport: "tcp",
  gen_ai_tool_name: name,
  ...extra,
});

describe("/metrics after known traffic", () => {
  test("meta calls, a promoted task and transparent calls with upstream errors: exact histogram counts and label sets", async () => {
    // No stdio processes started ahead (upstream.warmPool): every process and initialize below is a session's.
    const gw = await gatewayWith({ mcpServers: { everything: everythingStdio(), echo: metaEcho() }, gateway: { upstream: { warmPool: 0 } } });
    const meta = await client(gw.url);
    await call(meta, "list_servers");
    const echoed = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "hi" } });
    assert.match(allText(echoed), /Echo: hi/);
    const { taskId } = await promote(meta, "everything", "trigger-long-running-operation", { duration: 1, steps: 2 }, 100);

    let m = await scrape(gw);
    assert.equal(value(m, "emceepee_tasks", { status: "working", kind: "promoted" }), 1);
    assert.equal(value(m, "emceepee_sessions", { face: "meta" }), 1);
    assert.equal(value(m, "emceepee_upstream_connections", { upstream: "everything", status: "connected" }), 1);
    assert.equal(value(m, "emceepee_stdio_child_processes", {}), 1);
    assert.equal(value(m, "emceepee_pending_client_requests", { kind: "elicitation" }), 0);

    const task = await waitTerminal(meta, taskId);
    assert.equal(task.status, "completed");

    // The transparent face of one upstream: a JSON-RPC error from the upstream, and isError results.
    const echoFace = await client(faceUrl(gw, "/servers/echo/mcp"));
    await assert.rejects(echoFace.readResource({ uri: "meta-echo://broken" }), /-32603/);
    const everythingFace = await client(faceUrl(gw, "/servers/everything/mcp"));
    const invalid = await everythingFace.callTool({ name: "echo", arguments: {} });
    assert.equal(invalid.isError, true);
    const unknown = await everythingFace.callTool({ name: "no-such-tool", arguments: {} });
    assert.equal(unknown.isError, true);
    await (everythingFace.transport as StreamableHTTPClientTransport).terminateSession();

    m = await scrape(gw);
    const served = "mcp_server_operation_duration_seconds_count";
    assert.deepEqual(
      labelSets(m, served, { mcp_method_name: "tools/call" }),
      [
        tool("echo", { error_type: "tool_error" }),
        tool("execute_tool"),
        tool("get_task"),
        tool("get_task_result"),
        tool("list_servers"),
        // A tool that never answered with a result is no label of its own (bounded cardinality).
        tool("other", { error_type: "tool_error" }),
      ]
        .map(sortedJson)
        .sort(),
    );
    assert.equal(value(m, served, tool("list_servers")), 1);
    assert.equal(value(m, served, tool("execute_tool")), 2, "the plain call and the promoted one");
    assert.equal(value(m, served, tool("get_task_result")), 1);
    assert.equal(value(m, served, tool("get_task")), 1);
    assert.equal(value(m, served, tool("echo", { error_type: "tool_error" })), 1, "echo is a known tool (it answered through the meta face)");
    assert.equal(value(m, served, tool("other", { error_type: "tool_error" })), 1);
    assert.equal(value(m, served, { mcp_method_name: "resources/read", network_transport: "tcp", error_type: "-32603" }), 1);
    assert.equal(value(m, served, { mcp_method_name: "initialize", network_transport: "tcp" }), 3);

    const sent = "mcp_client_operation_duration_seconds_count";
    const upstreamCall = (upstream: string, name: string, extra: Record<string, string> = {}) => ({
      mcp_method_name: "tools/call",
      network_transport: "pipe",
      gen_ai_tool_name: name,
      upstream,
      ...extra,
    });
    assert.equal(value(m, sent, upstreamCall("everything", "echo")), 1);
    assert.equal(value(m, sent, upstreamCall("everything", "trigger-long-running-operation")), 1, "the promoted call, answered in the background");
    assert.equal(value(m, sent, upstreamCall("everything", "echo", { error_type: "tool_error" })), 1);
    assert.equal(value(m, sent, upstreamCall("everything", "other", { error_type: "tool_error" })), 1);
    assert.equal(value(m, sent, { mcp_method_name: "resources/read", network_transport: "pipe", upstream: "echo", error_type: "-32603" }), 1);
    assert.equal(value(m, sent, { mcp_method_name: "initialize", network_transport: "pipe", upstream: "everything" }), 2, "one connection per session");
    assert.equal(value(m, sent, { mcp_method_name: "initialize", network_transport: "pipe", upstream: "echo" }), 1);

    assert.equal(value(m, "emceepee_tasks", { status: "completed", kind: "promoted" }), 1);
    assert.equal(value(m, "emceepee_tasks", { status: "working", kind: "promoted" }), undefined);
    assert.equal(value(m, "emceepee_sessions", { face: "meta" }), 1);
    assert.equal(value(m, "emceepee_sessions", { face: "server" }), 1, "the terminated session is gone");
    assert.equal(value(m, "mcp_server_session_duration_seconds_count", { face: "server", network_transport: "tcp" }), 1);
    assert.ok((value(m, "emceepee_store_operation_duration_seconds_count", { store: "memory", operation: "tasks.create" }) ?? 0) >= 1);
    assert.ok((value(m, "process_cpu_seconds_total", {}) ?? -1) >= 0, "Node process metrics are there");
    // No task ids, session ids or arguments in any label.
    const text = JSON.stringify(m.map((s) => s.labels));
    assert.ok(!text.includes(taskId), "no task id in a label");
    assert.ok(!text.includes(sessionOf(gw, meta).id), "no session id in a label");
    assert.ok(!text.includes('"hi"'), "no argument in a label");
  });

  test("a reconnect: the dropped call ends as transport_closed, the drop and the reconnect are counted", async () => {
    const gw = await gatewayWith({
      mcpServers: { everything: everythingStdio() },
      gateway: { upstream: { warmPool: 0, reconnect: { initialDelayMs: 100, maxDelayMs: 400 } } },
    });
    const c = await client(gw.url);
    await waitConnected(c, "everything");
    const ledger = new EventLedger();
    await promote(c, "everything", "trigger-long-running-operation", { duration: 30, steps: 30 }, 200, {}, ledger);
    const conn = await sessionOf(gw, c).connection("everything");
    process.kill(conn.pid!, "SIGKILL");
    await awaitUntil(c, ledger, (l) => l.has((e) => e.type === "server_reconnected"));

    const m = await scrape(gw);
    assert.equal(value(m, "emceepee_upstream_disconnects_total", { upstream: "everything" }), 1);
    assert.equal(value(m, "emceepee_upstream_reconnects_total", { upstream: "everything" }), 1);
    assert.equal(value(m, "emceepee_upstream_connections", { upstream: "everything", status: "connected" }), 1);
    assert.equal(
      value(m, "mcp_client_operation_duration_seconds_count", {
        mcp_method_name: "tools/call",
        network_transport: "pipe",
        upstream: "everything",
        gen_ai_tool_name: "other",
        error_type: "transport_closed",
      }),
      1,
    );
    assert.equal(value(m, "emceepee_tasks", { status: "failed", kind: "promoted" }), 1);
    assert.equal(
      value(m, "mcp_client_session_duration_seconds_count", { upstream: "everything", network_transport: "pipe" }),
      1,
      "the dropped connection ended",
    );
  });

  test("behind the token when one is set; gone when disabled", async () => {
    const token = "observability-test-token-1234";
    const guarded = await gatewayWith({ gateway: { token } });
    const denied = await fetch(faceUrl(guarded, "/metrics"));
    assert.equal(denied.status, 401);
    const m = await scrape(guarded, { Authorization: `Bearer ${token}` });
    assert.ok(m.some((s) => s.name === "process_cpu_seconds_total"));

    const off = await gatewayWith({ gateway: { metrics: { enabled: false } } });
    assert.equal((await fetch(faceUrl(off, "/metrics"))).status, 404);
    const moved = await gatewayWith({ gateway: { metrics: { path: "/internal/prometheus" } } });
    assert.equal((await fetch(faceUrl(moved, "/internal/prometheus"))).status, 200);
    assert.equal((await fetch(faceUrl(moved, "/metrics"))).status, 404);
  });
});

describe("/readyz", () => {
  test("503 store_unavailable while the store's health check fails; /healthz stays ok", async () => {
    const store = await openStore({ kind: "memory" });
    const gw = await gatewayWith({}, { store });
    const ready = await fetch(faceUrl(gw, "/readyz"));
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { status: "ready" });
    await store.close();
    // The first check is cached for a moment: ask until it has expired (it is at most a second).
    let res: Response;
    const deadline = Date.now() + 30_000;
    do {
      res = await fetch(faceUrl(gw, "/readyz"));
    } while (res.status === 200 && Date.now() < deadline && (await new Promise((r) => setTimeout(r, 100, true))));
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { status: "store_unavailable" });
    assert.equal((await fetch(faceUrl(gw, "/healthz"))).status, 200);
  });
});

describe("traces (in-memory exporter)", () => {
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const clientSpanId = "00f067aa0ba902b7";
  const traceparent = `00-${traceId}-${clientSpanId}-01`;

  async function tracedGateway() {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    // No warm spare (upstream.warmPool 0): each test calls one server once; a spare of it was never taken (issue 21).
    const gw = await gatewayWith({ mcpServers: { echo: metaEcho(), slow: slowServerStdio() }, gateway: { upstream: { warmPool: 0 } } }, { tracerProvider });
    return { gw, exporter };
  }

  const named = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
  const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

  test("a client's traceparent continues through the gateway: server span → client span → the upstream's _meta", async () => {
    const { gw, exporter } = await tracedGateway();
    const face = await client(faceUrl(gw, "/servers/echo/mcp"));
    const result = await face.request(
      { method: "tools/call", params: { name: "echo-meta", arguments: {}, _meta: { traceparent, tracestate: "vendor=1", baggage: "tenant=acme" } } },
      CallToolResultSchema,
    );
    const upstreamMeta = JSON.parse((result.content[0] as { text: string }).text) as Record<string, string>;

    const [server] = named(exporter.getFinishedSpans(), "tools/call echo-meta").filter((s) => s.kind === SpanKind.SERVER);
    const [upstream] = named(exporter.getFinishedSpans(), "tools/call echo-meta").filter((s) => s.kind === SpanKind.CLIENT);
    assert.ok(
      server && upstream,
      `spans: ${exporter
        .getFinishedSpans()
        .map((s) => `${s.name}/${s.kind}`)
        .join(", ")}`,
    );
    assert.equal(server.spanContext().traceId, traceId, "the client's trace");
    assert.equal(parentOf(server), clientSpanId, "the server span's parent is the client's span");
    assert.equal(upstream.spanContext().traceId, traceId);
    assert.equal(parentOf(upstream), server.spanContext().spanId, "the upstream request is a child of the request served");
    assert.equal(upstreamMeta.traceparent, `00-${traceId}-${upstream.spanContext().spanId}-01`, "the upstream sees the gateway's client span as parent");
    assert.equal(upstreamMeta.tracestate, "vendor=1");
    assert.equal(upstreamMeta.baggage, "tenant=acme");

    assert.deepEqual(
      { ...server.attributes, "mcp.session.id": typeof server.attributes["mcp.session.id"] },
      {
        "mcp.method.name": "tools/call",
        "jsonrpc.request.id": server.attributes["jsonrpc.request.id"],
        "network.transport": "tcp",
        "gen_ai.tool.name": "echo-meta",
        "gen_ai.operation.name": "execute_tool",
        "mcp.session.id": "string",
        "mcp.protocol.version": server.attributes["mcp.protocol.version"],
      },
    );
    assert.match(String(server.attributes["mcp.protocol.version"]), /^\d{4}-\d{2}-\d{2}$/);
    assert.equal(upstream.attributes["network.transport"], "pipe");
    assert.equal(upstream.attributes["gen_ai.tool.name"], "echo-meta");
    assert.equal(upstream.attributes["emceepee.upstream"], "echo");
    assert.equal(upstream.attributes["error.type"], undefined);

    // An upstream JSON-RPC error: error.type on both spans.
    await assert.rejects(face.readResource({ uri: "meta-echo://broken" }));
    const broken = named(exporter.getFinishedSpans(), "resources/read meta-echo://broken");
    assert.deepEqual(broken.map((s) => [s.kind, s.attributes["error.type"], s.attributes["mcp.resource.uri"]]).sort(), [
      [SpanKind.SERVER, "-32603", "meta-echo://broken"],
      [SpanKind.CLIENT, "-32603", "meta-echo://broken"],
    ]);
  });

  test("a promoted task's background call stays in the trace of the execute_tool that started it", async () => {
    const { gw, exporter } = await tracedGateway();
    const meta = await client(gw.url);
    const { taskId } = await promote(meta, "slow", "slow", { ms: 600 }, 50);
    await waitTerminal(meta, taskId);
    const [execute] = named(exporter.getFinishedSpans(), "tools/call execute_tool");
    const [background] = named(exporter.getFinishedSpans(), "tools/call slow");
    assert.ok(execute && background);
    assert.equal(background.kind, SpanKind.CLIENT);
    assert.equal(background.spanContext().traceId, execute.spanContext().traceId);
    assert.equal(parentOf(background), execute.spanContext().spanId);
    const endOf = (s: ReadableSpan) => s.endTime[0] * 1e9 + s.endTime[1];
    assert.ok(endOf(background) > endOf(execute), "the call outlived the promoted request");
    // Without a traceparent from the client, the request starts its own trace.
    assert.equal(execute.parentSpanContext, undefined);
  });
});

describe("the stdio face", () => {
  test("each request is a SERVER span with network.transport pipe, the session's hash and the protocol version", async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const gateway = createGateway(parseConfig({ mcpServers: { echo: metaEcho() }, gateway: { logLevel: "silent" } }), { tracerProvider });
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const session = await gateway.serveStdio({ stdin, stdout });
    const replies = new Map<number, Record<string, unknown>>();
    let buffered = "";
    stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const message = JSON.parse(buffered.slice(0, nl)) as { id?: number };
        buffered = buffered.slice(nl + 1);
        if (typeof message.id === "number") replies.set(message.id, message);
      }
    });
    const send = (message: object) => stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
    const reply = async (id: number) => {
      const deadline = Date.now() + 90_000; // the first execute_tool starts the upstream process
      while (!replies.has(id) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      return replies.get(id);
    };
    try {
      send({ id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "stdio-test", version: "1" } } });
      assert.ok(await reply(1));
      send({ method: "notifications/initialized" });
      send({ id: 2, method: "tools/call", params: { name: "execute_tool", arguments: { server: "echo", tool: "echo-meta", args: {} } } });
      assert.ok(await reply(2));
      const served = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
      assert.deepEqual(
        served.map((s) => s.name),
        ["initialize", "tools/call execute_tool"],
      );
      const call = served[1]!;
      assert.equal(call.attributes["network.transport"], "pipe");
      assert.equal(call.attributes["mcp.session.id"], sessionHash(session.id));
      assert.equal(call.attributes["mcp.protocol.version"], "2025-11-25");
      const upstream = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.CLIENT && s.name === "tools/call echo-meta");
      assert.equal(upstream?.parentSpanContext?.spanId, call.spanContext().spanId);
    } finally {
      await gateway.close();
    }
  });
});

describe("logs", () => {
  test("--log-format pretty writes lines for people; json stays one object per line", async () => {
    const run = async (format: string): Promise<string> => {
      const child = spawn(process.execPath, [...CLI_ARGS, "serve", "--port", "0", "--store", "memory", "--no-upstream-check", "--log-format", format], {
        cwd: ROOT,
        env: cliEnv(),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const deadline = Date.now() + 120_000; // the CLI starting through tsx on a loaded machine
      while (!stderr.includes("state_recovered") && Date.now() < deadline && child.exitCode === null) await new Promise((r) => setTimeout(r, 50));
      await stopChild(child);
      return stderr;
    };
    const pretty = await run("pretty");
    assert.match(pretty, /INFO.*\(emceepee\/\d+\).*state_recovered/, pretty);
    assert.throws(() => JSON.parse(pretty.split("\n")[0]!), "pretty lines are not JSON");
    const json = await run("json");
    const line = json.split("\n").find((l) => l.includes("state_recovered"));
    assert.ok(line, json);
    assert.equal((JSON.parse(line) as { msg: string }).msg, "state_recovered");
  });
});
