/**
 * Soak benchmark (`npm run bench:soak`, issue 29): does a long-running
 * `emceepee serve` keep a flat memory floor? One gateway child process, for
 * `--minutes`:
 *
 *   meta     `--sessions` meta-face sessions calling back to back: `execute_tool`
 *            echo; every `--promote-every`-th call a promoted one
 *            (`trigger-long-running-operation`, `timeout_ms: 0`, then
 *            `get_task_result`); every `--elicit-every`-th a promoted
 *            `trigger-elicitation-request` answered with `get_elicitations` +
 *            `respond_to_elicitation` (accept, decline, cancel in turn; not with
 *            `--sharing=shared`: a shared stdio upstream's elicitation cannot be
 *            told apart while other sessions' calls run, README "Many sessions");
 *            an `await_activity` now and then.
 *   churn    every `--churn-ms` a transparent session on /servers/everything/mcp:
 *            initialize, one `echo`, then DELETE — or, every `--abandon-every`-th,
 *            just dropped (it expires after `sessions.oneShotIdleMs`).
 *
 * Every `--sample-ms` the gateway's RSS (/proc) and V8 heap (process.memoryUsage
 * over IPC, no forced GC) are sampled; each minute's low point is printed to
 * stderr as it ends (a partial run can be read from its log), and the report
 * (stdout, markdown) gives per-quarter floors and the last quarter against the
 * second. `--snapshots=2,40` writes heap snapshots (full GC first) at those
 * minutes into `--out` (diff them with bench/heap-diff.ts).
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`): minutes (60),
 * sessions (10), churn-ms (1500), abandon-every (4), promote-every (25),
 * elicit-every (100), sample-ms (2000), one-shot-ms (60000),
 * store=sqlite|memory (sqlite: serve's default, a temp file), sharing=session|shared,
 * metrics=1 (scrape /metrics every 10 s), tracing=1 (OTLP/HTTP to a sink here),
 * snapshots=<minutes,…>, out=<dir> (samples.csv and snapshots; default a temp dir).
 */
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { startGatewayProcess } from "./lib/gateway-process.js";
import { option } from "./lib/options.js";
import { descendantPids, rssBytes } from "./lib/proc.js";
import { soakReport } from "./lib/soak-report.js";
import { fmt } from "./lib/stats.js";

const text = (name: string, fallback: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? process.env[`BENCH_${name.toUpperCase().replace(/-/g, "_")}`] ?? fallback;

const opts = {
  minutes: option("minutes", 60),
  sessions: option("sessions", 10),
  churnMs: option("churn-ms", 1500),
  abandonEvery: option("abandon-every", 4),
  promoteEvery: option("promote-every", 25),
  elicitEvery: option("elicit-every", 100),
  sampleMs: option("sample-ms", 2000),
  oneShotMs: option("one-shot-ms", 60_000),
  store: text("store", "sqlite"),
  sharing: text("sharing", "session"),
  metrics: text("metrics", "0") === "1",
  tracing: text("tracing", "0") === "1",
  snapshots: text("snapshots", "")
    .split(",")
    .filter(Boolean)
    .map((m) => Number(m)),
  out: text("out", ""),
};
if (!["sqlite", "memory"].includes(opts.store)) throw new Error(`--store must be sqlite or memory, got '${opts.store}'`);
if (!["session", "shared"].includes(opts.sharing)) throw new Error(`--sharing must be session or shared, got '${opts.sharing}'`);
if (opts.snapshots.some((m) => !Number.isFinite(m) || m < 0)) throw new Error("--snapshots must be minutes, e.g. --snapshots=2,40");
const outDir = opts.out ? path.resolve(opts.out) : fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-soak-"));
fs.mkdirSync(outDir, { recursive: true });

const started = performance.now();
const elapsedMin = () => (performance.now() - started) / 60_000;
const log = (msg: string): void => {
  process.stderr.write(`[bench:soak ${elapsedMin().toFixed(2)}min] ${msg}\n`);
};
const MiB = (b: number) => fmt(b / 1048576, 1);
const counts = { calls: 0, promoted: 0, elicitations: 0, churned: 0, abandoned: 0, errors: 0, scrapes: 0 };
const errors: string[] = [];
const fail = (where: string, e: unknown) => {
  counts.errors++;
  // fetch's "fetch failed" says why only in its cause (a reset keep-alive socket, a connect timeout…).
  const cause = e instanceof Error && e.cause instanceof Error ? ` (${e.cause.message})` : "";
  if (errors.length < 20) errors.push(`${where}: ${e instanceof Error ? e.message : String(e)}${cause}`);
};

/** An OTLP/HTTP trace sink that answers 200 and keeps nothing. */
async function startSink(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) };
}

const sink = opts.tracing ? await startSink() : undefined;
const config = {
  mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"], sharing: opts.sharing } },
  gateway: {
    ...(opts.store === "memory" ? { store: { kind: "memory" } } : {}),
    sessions: { oneShotIdleMs: opts.oneShotMs },
    tasks: { maxTasksPerSession: 1000 },
  },
};
const otel = sink
  ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: "emceepee-soak" }
  : { OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined, OTEL_TRACES_EXPORTER: undefined };
const gateway = await startGatewayProcess(config, "soak", "error", otel);
log(
  `gateway pid ${gateway.pid} at ${gateway.url}; store ${opts.store}, sharing ${opts.sharing}, metrics ${opts.metrics}, tracing ${opts.tracing}; out ${outDir}`,
);

const LONG = { timeout: 300_000 };
let stopping = false;

async function connect(url: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: "bench-soak", version: "1.0.0" }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

async function meta(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const r = (await client.callTool({ name, arguments: args }, undefined, LONG)) as CallToolResult;
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content).slice(0, 300)}`);
  return r;
}

function sc<T>(r: CallToolResult, key: string): T | undefined {
  return (r.structuredContent as Record<string, T> | undefined)?.[key];
}

async function promote(client: Client, tool: string, args: Record<string, unknown>): Promise<string> {
  const r = await meta(client, "execute_tool", { server: "everything", tool, args, timeout_ms: 0 });
  const id = sc<string>(r, "task_id");
  if (!id) throw new Error(`execute_tool ${tool} with timeout_ms 0 was not promoted: ${JSON.stringify(r.content).slice(0, 300)}`);
  counts.promoted++;
  return id;
}

const ACTIONS = ["accept", "decline", "cancel"] as const;
async function elicitRound(client: Client, n: number): Promise<void> {
  const taskId = await promote(client, "trigger-elicitation-request", {});
  let requestId: string | undefined;
  for (let i = 0; i < 200 && !requestId; i++) {
    const r = await meta(client, "get_elicitations", {});
    requestId = sc<Array<{ requestId: string }>>(r, "elicitations")?.[0]?.requestId;
    if (!requestId) await new Promise((res) => setTimeout(res, 50));
  }
  if (!requestId) throw new Error("the promoted elicitation never showed in get_elicitations");
  const action = ACTIONS[n % ACTIONS.length]!;
  await meta(client, "respond_to_elicitation", {
    request_id: requestId,
    action,
    ...(action === "accept" ? { content: { name: "Soak", check: true, integer: 7 } } : {}),
  });
  await meta(client, "get_task_result", { task_id: taskId, timeout_ms: 30_000 });
  counts.elicitations++;
}

async function metaLoop(index: number): Promise<void> {
  const { client, transport } = await connect(gateway.url);
  let n = 0;
  while (!stopping) {
    n++;
    try {
      if (n % opts.elicitEvery === 0 && opts.sharing === "session") await elicitRound(client, n / opts.elicitEvery);
      else if (n % opts.promoteEvery === 0) {
        const id = await promote(client, "trigger-long-running-operation", { duration: 0.2, steps: 1 });
        await meta(client, "get_task_result", { task_id: id, timeout_ms: 30_000 });
      } else if (n % 97 === 0) await meta(client, "await_activity", { timeout_ms: 10 });
      else await meta(client, "execute_tool", { server: "everything", tool: "echo", args: { message: `soak ${index} ${n}` } });
      counts.calls++;
    } catch (e) {
      fail(`meta ${index}`, e);
      await new Promise((res) => setTimeout(res, 500));
    }
  }
  await transport.terminateSession().catch(() => undefined);
  await client.close();
}

async function churnOnce(n: number): Promise<void> {
  const { client, transport } = await connect(`${gateway.origin}/servers/everything/mcp`);
  try {
    const r = (await client.callTool({ name: "echo", arguments: { message: `churn ${n}` } }, undefined, LONG)) as CallToolResult;
    if (r.isError) throw new Error(`echo: ${JSON.stringify(r.content)}`);
    if (n % opts.abandonEvery === 0) counts.abandoned++;
    else await transport.terminateSession();
    counts.churned++;
  } finally {
    await client.close();
  }
}

async function churnLoop(): Promise<void> {
  let n = 0;
  while (!stopping) {
    const t0 = performance.now();
    try {
      await churnOnce(++n);
    } catch (e) {
      fail("churn", e);
    }
    const wait = opts.churnMs - (performance.now() - t0);
    if (wait > 0 && !stopping) await new Promise((res) => setTimeout(res, wait));
  }
}

async function scrapeLoop(): Promise<void> {
  while (!stopping) {
    try {
      const res = await fetch(`${gateway.origin}/metrics`);
      await res.text();
      if (res.ok) counts.scrapes++;
      else fail("metrics", new Error(`HTTP ${res.status}`));
    } catch (e) {
      fail("metrics", e);
    }
    await new Promise((res) => setTimeout(res, 10_000));
  }
}

interface Sample {
  min: number;
  rss: number;
  heapUsed: number;
  external: number;
  upstreams: number;
}
const samples: Sample[] = [];
/** The work done when each sample was taken. */
const progress: Array<{ calls: number; churned: number }> = [];
const csv = fs.createWriteStream(path.join(outDir, "samples.csv"));
csv.write("minute,rss_bytes,heap_used_bytes,external_bytes,upstream_processes,calls,promoted,churned,errors\n");
let minuteShown = 0;
const pendingSnapshots = [...opts.snapshots].sort((a, b) => a - b);

async function sampleOnce(): Promise<void> {
  const mem = (await gateway.ask("mem"))?.memory;
  const s: Sample = {
    min: elapsedMin(),
    rss: rssBytes(gateway.pid),
    heapUsed: mem?.heapUsed ?? 0,
    external: (mem?.external ?? 0) + (mem?.arrayBuffers ?? 0),
    upstreams: descendantPids(gateway.pid).length,
  };
  samples.push(s);
  progress.push({ calls: counts.calls, churned: counts.churned });
  csv.write(`${s.min.toFixed(3)},${s.rss},${s.heapUsed},${s.external},${s.upstreams},${counts.calls},${counts.promoted},${counts.churned},${counts.errors}\n`);
  while (Math.floor(s.min) > minuteShown) {
    const m = samples.filter((x) => x.min >= minuteShown && x.min < minuteShown + 1);
    if (m.length > 0)
      log(
        `minute ${minuteShown + 1}: RSS low ${MiB(Math.min(...m.map((x) => x.rss)))} MiB, high ${MiB(Math.max(...m.map((x) => x.rss)))} MiB; ` +
          `heap low ${MiB(Math.min(...m.map((x) => x.heapUsed)))} MiB; upstream processes ${s.upstreams}; ` +
          `calls ${counts.calls}, promoted ${counts.promoted}, elicitations ${counts.elicitations}, churned ${counts.churned}, errors ${counts.errors}`,
      );
    minuteShown++;
  }
  if (pendingSnapshots.length > 0 && s.min >= pendingSnapshots[0]!) {
    const at = pendingSnapshots.shift()!;
    const file = path.join(outDir, `gateway-${at}min.heapsnapshot`);
    const answer = await gateway.ask("snapshot", { path: file }, 300_000);
    log(`heap snapshot at minute ${at}: ${answer?.path ?? "none (no answer)"}, heap used after GC ${MiB(answer?.memory?.heapUsed ?? 0)} MiB`);
  }
}

const durationMs = opts.minutes * 60_000;
const loops = [...Array.from({ length: opts.sessions }, (_, i) => metaLoop(i)), churnLoop(), ...(opts.metrics ? [scrapeLoop()] : [])];
while (performance.now() - started < durationMs) {
  const t0 = performance.now();
  await sampleOnce();
  await new Promise((res) => setTimeout(res, Math.max(0, opts.sampleMs - (performance.now() - t0))));
}
stopping = true;
await Promise.allSettled(loops);
const settled = await gateway.settledRss(1000);
await gateway.stop();
await sink?.close();
csv.end();

// Report: per-quarter floors and the curve (bench/lib/soak-report.ts).
const out = [
  `# Soak: ${opts.minutes} min, ${opts.sessions} meta sessions, a transparent session every ${opts.churnMs} ms`,
  "",
  ...soakReport(
    samples.map((s, i) => ({ ...s, calls: progress[i]?.calls, churned: progress[i]?.churned })),
    opts.minutes,
  ),
  "",
  `Start RSS ${MiB(samples[0]?.rss ?? 0)} MiB; after the run, sessions closed and a full GC: ${MiB(settled)} MiB.`,
  "",
  `Work: ${counts.calls} calls, ${counts.promoted} promoted, ${counts.elicitations} elicitations answered, ${counts.churned} churned sessions (${counts.abandoned} left to expire), ` +
    `${counts.scrapes} /metrics scrapes, ${counts.errors} errors.`,
  ...errors.map((e) => `- ${e}`),
  "",
  `Options: ${JSON.stringify(opts)}; node ${process.version}, ${os.cpus().length} CPUs, ${new Date().toISOString()}; samples in ${outDir}/samples.csv.`,
];
process.stdout.write(out.join("\n") + "\n");
