/**
 * Observability benchmark (`npm run bench:obs`): what metrics and tracing cost
 * per call (docs/adr/0011), as ratios against both off, in one run.
 *
 * Six `emceepee serve` children, `--store memory`, server-everything over
 * stdio, measured interleaved (each call goes to the next child in turn, the
 * order reversed every round, so drift hits all alike):
 * - off:      `gateway.metrics.enabled: false`, no OTEL_* variable
 * - control:  the same as off again — its ratio to off is the run's noise
 *             floor (on a shared 2-core machine, several per cent)
 * - metrics:  metrics on (the default), no OTEL_* variable
 * - async-context: off, but with an AsyncLocalStorage entered at start
 *             (bench/lib/async-context-on.mjs): what tracing's context
 *             propagation costs on its own (Node 20 then tracks every promise)
 * - tracing:  metrics off, OTEL_EXPORTER_OTLP_ENDPOINT set: spans exported
 *             over OTLP/HTTP to a sink in this process that answers 200
 * - both:     metrics on and tracing on
 * Two paths each: the meta face (`execute_tool` echo) and the transparent
 * face of one upstream (`tools/call` echo). The gateway child's CPU time
 * per call is the figure of merit: read in nanoseconds from
 * /proc/<pid>/task/<tid>/schedstat, all its threads (libuv pool, GC helpers)
 * included, over --rounds rounds; each round gives each variant's ratio to
 * "off", and the median of those ratios is reported beside the total (the
 * machine is shared: one busy moment moves one round, not the result).
 * Latency percentiles are from the client's side. /metrics is scraped once
 * per child at the end (its size and time are reported, and it must parse;
 * its store-call counts give the store calls per gateway call).
 *
 * Because a few per cent drown in that noise, the added code path is also
 * timed alone, in this process: a tapped InMemoryTransport (the SDK's)
 * receiving a request and sending its response, against an untapped one, for
 * the server and the client tap with metrics (and with tracing: an in-memory
 * exporter), and a timed memory-store call against a plain one. Those
 * microseconds per call, against the "off" child's CPU per call, are the
 * deterministic part of the overhead (GC pressure and the prom-client
 * default collectors are not in them; the A/B table has them).
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`):
 *   --calls=2000   measured calls per child and path (after --warmup=50)
 *   --rounds=10    rounds the calls are split into
 *
 * Output: a markdown report on stdout (progress on stderr).
 */
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { everythingServerEntry } from "../src/config/demo.js";
import { installContextManager } from "../src/observability/context-manager.js";
import { instrumentTransportFactory } from "../src/observability/instrument-client.js";
import { instrumentServerTransport } from "../src/observability/instrument-server.js";
import { GatewayMetrics } from "../src/observability/metrics.js";
import { timedStore } from "../src/observability/store-timing.js";
import { openStore } from "../src/store/open.js";
import { ROOT, startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { fmt, percentile, ratio, table } from "./lib/stats.js";
import { option } from "./lib/options.js";

const opts = { warmup: option("warmup", 50), calls: option("calls", 2000), rounds: option("rounds", 10) };
const started = performance.now();
const log = (msg: string) => process.stderr.write(`[bench:obs ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);

const VARIANTS = ["off", "control", "metrics", "async-context", "tracing", "both"] as const;
type Variant = (typeof VARIANTS)[number];
const PATHS = ["meta", "transparent"] as const;
type PathName = (typeof PATHS)[number];

/** CPU time of every thread of `pid`, in ms with nanosecond resolution (schedstat's first field). */
function cpuMsPrecise(pid: number): number {
  let ns = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // the thread ended meanwhile: its time is lost from both readings alike
    }
  }
  return ns / 1e6;
}

function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/** An OTLP/HTTP trace sink: answers every export 200 and counts what it got. */
async function startSink(): Promise<{ url: string; requests: () => number; bytes: () => number; close: () => Promise<void> }> {
  let requests = 0;
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on("data", (c: Buffer) => (bytes += c.length));
    req.on("end", () => {
      requests++;
      res.writeHead(200, { "Content-Type": req.headers["content-type"] ?? "application/x-protobuf" });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    bytes: () => bytes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: "bench-obs", version: "1.0.0" }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

const LONG = { timeout: 300_000 };

async function metaEcho(client: Client): Promise<void> {
  const r = (await client.callTool(
    { name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: "hi" }, timeout_ms: 30_000 } },
    undefined,
    LONG,
  )) as CallToolResult;
  if (r.isError) throw new Error(`execute_tool failed: ${JSON.stringify(r.content)}`);
}

async function transparentEcho(client: Client): Promise<void> {
  const r = (await client.callTool({ name: "echo", arguments: { message: "hi" } }, undefined, LONG)) as CallToolResult;
  if (r.isError) throw new Error(`tools/call failed: ${JSON.stringify(r.content)}`);
}

/** Store calls the child made so far (the sum of its store-latency counts), or undefined without metrics. */
async function storeCalls(gateway: GatewayProcess): Promise<number> {
  const body = await (await fetch(`${gateway.origin}/metrics`)).text();
  let n = 0;
  for (const m of body.matchAll(/^emceepee_store_operation_duration_seconds_count\{[^}]*\} (\S+)$/gm)) n += Number(m[1]);
  return n;
}

interface Measured {
  samples: Record<PathName, number[]>;
  cpuMsPerCall: Record<PathName, number>;
  /** Per round: this variant's CPU over "off"'s. */
  roundRatios: Record<PathName, number[]>;
  /** Store calls per gateway call (metrics variant only). */
  storePerCall?: Record<PathName, number>;
  scrape?: { ms: number; bytes: number };
}

async function main(): Promise<void> {
  const sink = await startSink();
  const noOtel = { OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined, OTEL_TRACES_EXPORTER: undefined };
  const otel = { ...noOtel, OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: "emceepee-bench" };
  const setups: Record<Variant, { metrics: boolean; env: Record<string, string | undefined> }> = {
    off: { metrics: false, env: noOtel },
    control: { metrics: false, env: noOtel },
    metrics: { metrics: true, env: noOtel },
    "async-context": { metrics: false, env: { ...noOtel, NODE_OPTIONS: `--import ${path.join(ROOT, "bench/lib/async-context-on.mjs")}` } },
    tracing: { metrics: false, env: otel },
    both: { metrics: true, env: otel },
  };
  const gateways = {} as Record<Variant, GatewayProcess>;
  const clients = {} as Record<Variant, Record<PathName, Client>>;
  const out = {} as Record<Variant, Measured>;
  try {
    for (const v of VARIANTS) {
      const config = {
        mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"] } },
        gateway: { store: { kind: "memory" }, accessLog: false, metrics: { enabled: setups[v].metrics } },
      };
      log(`starting ${v}`);
      gateways[v] = await startGatewayProcess(config, `obs-${v}`, "silent", setups[v].env);
      clients[v] = { meta: await connect(gateways[v].url), transparent: await connect(`${gateways[v].origin}/servers/everything/mcp`) };
      out[v] = { samples: { meta: [], transparent: [] }, cpuMsPerCall: { meta: 0, transparent: 0 }, roundRatios: { meta: [], transparent: [] } };
    }
    const run = (v: Variant, p: PathName) => (p === "meta" ? metaEcho(clients[v].meta) : transparentEcho(clients[v].transparent));
    for (const p of PATHS) {
      log(`${p}: warm-up ${opts.warmup}, then ${opts.calls} per child, interleaved`);
      for (let i = 0; i < opts.warmup; i++) for (const v of VARIANTS) await run(v, p);
      const storeBefore = await storeCalls(gateways.metrics);
      const cpu = () => Object.fromEntries(VARIANTS.map((v) => [v, cpuMsPrecise(gateways[v].pid)])) as Record<Variant, number>;
      const perRound = Math.ceil(opts.calls / opts.rounds);
      const total = Object.fromEntries(VARIANTS.map((v) => [v, 0])) as Record<Variant, number>;
      for (let done = 0; done < opts.calls;) {
        const before = cpu();
        const n = Math.min(perRound, opts.calls - done);
        for (let i = 0; i < n; i++, done++) {
          const order = done % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
          for (const v of order) {
            const t0 = performance.now();
            await run(v, p);
            out[v].samples[p].push(performance.now() - t0);
          }
        }
        const after = cpu();
        for (const v of VARIANTS) {
          total[v] += after[v] - before[v];
          out[v].roundRatios[p].push((after[v] - before[v]) / (after.off - before.off));
        }
      }
      for (const v of VARIANTS) out[v].cpuMsPerCall[p] = total[v] / opts.calls;
      out.metrics.storePerCall = {
        ...(out.metrics.storePerCall ?? { meta: 0, transparent: 0 }),
        [p]: ((await storeCalls(gateways.metrics)) - storeBefore) / opts.calls,
      };
    }
    for (const v of VARIANTS) {
      if (!setups[v].metrics) continue;
      const t0 = performance.now();
      const res = await fetch(`${gateways[v].origin}/metrics`);
      const body = await res.text();
      if (res.status !== 200 || !body.includes("mcp_server_operation_duration_seconds_count")) throw new Error(`/metrics of ${v}: ${res.status}`);
      out[v].scrape = { ms: performance.now() - t0, bytes: body.length };
    }
    // Let the batch span processors flush (default: every 5 s) before reading the sink.
    await new Promise((r) => setTimeout(r, 6_000));
  } finally {
    for (const v of VARIANTS) {
      for (const c of Object.values(clients[v] ?? {})) await c.close().catch(() => undefined);
      await gateways[v]?.stop();
    }
    await sink.close();
  }
  log("hot path alone (in this process)");
  const hot = await hotPath();
  report(out, { requests: sink.requests(), bytes: sink.bytes() }, hot);
}

// ---------------------------------------------------------------------------
// The added code path alone, in this process
// ---------------------------------------------------------------------------

interface HotPath {
  /** µs of CPU added per request, by the server tap and by the client tap (metrics; metrics + tracing), and per store call. */
  server: number;
  client: number;
  serverTraced: number;
  clientTraced: number;
  store: number;
}

/** CPU µs per iteration of `fn`, the best of three runs. */
function cpuPer(n: number, fn: (i: number) => void): number {
  let best = Infinity;
  for (let run = 0; run < 3; run++) {
    const t0 = process.cpuUsage();
    for (let i = 0; i < n; i++) fn(i);
    const d = process.cpuUsage(t0);
    best = Math.min(best, (d.user + d.system) / n);
  }
  return best;
}

async function cpuPerAsync(n: number, fn: () => Promise<unknown>): Promise<number> {
  let best = Infinity;
  for (let run = 0; run < 3; run++) {
    const t0 = process.cpuUsage();
    for (let i = 0; i < n; i++) await fn();
    const d = process.cpuUsage(t0);
    best = Math.min(best, (d.user + d.system) / n);
  }
  return best;
}

const request = (id: number): JSONRPCMessage => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "echo", arguments: { message: "hi" } } });
const response = (id: number): JSONRPCMessage => ({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: "hi" }] } });
const ignore = () => undefined;

/** A face's transport after connect (its handler set), optionally tapped: one iteration receives a request and sends its response. */
function served(tap?: (t: InMemoryTransport) => void): (i: number) => void {
  const [peer, transport] = InMemoryTransport.createLinkedPair();
  peer.onmessage = ignore;
  transport.onmessage = ignore;
  tap?.(transport);
  return (i) => {
    transport.onmessage!(request(i));
    void transport.send(response(i));
  };
}

/** An upstream client's transport, optionally made by a tapped factory: one iteration sends a request and receives its response. */
async function sent(tapped?: Parameters<typeof instrumentTransportFactory>[1]): Promise<(i: number) => void> {
  const [transport, peer] = InMemoryTransport.createLinkedPair();
  peer.onmessage = ignore;
  const made = tapped ? instrumentTransportFactory(() => ({ transport }), tapped)("up", { command: "bench", args: [] }).transport : transport;
  made.onmessage = ignore;
  await made.start();
  return (i) => {
    void made.send(request(i));
    made.onmessage!(response(i));
  };
}

async function hotPath(): Promise<HotPath> {
  const n = 100_000;
  const metrics = new GatewayMetrics();
  const plainServer = served();
  const plainClient = await sent();
  const server =
    cpuPer(
      n,
      served((t) => instrumentServerTransport(t, { metrics, transport: "tcp" })),
    ) - cpuPer(n, plainServer);
  const client = cpuPer(n, await sent({ metrics })) - cpuPer(n, plainClient);
  const plainStore = await openStore({ kind: "memory" });
  const store = timedStore(await openStore({ kind: "memory" }), metrics);
  const storeCost = (await cpuPerAsync(n / 2, () => store.tasks.get("missing"))) - (await cpuPerAsync(n / 2, () => plainStore.tasks.get("missing")));
  // Tracing last: its context manager (AsyncLocalStorage) stays on for the rest of the process.
  installContextManager();
  const exporter = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer("bench");
  const tracedServer = served((t) => instrumentServerTransport(t, { metrics, tracer, transport: "tcp", sessionHash: "0123abcd" }));
  const serverTraced = cpuPer(n / 10, (i) => (tracedServer(i), i % 1000 === 0 && exporter.reset())) - cpuPer(n / 10, plainServer);
  const tracedClient = await sent({ metrics, tracer });
  const clientTraced = cpuPer(n / 10, (i) => (tracedClient(i), i % 1000 === 0 && exporter.reset())) - cpuPer(n / 10, plainClient);
  await store.close();
  await plainStore.close();
  return { server, client, serverTraced, clientTraced, store: storeCost };
}

function report(out: Record<Variant, Measured>, sink: { requests: number; bytes: number }, hot: HotPath): void {
  const lines: string[] = [];
  lines.push(
    `## Observability overhead (${opts.calls} calls per child and path in ${opts.rounds} rounds, after ${opts.warmup} warm-up; node ${process.version})`,
    "",
  );
  for (const p of PATHS) {
    lines.push(`### ${p === "meta" ? "Meta face: execute_tool echo" : "Transparent face: tools/call echo"}`, "");
    const offCpu = out.off.cpuMsPerCall[p];
    const offP50 = percentile(out.off.samples[p], 50);
    lines.push(
      table(
        ["variant", "gateway CPU ms/call (total)", "CPU vs off, median of rounds", "p50 ms", "p99 ms"],
        VARIANTS.map((v) => {
          const cpu = out[v].cpuMsPerCall[p];
          const p50 = percentile(out[v].samples[p], 50);
          const rounds = out[v].roundRatios[p];
          return [
            v,
            `${fmt(cpu, 3)}${v === "off" ? "" : ratio(cpu, offCpu)}`,
            v === "off" ? "" : `×${fmt(median(rounds), 3)} (rounds ${fmt(Math.min(...rounds), 2)}–${fmt(Math.max(...rounds), 2)})`,
            `${fmt(p50, 2)}${v === "off" ? "" : ratio(p50, offP50)}`,
            fmt(percentile(out[v].samples[p], 99), 2),
          ];
        }),
      ),
      "",
    );
  }
  const scrapes = VARIANTS.flatMap((v) => (out[v].scrape ? [`${v}: ${fmt(out[v].scrape.ms, 1)} ms, ${fmt(out[v].scrape.bytes / 1024, 1)} KB`] : []));
  lines.push(`/metrics scrape after the run — ${scrapes.join("; ")}.`);
  lines.push(`OTLP sink: ${sink.requests} export requests, ${fmt(sink.bytes / 1024, 1)} KB.`, "");
  lines.push("### The added code path alone (CPU µs per call, in-process)", "");
  const rows = PATHS.map((p) => {
    const storePerCall = out.metrics.storePerCall?.[p] ?? 0;
    const metricsUs = hot.server + hot.client + storePerCall * hot.store;
    const tracingUs = hot.serverTraced + hot.clientTraced + storePerCall * hot.store;
    const offUs = out.off.cpuMsPerCall[p] * 1000;
    return [
      p,
      fmt(storePerCall, 1),
      `${fmt(metricsUs, 2)} (${fmt((100 * metricsUs) / offUs, 2)} % of off's ${fmt(offUs, 0)})`,
      `${fmt(tracingUs, 2)} (${fmt((100 * tracingUs) / offUs, 2)} %)`,
    ];
  });
  lines.push(table(["path (1 served + 1 upstream request)", "store calls/call", "metrics µs/call", "metrics + tracing µs/call"], rows), "");
  lines.push(
    `Per request: server tap ${fmt(hot.server, 2)} µs, client tap ${fmt(hot.client, 2)} µs, timed store call ${fmt(hot.store, 2)} µs with metrics; with tracing (spans to an in-memory exporter) ${fmt(hot.serverTraced, 2)} / ${fmt(hot.clientTraced, 2)} µs.`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
