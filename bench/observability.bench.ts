/**
 * Observability benchmark (`npm run bench:obs`): what metrics and tracing cost
 * per call (docs/adr/0011), as ratios against both off, in one run.
 *
 * Four `emceepee serve` children, `--store memory`, server-everything over
 * stdio, measured interleaved (each call goes to the next child in turn, the
 * order reversed every round, so drift hits all alike):
 * - off:      `gateway.metrics.enabled: false`, no OTEL_* variable
 * - metrics:  metrics on (the default), no OTEL_* variable
 * - tracing:  metrics off, OTEL_EXPORTER_OTLP_ENDPOINT set: spans exported
 *             over OTLP/HTTP to a sink in this process that answers 200
 * - both:     metrics on and tracing on
 * Two paths each: the meta face (`execute_tool` echo) and the transparent
 * face of one upstream (`tools/call` echo). The gateway child's CPU time
 * (user + system, from /proc) per call is the figure of merit; latency
 * percentiles are from the client's side. /metrics is scraped once per
 * child at the end (its size and time are reported, and it must parse).
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`):
 *   --calls=1000   measured calls per child and path (after --warmup=50)
 *
 * Output: a markdown report on stdout (progress on stderr).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { fmt, percentile, ratio, table } from "./lib/stats.js";

function option(name: string, fallback: number): number {
  const flag = process.argv.find((a) => a.startsWith(`--${name}=`));
  const raw = flag ? flag.slice(name.length + 3) : process.env[`BENCH_${name.toUpperCase()}`];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 1) throw new Error(`--${name} must be a positive number, got '${raw}'`);
  return Math.floor(n);
}

const opts = { warmup: option("warmup", 50), calls: option("calls", 1000) };
const started = performance.now();
const log = (msg: string) => process.stderr.write(`[bench:obs ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);

const VARIANTS = ["off", "metrics", "tracing", "both"] as const;
type Variant = (typeof VARIANTS)[number];
const PATHS = ["meta", "transparent"] as const;
type PathName = (typeof PATHS)[number];

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

interface Measured {
  samples: Record<PathName, number[]>;
  cpuMsPerCall: Record<PathName, number>;
  scrape?: { ms: number; bytes: number };
}

async function main(): Promise<void> {
  const sink = await startSink();
  const noOtel = { OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined, OTEL_TRACES_EXPORTER: undefined };
  const otel = { ...noOtel, OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: "emceepee-bench" };
  const setups: Record<Variant, { metrics: boolean; env: Record<string, string | undefined> }> = {
    off: { metrics: false, env: noOtel },
    metrics: { metrics: true, env: noOtel },
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
      out[v] = { samples: { meta: [], transparent: [] }, cpuMsPerCall: { meta: 0, transparent: 0 } };
    }
    const run = (v: Variant, p: PathName) => (p === "meta" ? metaEcho(clients[v].meta) : transparentEcho(clients[v].transparent));
    for (const p of PATHS) {
      log(`${p}: warm-up ${opts.warmup}, then ${opts.calls} per child, interleaved`);
      for (let i = 0; i < opts.warmup; i++) for (const v of VARIANTS) await run(v, p);
      const cpu0 = Object.fromEntries(VARIANTS.map((v) => [v, gateways[v].cpuMs()])) as Record<Variant, number>;
      for (let i = 0; i < opts.calls; i++) {
        const order = i % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
        for (const v of order) {
          const t0 = performance.now();
          await run(v, p);
          out[v].samples[p].push(performance.now() - t0);
        }
      }
      for (const v of VARIANTS) out[v].cpuMsPerCall[p] = (gateways[v].cpuMs() - cpu0[v]) / opts.calls;
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
  report(out, { requests: sink.requests(), bytes: sink.bytes() });
}

function report(out: Record<Variant, Measured>, sink: { requests: number; bytes: number }): void {
  const lines: string[] = [];
  lines.push(`## Observability overhead (${opts.calls} calls per child and path, after ${opts.warmup} warm-up; node ${process.version})`, "");
  for (const p of PATHS) {
    lines.push(`### ${p === "meta" ? "Meta face: execute_tool echo" : "Transparent face: tools/call echo"}`, "");
    const offCpu = out.off.cpuMsPerCall[p];
    const offP50 = percentile(out.off.samples[p], 50);
    lines.push(
      table(
        ["variant", "gateway CPU ms/call", "p50 ms", "p99 ms"],
        VARIANTS.map((v) => {
          const cpu = out[v].cpuMsPerCall[p];
          const p50 = percentile(out[v].samples[p], 50);
          return [
            v,
            `${fmt(cpu, 3)}${v === "off" ? "" : ratio(cpu, offCpu)}`,
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
  lines.push(`OTLP sink: ${sink.requests} export requests, ${fmt(sink.bytes / 1024, 1)} KB.`);
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
