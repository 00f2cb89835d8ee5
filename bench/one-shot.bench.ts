/**
 * One-shot clients (`npm run bench:oneshot`): what `clients` inspector-cli-like
 * clients leave behind — each opens a meta-face session, calls list_servers
 * once and closes its connection without DELETE — on a gateway with `servers`
 * stdio upstreams (server-everything), once per design:
 *
 *   eager  `upstream.eagerConnect: true`: every session connects every server
 *          at start (the previous design), so each one-shot client costs
 *          `servers` processes until its session ends;
 *   lazy   the default: a server starts when a session first needs it, and
 *          list_servers needs none.
 *
 * Both runs use `sessions.oneShotIdleMs` = --one-shot-ms, so the report also
 * shows what is left once the one-shot sessions have expired. RSS is the
 * gateway's (after a full GC, bench/lib/gc-probe.mjs) plus that of every
 * upstream process below it, read from /proc.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`):
 *   --clients=20        one-shot clients per run
 *   --servers=3         stdio upstreams in the config
 *   --one-shot-ms=60000 sessions.oneShotIdleMs for both runs (the config default)
 *   --modes=eager,lazy  which runs
 *
 * Output: a markdown report on stdout (progress on stderr).
 */
import { performance } from "node:perf_hooks";
import os from "node:os";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { everythingServerEntry } from "../src/config/demo.js";
import fs from "node:fs";
import { startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { alive, descendantPids, rssBytes } from "./lib/proc.js";
import { fmt, mb, table } from "./lib/stats.js";
import { option } from "./lib/options.js";

type Mode = "eager" | "lazy";
const MODES: readonly Mode[] = ["eager", "lazy"];
const opts = {
  clients: option("clients", 20),
  servers: option("servers", 3),
  oneShotMs: option("one-shot-ms", 60_000),
  modes: (process.argv.find((a) => a.startsWith("--modes="))?.slice(8) ?? process.env.BENCH_MODES ?? "eager,lazy").split(",") as Mode[],
};
for (const m of opts.modes) if (!MODES.includes(m)) throw new Error(`--modes: unknown mode '${m}' (have ${MODES.join(", ")})`);

const started = performance.now();
const log = (msg: string): void => {
  process.stderr.write(`[bench:oneshot ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
};

/** inspector-cli's pattern: initialize, one tools/call, close the connection, no DELETE. */
async function oneShotClient(gateway: GatewayProcess, i: number): Promise<void> {
  const client = new Client({ name: `bench-one-shot-${i}`, version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url)));
  const result = (await client.callTool({ name: "list_servers", arguments: {} })) as CallToolResult;
  if (result.isError) throw new Error(`list_servers failed: ${JSON.stringify(result.content)}`);
  await client.close();
}

/** A stuck client fails the run with the gateway's last log lines instead of hanging it. */
async function withTimeout<T>(work: Promise<T>, ms: number, what: string, gateway: GatewayProcess): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish in ${ms} ms; gateway log tail:\n${gateway.stderr().slice(-3000)}`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

interface Snapshot {
  gatewayRss: number;
  children: number;
  childrenRss: number;
}

/** The upstream processes under the gateway (not, e.g., tsx's esbuild helper). */
function upstreamPids(gateway: GatewayProcess): number[] {
  return descendantPids(gateway.pid).filter((pid) => {
    try {
      return alive(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("server-everything");
    } catch {
      return false;
    }
  });
}

async function snapshot(gateway: GatewayProcess): Promise<Snapshot> {
  const gatewayRss = await gateway.settledRss(500);
  const pids = upstreamPids(gateway);
  return { gatewayRss, children: pids.length, childrenRss: pids.reduce((sum, pid) => sum + rssBytes(pid), 0) };
}

/** Waits until the gateway's process count stops changing (eager sessions spawn in the background). */
async function settledChildren(gateway: GatewayProcess, want: (n: number) => boolean, timeoutMs: number): Promise<number> {
  const end = Date.now() + timeoutMs;
  let n = upstreamPids(gateway).length;
  while (!want(n) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 250));
    n = upstreamPids(gateway).length;
  }
  return n;
}

function expiredSessions(gateway: GatewayProcess): number {
  return gateway
    .stderr()
    .split("\n")
    .filter((l) => l.includes('"session_destroyed"') && l.includes("one-shot idle timeout")).length;
}

interface Run {
  mode: Mode;
  idle: Snapshot;
  loaded: Snapshot;
  expired: Snapshot;
  expiredSessions: number;
  clientsMs: number;
}

async function run(mode: Mode): Promise<Run> {
  const config = {
    mcpServers: Object.fromEntries(
      Array.from({ length: opts.servers }, (_, i) => [`everything${i + 1}`, { command: process.execPath, args: [everythingServerEntry(), "stdio"] }]),
    ),
    gateway: {
      upstream: { eagerConnect: mode === "eager" },
      sessions: { oneShotIdleMs: opts.oneShotMs, sweepIntervalMs: Math.max(100, Math.floor(opts.oneShotMs / 10)) },
    },
  };
  // Log level info: the bench reads session_destroyed lines to know the sessions expired.
  const gateway = await startGatewayProcess(config, `oneshot-${mode}`, "info");
  current = gateway;
  try {
    const idle = await snapshot(gateway);
    log(`${mode}: idle gateway ${mb(idle.gatewayRss)}; ${opts.clients} one-shot clients`);
    const t0 = performance.now();
    for (let i = 0; i < opts.clients; i++) await withTimeout(oneShotClient(gateway, i), 60_000, `one-shot client ${i}`, gateway);
    const clientsMs = performance.now() - t0;
    const expected = mode === "eager" ? opts.clients * opts.servers : 0;
    // Eager sessions spawn their upstreams in the background: wait for all of them, but measure before the first sessions expire.
    await settledChildren(gateway, (n) => n >= expected, Math.max(0, opts.oneShotMs / 2 - clientsMs));
    const loaded = await snapshot(gateway);
    log(`${mode}: ${loaded.children} upstream processes (${mb(loaded.childrenRss)}), gateway ${mb(loaded.gatewayRss)}; waiting for one-shot expiry`);
    const end = Date.now() + opts.oneShotMs * 3 + 60_000;
    while (expiredSessions(gateway) < opts.clients && Date.now() < end) await new Promise((r) => setTimeout(r, 250));
    await settledChildren(gateway, (n) => n === 0, 60_000);
    const expired = await snapshot(gateway);
    log(`${mode}: ${expiredSessions(gateway)} sessions expired; ${expired.children} processes left, gateway ${mb(expired.gatewayRss)}`);
    return { mode, idle, loaded, expired, expiredSessions: expiredSessions(gateway), clientsMs };
  } finally {
    await gateway.stop();
  }
}

function report(runs: Run[]): string {
  const total = (s: Snapshot) => s.gatewayRss + s.childrenRss;
  const rows = runs.map((r) => [
    r.mode === "eager" ? "eager (`upstream.eagerConnect: true`, the previous design)" : "lazy (default)",
    mb(r.idle.gatewayRss),
    `${r.loaded.children}`,
    mb(r.loaded.childrenRss),
    mb(r.loaded.gatewayRss),
    `**${mb(total(r.loaded))}**`,
    `${r.expiredSessions}/${opts.clients} sessions expired, ${r.expired.children} processes, ${mb(total(r.expired))}`,
    fmt(r.clientsMs / opts.clients, 0),
  ]);
  const cpus = os.cpus();
  return [
    `## ${opts.clients} one-shot clients (initialize + list_servers, no DELETE), ${opts.servers} stdio upstreams (server-everything)`,
    "",
    table(
      [
        "design",
        "idle gateway RSS",
        "upstream processes after the clients",
        "their RSS",
        "gateway RSS",
        "gateway + upstreams",
        `after \`sessions.oneShotIdleMs\` (${opts.oneShotMs} ms)`,
        "ms per client",
      ],
      rows,
    ),
    "",
    `- machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? "unknown CPU"}, ${mb(os.totalmem())} RAM, ${os.type()} ${os.release()}; node ${process.version}; run ${new Date().toISOString()}, total ${fmt((performance.now() - started) / 1000, 0)} s`,
    `- options: ${Object.entries(opts)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(", ")}`,
    "",
  ].join("\n");
}

/** The gateway of the run in progress, stopped (with its upstreams) on SIGINT/SIGTERM too. */
let current: GatewayProcess | undefined;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping the gateway`);
    void (current?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  log(`options ${JSON.stringify(opts)}`);
  const runs: Run[] = [];
  for (const mode of opts.modes) runs.push(await run(mode));
  process.stdout.write(report(runs));
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
