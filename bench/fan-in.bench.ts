/**
 * Fan-in benchmark (`npm run bench:fanin`, issue 13): what many sessions on one
 * server cost, in one run, side by side:
 *
 *   direct  server-everything in Streamable HTTP mode, the SDK clients straight on it;
 *   shared  `emceepee serve` with a stdio server-everything, `"sharing": "shared"`
 *           (one process for every session), on /servers/everything/mcp;
 *   pool0   the same with `"sharing": "session"` (one process per session) and
 *           `gateway.upstream.warmPool: 0`;
 *   pool1   session mode with `warmPool: 1` (the default: a process started ahead).
 *
 * For each: one session opened and closed (warm-up), `idle-samples` new sessions
 * one after another on the idle gateway (time to first call, each after the
 * upstream processes settled, i.e. the warm pool refilled), then `sessions`
 * sessions opened at once (initialize + one `echo` each: the open-all time),
 * the server side's RSS before and after (the gateway after a full GC plus every
 * process below it, from /proc; direct: the server process), then one more
 * session (its time to first call) before all are closed. Last, throughput:
 * `concurrency` sessions per mode each making `calls-per-session` sequential
 * echo calls, direct / shared / session mode interleaved over `rounds` rounds.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`):
 *   --sessions=100          sessions opened at once
 *   --idle-samples=5        new sessions timed one by one on the idle gateway
 *   --concurrency=16        sessions per mode for throughput
 *   --calls-per-session=40  echo calls per session per throughput round
 *   --rounds=5              throughput rounds (each runs every mode once, order rotating)
 *   --only=a,b              phases: direct, shared, pool0, pool1, throughput
 *
 * Output: a markdown report on stdout (progress on stderr). Every process it
 * starts is stopped at the end. The gateways' upstream processes carry a marker
 * argument; after each gateway stops, any marked process still alive 5 s later
 * is reported as outliving it (the report's cleanup line) and killed by pid.
 *
 * One file (≈570 lines) like the other benches: a script read top to bottom —
 * options, targets, sessions, phases, report — sharing bench/lib for /proc,
 * the gateway child process and formatting.
 */
import fs from "node:fs";
import os from "node:os";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { startEverythingHttp } from "../test/helpers/core-extra.js";
import { startGatewayProcess } from "./lib/gateway-process.js";
import { alive, childPids, cpuMs, descendantPids, rssBytes, totalCpuMs } from "./lib/proc.js";
import { fmt, percentile, table } from "./lib/stats.js";
import { option } from "./lib/options.js";

type Variant = "direct" | "shared" | "pool0" | "pool1";
const VARIANTS: readonly Variant[] = ["direct", "shared", "pool0", "pool1"];
const PHASES = [...VARIANTS, "throughput"];
const LABEL: Record<Variant, string> = {
  direct: "direct (server-everything over Streamable HTTP)",
  shared: '`"sharing": "shared"` (stdio)',
  pool0: '`"sharing": "session"`, `warmPool: 0`',
  pool1: '`"sharing": "session"`, `warmPool: 1`',
};

const opts = {
  sessions: option("sessions", 100),
  idleSamples: option("idle-samples", 5),
  concurrency: option("concurrency", 16),
  callsPerSession: option("calls-per-session", 40),
  rounds: option("rounds", 5),
  only: (process.argv.find((a) => a.startsWith("--only="))?.slice(7) ?? process.env.BENCH_ONLY ?? PHASES.join(",")).split(","),
};
for (const p of opts.only) if (!PHASES.includes(p)) throw new Error(`--only: unknown phase '${p}' (have ${PHASES.join(", ")})`);

const started = performance.now();
const log = (msg: string): void => {
  process.stderr.write(`[bench:fanin ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
};

// ---------------------------------------------------------------------------
// What is measured: a direct server or a gateway child process
// ---------------------------------------------------------------------------

const CALL_OPTIONS = { timeout: 300_000 };

interface Target {
  variant: Variant;
  /** The MCP endpoint the sessions open. */
  url: string;
  /** Server-side RSS in bytes: the gateway (after a full GC) plus every process below it; direct: the server process. */
  rss(): Promise<number>;
  /** The server-everything processes serving this target. */
  upstreams(): number[];
  /** CPU ms so far of the gateway (0 for direct) and of the upstream processes. */
  cpu(): { gateway: number; upstream: number };
  /** Upstream processes the target settles at when idle: the shared process, the warm pool. */
  idleProcesses: number;
  stop(): Promise<void>;
}

const stops: Array<() => Promise<void>> = [];

/**
 * Marks every upstream process a gateway of this run starts (an extra argument, which server-everything ignores), so
 * that processes outliving their gateway are found — and reported, and killed — whoever their parent is by then.
 */
const RUN_MARK = `emceepee-bench-fanin-${process.pid}`;
const leaks: Array<{ label: string; pids: number[] }> = [];

/** Live processes with the argument `mark`, or one that starts with `mark:`. */
function markedPids(mark: string): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (
        fs
          .readFileSync(`/proc/${entry}/cmdline`, "utf8")
          .split("\0")
          .some((a) => a === mark || a.startsWith(`${mark}:`)) &&
        alive(Number(entry))
      )
        out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** After a gateway stopped: its upstream processes must end (within the kill grace); any still there after 5 s is a leak. */
async function checkLeftovers(label: string, mark: string): Promise<void> {
  const end = Date.now() + 5_000;
  let pids = markedPids(mark);
  while (pids.length && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 250));
    pids = markedPids(mark);
  }
  if (!pids.length) return;
  log(`${label}: ${pids.length} upstream process(es) outlived the gateway (${pids.join(", ")}); killing them`);
  leaks.push({ label, pids });
  for (const pid of pids) process.kill(pid, "SIGKILL");
}

function isEverything(pid: number): boolean {
  try {
    return alive(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("server-everything");
  } catch {
    return false;
  }
}

async function startTarget(variant: Variant, phase: "fan-in" | "throughput"): Promise<Target> {
  if (variant === "direct") {
    const server = await startEverythingHttp(60_000);
    stops.push(() => server.close());
    const pid = server.child.pid!;
    return {
      variant,
      url: server.url,
      rss: async () => {
        await new Promise((r) => setTimeout(r, 500));
        return [pid, ...descendantPids(pid)].reduce((sum, p) => sum + rssBytes(p), 0);
      },
      upstreams: () => (alive(pid) ? [pid] : []),
      cpu: () => ({ gateway: 0, upstream: cpuMs(pid) }),
      idleProcesses: 1,
      stop: () => server.close(),
    };
  }
  const warmPool = variant === "pool1" ? 1 : 0;
  const label = `${phase} ${variant}`;
  const mark = `${RUN_MARK}:${phase}:${variant}`;
  const config = {
    mcpServers: {
      everything: { command: process.execPath, args: [everythingServerEntry(), "stdio", mark], sharing: variant === "shared" ? "shared" : "session" },
    },
    gateway: {
      upstream: {
        warmPool,
        // Every session of the fan-in spawns at once in session mode: on 2 cores that takes longer than the 30 s default.
        connectTimeoutMs: 180_000,
        maxChildProcesses: Math.max(256, opts.sessions + opts.concurrency + 8),
      },
      sessions: { maxSessions: Math.max(1000, opts.sessions + opts.concurrency * 3 + 20) },
    },
  };
  const gateway = await startGatewayProcess(config, `fanin-${variant}`, "error");
  const stop = async () => {
    await gateway.stop();
    await checkLeftovers(label, mark);
  };
  stops.push(stop);
  const upstreams = () => descendantPids(gateway.pid).filter(isEverything);
  return {
    variant,
    url: `${gateway.origin}/servers/everything/mcp`,
    rss: async () => {
      const own = await gateway.settledRss(500);
      return own + descendantPids(gateway.pid).reduce((sum, p) => sum + rssBytes(p), 0);
    },
    upstreams,
    cpu: () => ({ gateway: gateway.cpuMs(), upstream: totalCpuMs(upstreams()) }),
    idleProcesses: variant === "shared" ? 1 : warmPool,
    stop,
  };
}

/** Waits until the target's upstream process count is `idleProcesses` and unchanged for 1.5 s (10 s at most); returns it. */
async function settle(target: Target): Promise<number> {
  if (target.variant === "direct") return target.upstreams().length; // one server process, nothing to wait for
  const end = Date.now() + 10_000;
  let count = target.upstreams().length;
  let since = Date.now();
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 250));
    const now = target.upstreams().length;
    if (now !== count) [count, since] = [now, Date.now()];
    else if (count === target.idleProcesses && Date.now() - since >= 1500) break;
  }
  return count;
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

interface Session {
  client: Client;
  /** From creating the client to the first echo's reply (initialize + echo). */
  firstCallMs: number;
  close(): Promise<void>;
}

async function echo(client: Client, message: string): Promise<void> {
  const result = (await client.callTool({ name: "echo", arguments: { message } }, undefined, CALL_OPTIONS)) as CallToolResult;
  const first = result.content[0];
  if (result.isError || first?.type !== "text" || first.text !== `Echo: ${message}`) {
    throw new Error(`echo failed: ${JSON.stringify(result.content).slice(0, 300)}`);
  }
}

async function openSession(url: string, name: string): Promise<Session> {
  const t0 = performance.now();
  const client = new Client({ name, version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  try {
    await client.connect(transport, CALL_OPTIONS);
    await echo(client, `hello from ${name}`);
  } catch (err) {
    await client.close().catch(() => undefined);
    throw err;
  }
  const firstCallMs = performance.now() - t0;
  return {
    client,
    firstCallMs,
    async close() {
      await transport.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    },
  };
}

// ---------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------

interface FanIn {
  variant: Variant;
  idleFirstCallMs: number[];
  idleProcesses: number;
  before: { rss: number; processes: number };
  after: { rss: number; processes: number };
  opened: number;
  failures: string[];
  openAllMs: number;
  /** CPU ms used while the sessions opened: the gateway (0 for direct), the upstream processes, this process (the clients). */
  cpu: { gateway: number; upstream: number; clients: number };
  firstCallMs: number[];
  nextFirstCallMs: number;
}

async function fanIn(variant: Variant): Promise<FanIn> {
  const target = await startTarget(variant, "fan-in");
  const n = opts.sessions;
  try {
    const warm = await openSession(target.url, "bench-warm");
    await warm.close();
    let idleProcesses = await settle(target);
    const idleFirstCallMs: number[] = [];
    for (let i = 0; i < opts.idleSamples; i++) {
      const s = await openSession(target.url, `bench-idle-${i}`);
      idleFirstCallMs.push(s.firstCallMs);
      await s.close();
      idleProcesses = await settle(target);
    }
    log(`${variant}: new session on the idle target ${idleFirstCallMs.map((ms) => fmt(ms, 0)).join(", ")} ms (${idleProcesses} upstream processes idle)`);
    const before = { rss: await target.rss(), processes: target.upstreams().length };
    log(`${variant}: opening ${n} sessions at once`);
    const cpu0 = { ...target.cpu(), clients: process.cpuUsage() };
    const t0 = performance.now();
    const settled = await Promise.allSettled(Array.from({ length: n }, (_, i) => openSession(target.url, `bench-fanin-${i}`)));
    const openAllMs = performance.now() - t0;
    const cpu1 = target.cpu();
    const clients = process.cpuUsage(cpu0.clients);
    const cpu = { gateway: cpu1.gateway - cpu0.gateway, upstream: cpu1.upstream - cpu0.upstream, clients: (clients.user + clients.system) / 1000 };
    const sessions = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const failures = settled.flatMap((r) => (r.status === "rejected" ? [r.reason instanceof Error ? r.reason.message : String(r.reason)] : []));
    try {
      const after = { rss: await target.rss(), processes: target.upstreams().length };
      log(`${variant}: ${sessions.length}/${n} open in ${fmt(openAllMs, 0)} ms; ${before.processes} → ${after.processes} upstream processes`);
      const next = await openSession(target.url, "bench-fanin-next");
      sessions.push(next);
      return {
        variant,
        idleFirstCallMs,
        idleProcesses,
        before,
        after,
        opened: n - failures.length,
        failures,
        openAllMs,
        cpu,
        firstCallMs: sessions.slice(0, -1).map((s) => s.firstCallMs),
        nextFirstCallMs: next.firstCallMs,
      };
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
    }
  } finally {
    await target.stop();
  }
}

type TpMode = "direct" | "shared" | "session";
const TP_MODES: readonly TpMode[] = ["direct", "shared", "session"];
interface Throughput {
  calls: number;
  ms: number;
  gatewayCpuMs: number;
  upstreamCpuMs: number;
  upstreamProcesses: number;
  /** calls/s of each round: the report uses their median, as single rounds swing with the shared machine's load. */
  rates: number[];
}

async function throughputPhase(): Promise<Record<TpMode, Throughput>> {
  const n = opts.concurrency;
  const targets: Record<TpMode, Target> = {
    direct: await startTarget("direct", "throughput"),
    shared: await startTarget("shared", "throughput"),
    session: await startTarget("pool1", "throughput"),
  };
  const pools: Record<TpMode, Session[]> = { direct: [], shared: [], session: [] };
  const out = {} as Record<TpMode, Throughput>;
  try {
    for (const mode of TP_MODES) {
      log(`throughput: opening ${n} sessions (${mode})`);
      for (let i = 0; i < n; i += 4) {
        const batch = Array.from({ length: Math.min(4, n - i) }, (_, k) => openSession(targets[mode].url, `bench-tp-${mode}-${i + k}`));
        pools[mode].push(...(await Promise.all(batch)));
      }
      out[mode] = { calls: 0, ms: 0, gatewayCpuMs: 0, upstreamCpuMs: 0, upstreamProcesses: targets[mode].upstreams().length, rates: [] };
    }
    // A warm-up round, not measured: every session's code paths (client, gateway, upstream) past their first calls.
    for (const mode of TP_MODES)
      await Promise.all(
        pools[mode].map(async (s, j) => {
          for (let i = 0; i < 10; i++) await echo(s.client, `warm ${j} ${i}`);
        }),
      );
    for (let round = 0; round < opts.rounds; round++) {
      for (let k = 0; k < TP_MODES.length; k++) {
        const mode = TP_MODES[(round + k) % TP_MODES.length]!;
        const cpu0 = targets[mode].cpu();
        const t0 = performance.now();
        await Promise.all(
          pools[mode].map(async (s, j) => {
            for (let i = 0; i < opts.callsPerSession; i++) await echo(s.client, `tp ${round} ${j} ${i}`);
          }),
        );
        const ms = performance.now() - t0;
        const cpu1 = targets[mode].cpu();
        const r = out[mode];
        r.calls += n * opts.callsPerSession;
        r.ms += ms;
        r.gatewayCpuMs += cpu1.gateway - cpu0.gateway;
        r.upstreamCpuMs += cpu1.upstream - cpu0.upstream;
        r.rates.push((n * opts.callsPerSession * 1000) / ms);
        log(`throughput round ${round + 1}/${opts.rounds} ${mode}: ${fmt((n * opts.callsPerSession * 1000) / ms, 0)} calls/s`);
      }
    }
    return out;
  } finally {
    await Promise.all(TP_MODES.flatMap((m) => pools[m].map((s) => s.close())));
    for (const mode of TP_MODES) await targets[mode].stop();
  }
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

/** Binary units, as the issue states its targets (MiB, KiB). */
function size(bytes: number): string {
  return Math.abs(bytes) >= 1048576 ? `${fmt(bytes / 1048576, 1)} MiB` : `${fmt(bytes / 1024, 0)} KiB`;
}
const ratioTo = (value: number, reference: number | undefined): string =>
  reference && Number.isFinite(reference) && Number.isFinite(value) ? ` (×${fmt(value / reference, 2)})` : "";
const median = (xs: number[]): number => percentile(xs, 50);

function report(fans: FanIn[], tp: Record<TpMode, Throughput> | undefined): string {
  const n = opts.sessions;
  const direct = fans.find((f) => f.variant === "direct");
  const perSession = (f: FanIn) => (f.after.rss - f.before.rss) / Math.max(1, f.opened);
  const row = (metric: string, cell: (f: FanIn) => string) => [metric, ...fans.map(cell)];
  const lines: string[] = [];
  if (fans.length)
    lines.push(
      `## Fan-in: ${n} sessions opened at once on one server (initialize + one \`echo\` each)`,
      "",
      table(
        ["metric", ...fans.map((f) => (f.variant === "direct" ? LABEL.direct : `gateway, ${LABEL[f.variant]}`))],
        [
          row("server-everything processes before → after the fan-in", (f) => `${f.before.processes} → ${f.after.processes}`),
          row("sessions opened", (f) => `${f.opened}/${n}${f.failures.length ? ` (failed: ${f.failures[0]!.slice(0, 120)})` : ""}`),
          row("open-all time, s", (f) => `${fmt(f.openAllMs / 1000, 2)}${f.variant === "direct" ? "" : ratioTo(f.openAllMs, direct?.openAllMs)}`),
          row(
            "CPU while opening them, ms per session: gateway / upstreams / clients",
            (f) => `${f.variant === "direct" ? "—" : fmt(f.cpu.gateway / n, 1)} / ${fmt(f.cpu.upstream / n, 1)} / ${fmt(f.cpu.clients / n, 1)}`,
          ),
          row("time to first call within the fan-in, p50 / max, ms", (f) => `${fmt(median(f.firstCallMs), 0)} / ${fmt(Math.max(...f.firstCallMs), 0)}`),
          row("server-side RSS before → after, MiB", (f) => `${fmt(f.before.rss / 1048576, 1)} → ${fmt(f.after.rss / 1048576, 1)}`),
          row(`**RSS per session** ((after − before) / ${n})`, (f) => `**${size(perSession(f))}**`),
          row(`RSS after / ${n} (the whole server side per session)`, (f) => size(f.after.rss / Math.max(1, f.opened))),
          row(`time to first call of session ${n + 1}, ms`, (f) => fmt(f.nextFirstCallMs, 0)),
          row(`time to first call, new session on the idle target, ms (median of ${opts.idleSamples})`, (f) => fmt(median(f.idleFirstCallMs), 0)),
          row("upstream processes while idle (shared process, warm pool)", (f) => String(f.idleProcesses)),
        ],
      ),
      "",
      "Server-side RSS: direct, the server-everything process; gateway, `emceepee serve` after a full GC plus every process below it (from /proc). Ratios are against direct.",
      "",
    );
  if (tp) {
    const rate = (m: TpMode) => median(tp[m].rates);
    const per1k = (m: TpMode, v: number) => fmt((v * 1000) / tp[m].calls, 0);
    lines.push(
      `## Throughput: ${opts.concurrency} sessions, each ${opts.callsPerSession} sequential \`echo\` calls per round, ${opts.rounds} rounds interleaved`,
      "",
      table(
        ["metric", "direct (Streamable HTTP)", 'gateway, `"sharing": "shared"`', 'gateway, `"sharing": "session"` (`warmPool: 1`)'],
        [
          ["server-everything processes", ...TP_MODES.map((m) => String(tp[m].upstreamProcesses))],
          [
            `calls/s, median of ${opts.rounds} rounds (min–max)`,
            ...TP_MODES.map(
              (m) =>
                `${fmt(rate(m), 0)}${m === "direct" ? "" : ratioTo(rate(m), rate("direct"))} (${fmt(Math.min(...tp[m].rates), 0)}–${fmt(Math.max(...tp[m].rates), 0)})`,
            ),
          ],
          ["against session mode", "", `×${fmt(rate("shared") / rate("session"), 2)}`, "×1.00"],
          ["gateway CPU per 1k calls, ms", "—", per1k("shared", tp.shared.gatewayCpuMs), per1k("session", tp.session.gatewayCpuMs)],
          ["upstream CPU per 1k calls, ms", ...TP_MODES.map((m) => per1k(m, tp[m].upstreamCpuMs))],
        ],
      ),
      "",
    );
  }
  const targets: string[] = [];
  const shared = fans.find((f) => f.variant === "shared");
  if (shared) {
    const rss = perSession(shared);
    targets.push(`- shared: RSS per session ${size(rss)} — target ≤ 1 MiB: ${rss <= 1048576 ? "met" : "NOT met"}`);
    if (direct) {
      const r = shared.openAllMs / direct.openAllMs;
      targets.push(`- shared: open-all ${fmt(r, 2)}× direct — target ≤ 2×: ${r <= 2 ? "met" : "NOT met"}`);
    }
  }
  if (tp) {
    const r = median(tp.shared.rates) / median(tp.session.rates);
    targets.push(`- throughput, shared / session: ×${fmt(r, 2)} — target ≥ 1: ${r >= 1 ? "met" : "NOT met"}`);
  }
  const pool1 = fans.find((f) => f.variant === "pool1");
  if (pool1) {
    targets.push(
      pool1.idleProcesses >= 1
        ? `- warm pool: ${pool1.idleProcesses} process(es) ready while idle; a new session's first call took ${fmt(median(pool1.idleFirstCallMs), 0)} ms`
        : "- warm pool: `warmPool: 1` started no process ahead (0 upstream processes while idle): the setting had no effect in this build",
    );
  }
  targets.push(
    leaks.length
      ? `- cleanup: upstream processes outlived their gateway's shutdown (killed by the bench): ${leaks.map((l) => `${l.label}: ${l.pids.length}`).join("; ")}`
      : "- cleanup: every upstream process ended with its gateway",
  );
  lines.push("## Targets (issue 13)", "", ...targets, "");
  const cpus = os.cpus();
  lines.push(
    `- machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? "unknown CPU"}, ${fmt(os.totalmem() / 1073741824, 1)} GiB RAM, ${os.type()} ${os.release()}; node ${process.version}; run ${new Date().toISOString()}, total ${fmt((performance.now() - started) / 1000, 0)} s`,
    `- options: ${Object.entries(opts)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(", ")}`,
    "",
  );
  return lines.join("\n");
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

async function stopAll(): Promise<void> {
  while (stops.length) await stops.pop()!().catch((err: unknown) => log(`cleanup: ${String(err)}`));
}

/** Anything this run started that is somehow still there is ended by pid. */
function reapLeftovers(): void {
  const ours = (pid: number) => {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
      return cmd.includes("server-everything") || cmd.includes("src/cli/main.ts");
    } catch {
      return false;
    }
  };
  for (const pid of markedPids(RUN_MARK)) {
    log(`killing leftover upstream process ${pid}`);
    process.kill(pid, "SIGKILL");
  }
  for (const pid of childPids(process.pid).filter(ours)) {
    for (const p of [...descendantPids(pid), pid]) {
      if (!alive(p)) continue;
      log(`killing leftover process ${p}`);
      process.kill(p, "SIGKILL");
    }
  }
}

async function main(): Promise<void> {
  log(`options ${JSON.stringify(opts)}`);
  const fans: FanIn[] = [];
  for (const variant of VARIANTS) if (opts.only.includes(variant)) fans.push(await fanIn(variant));
  const tp = opts.only.includes("throughput") ? await throughputPhase() : undefined;
  await stopAll();
  process.stdout.write(report(fans, tp));
}

let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${signal}: cleaning up`);
    void stopAll().finally(() => {
      reapLeftovers();
      process.exit(130);
    });
  });
}

main()
  .catch(async (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    await stopAll();
    process.exitCode = 1;
  })
  .finally(() => {
    reapLeftovers();
    process.exit(process.exitCode ?? 0);
  });
