/**
 * emceepee benchmark (`npm run bench`): server-everything called directly by
 * an SDK client vs. the same calls through emceepee — the meta face
 * (`execute_tool` on /mcp) and the transparent face (/servers/everything/mcp) —
 * measured in one run, interleaved. The gateway runs as a child process
 * (`emceepee serve`) so its CPU time and RSS are read from /proc apart from
 * this process (the clients) and from the upstream processes.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`):
 *   --warmup=50            echo calls per mode before measuring latency
 *   --latency-calls=500    measured echo calls per mode (interleaved direct/meta/transparent)
 *   --concurrency=16       sessions (and concurrent callers) per mode for throughput
 *   --calls-per-session=60 echo calls per session per throughput round
 *   --rounds=3             throughput rounds (each runs every mode once, order rotating)
 *   --idle-sessions=100    sessions opened for the RSS-per-idle-session measurement
 *   --tasks=1000           promoted working tasks for the memory-per-task measurement
 *   --wake-samples=20      await_activity wake-ups measured
 *   --skip-stdio-idle=1    skip the idle-session run with one stdio upstream per session (it spawns --idle-sessions processes)
 *   --only=a,b             run only these phases: latency, throughput, wake, tasks, idle
 *
 * Output: a markdown report on stdout (progress on stderr).
 */
import { performance } from "node:perf_hooks";
import fs from "node:fs";
import os from "node:os";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { alive, childPids, totalCpuMs } from "./lib/proc.js";
import { fmt, kb, mb, percentile, ratio, table } from "./lib/stats.js";
import { option } from "./lib/options.js";

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

const opts = {
  warmup: option("warmup", 50, 0),
  latencyCalls: option("latency-calls", 500),
  concurrency: Math.max(1, option("concurrency", 16)),
  callsPerSession: Math.max(1, option("calls-per-session", 60)),
  rounds: Math.max(1, option("rounds", 3)),
  idleSessions: Math.max(1, option("idle-sessions", 100)),
  tasks: Math.max(1, option("tasks", 1000)),
  wakeSamples: Math.max(1, option("wake-samples", 20)),
  skipStdioIdle: option("skip-stdio-idle", 0, 0) === 1,
  only: (process.argv.find((a) => a.startsWith("--only="))?.slice(7) ?? process.env.BENCH_ONLY ?? "latency,throughput,wake,tasks,idle").split(","),
};
const PHASES = ["latency", "throughput", "wake", "tasks", "idle"];
for (const p of opts.only) if (!PHASES.includes(p)) throw new Error(`--only: unknown phase '${p}' (have ${PHASES.join(", ")})`);
const runs = (phase: string): boolean => opts.only.includes(phase);

const log = (msg: string): void => {
  process.stderr.write(`[bench ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
};
const started = performance.now();

// ---------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------

const EVERYTHING = { command: process.execPath, args: [everythingServerEntry(), "stdio"] };
/** What the gateway's own upstream client declares, so direct and gateway upstream sessions are alike. */
const UPSTREAM_CAPABILITIES = { elicitation: { form: {}, url: {} }, sampling: {} };
const CALL_OPTIONS = { timeout: 300_000 };

type Mode = "direct" | "meta" | "transparent";
const MODES: readonly Mode[] = ["direct", "meta", "transparent"];

interface Conn {
  mode: Mode;
  client: Client;
  /** The upstream server-everything pid for direct connections. */
  upstreamPid?: number;
  close(): Promise<void>;
}

async function connectDirect(): Promise<Conn> {
  const client = new Client({ name: "bench-direct", version: "1.0.0" }, { capabilities: UPSTREAM_CAPABILITIES });
  const transport = new StdioClientTransport({ ...EVERYTHING, stderr: "ignore" });
  await client.connect(transport);
  const pid = transport.pid ?? undefined;
  return {
    mode: "direct",
    client,
    ...(pid !== undefined ? { upstreamPid: pid } : {}),
    close: () => client.close(),
  };
}

async function connectHttp(mode: "meta" | "transparent", gateway: GatewayProcess, name = `bench-${mode}`): Promise<Conn> {
  const client = new Client({ name, version: "1.0.0" });
  const url = mode === "meta" ? gateway.url : `${gateway.origin}/servers/everything/mcp`;
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return {
    mode,
    client,
    async close() {
      await transport.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    },
  };
}

async function metaCall(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, CALL_OPTIONS)) as CallToolResult;
}

/** The JSON text blocks of a meta-tool result, parsed. */
function jsonBlocks(result: CallToolResult): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const c of result.content) {
    if (c.type !== "text") continue;
    try {
      const v: unknown = JSON.parse(c.text);
      if (v && typeof v === "object" && !Array.isArray(v)) out.push(v as Record<string, unknown>);
    } catch {
      // a summary line
    }
  }
  return out;
}

function firstText(result: CallToolResult): string {
  const c = result.content[0];
  return c && c.type === "text" ? c.text : "";
}

/** Uses `everything` in the meta session (upstreams start on first use) until it reports it connected. */
async function waitConnected(client: Client, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    await metaCall(client, "list_tools", { server: "everything", limit: 1 });
    const servers = jsonBlocks(await metaCall(client, "list_servers")).find((b) => "servers" in b)?.servers as
      Array<{ name: string; status: string }> | undefined;
    if (servers?.find((s) => s.name === "everything")?.status === "connected") return;
    if (Date.now() > end) throw new Error("everything did not connect");
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One echo call the way each mode makes it; throws unless the echo comes back. */
async function echo(conn: Conn, message: string): Promise<void> {
  let result: CallToolResult;
  if (conn.mode === "meta") {
    result = await metaCall(conn.client, "execute_tool", { server: "everything", tool: "echo", args: { message } });
  } else {
    result = (await conn.client.callTool({ name: "echo", arguments: { message } }, undefined, CALL_OPTIONS)) as CallToolResult;
  }
  if (result.isError || firstText(result) !== `Echo: ${message}`) throw new Error(`${conn.mode} echo failed: ${JSON.stringify(result.content).slice(0, 300)}`);
}

async function mapLimit<T>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i]!, i);
      }
    }),
  );
}

// ---------------------------------------------------------------------------
// Gateway configs
// ---------------------------------------------------------------------------

function gatewayConfig(withUpstream: boolean) {
  return {
    mcpServers: withUpstream ? { everything: EVERYTHING } : {},
    gateway: {
      // Raised so the measurements are not cut short by the defaults (100 tasks per session, 1,000 sessions).
      tasks: { maxTasksPerSession: opts.tasks + 100, defaultTtlMs: 1_800_000, maxTtlMs: 1_800_000 },
      sessions: { maxSessions: Math.max(1000, opts.idleSessions + opts.concurrency * 3 + 50) },
      pendingRequests: { maxPerSession: 1000 },
      events: { maxEvents: Math.max(1000, opts.tasks * 3) },
    },
  };
}

// ---------------------------------------------------------------------------
// Measurements
// ---------------------------------------------------------------------------

interface Results {
  latency: Record<Mode, number[]>;
  throughput: Record<Mode, { calls: number; ms: number; gatewayCpuMs: number; upstreamCpuMs: number; clientCpuMs: number }>;
  idle: Array<{ label: string; sessions: number; baseline: number; loaded: number; after: number; upstreams: number }>;
  tasks?: { count: number; baseline: number; loaded: number; cycled: number; after: number; issueMs: number; replyBytes: number; lastReplyBytes: number };
  wake: number[];
}

const results: Results = {
  latency: { direct: [], meta: [], transparent: [] },
  throughput: {
    direct: { calls: 0, ms: 0, gatewayCpuMs: 0, upstreamCpuMs: 0, clientCpuMs: 0 },
    meta: { calls: 0, ms: 0, gatewayCpuMs: 0, upstreamCpuMs: 0, clientCpuMs: 0 },
    transparent: { calls: 0, ms: 0, gatewayCpuMs: 0, upstreamCpuMs: 0, clientCpuMs: 0 },
  },
  idle: [],
  wake: [],
};

/** Everything to close at the end, newest first. */
const cleanups: Array<() => Promise<void>> = [];
async function cleanupAll(): Promise<void> {
  while (cleanups.length) await cleanups.pop()!().catch((err: unknown) => log(`cleanup: ${String(err)}`));
}

async function latencyPhase(conns: Record<Mode, Conn>): Promise<void> {
  log(`latency: ${opts.warmup} warm-up + ${opts.latencyCalls} measured echo calls per mode, interleaved`);
  for (let i = 0; i < opts.warmup; i++) for (const m of MODES) await echo(conns[m], `warm ${i}`);
  for (let i = 0; i < opts.latencyCalls; i++) {
    // Rotate the order so no mode always runs right after another.
    for (let k = 0; k < MODES.length; k++) {
      const mode = MODES[(i + k) % MODES.length]!;
      const t0 = performance.now();
      await echo(conns[mode], `latency ${i}`);
      results.latency[mode].push(performance.now() - t0);
    }
  }
}

async function throughputPhase(gateway: GatewayProcess): Promise<void> {
  const n = opts.concurrency;
  log(`throughput: opening ${n} sessions per mode (each has its own server-everything process)`);
  const pools: Record<Mode, Conn[]> = { direct: [], meta: [], transparent: [] };
  const openAll = async (mode: Mode) => {
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      4,
      async () => {
        const conn = mode === "direct" ? await connectDirect() : await connectHttp(mode, gateway);
        if (mode === "meta") await waitConnected(conn.client);
        pools[mode].push(conn);
      },
    );
  };
  try {
    for (const mode of MODES) await openAll(mode);
    // One warm-up call per session.
    for (const mode of MODES) await Promise.all(pools[mode].map((c) => echo(c, "warm")));
    const directUpstreams = pools.direct.flatMap((c) => (c.upstreamPid !== undefined ? [c.upstreamPid] : []));
    for (let round = 0; round < opts.rounds; round++) {
      for (let k = 0; k < MODES.length; k++) {
        const mode = MODES[(round + k) % MODES.length]!;
        const upstreams = mode === "direct" ? directUpstreams : gateway.upstreamPids();
        const cpu0 = { gateway: gateway.cpuMs(), upstream: totalCpuMs(upstreams), client: process.cpuUsage() };
        const t0 = performance.now();
        await Promise.all(
          pools[mode].map(async (conn, s) => {
            for (let i = 0; i < opts.callsPerSession; i++) await echo(conn, `tp ${round} ${s} ${i}`);
          }),
        );
        const ms = performance.now() - t0;
        const client = process.cpuUsage(cpu0.client);
        const r = results.throughput[mode];
        r.calls += n * opts.callsPerSession;
        r.ms += ms;
        r.gatewayCpuMs += mode === "direct" ? 0 : gateway.cpuMs() - cpu0.gateway;
        r.upstreamCpuMs += totalCpuMs(upstreams) - cpu0.upstream;
        r.clientCpuMs += (client.user + client.system) / 1000;
        log(`throughput round ${round + 1}/${opts.rounds} ${mode}: ${fmt((n * opts.callsPerSession * 1000) / ms, 0)} calls/s`);
      }
    }
  } finally {
    log("throughput: closing sessions");
    await Promise.all(MODES.flatMap((m) => pools[m].map((c) => c.close().catch(() => undefined))));
  }
}

async function idleSessionsPhase(withUpstream: boolean): Promise<void> {
  const label = withUpstream ? "meta face, 1 stdio upstream (server-everything) per session" : "meta face, no upstreams configured";
  log(`idle sessions: ${opts.idleSessions} × ${label}`);
  const gateway = await startGatewayProcess(gatewayConfig(withUpstream), withUpstream ? "idle" : "idle-none");
  cleanups.push(() => gateway.stop());
  const conns: Conn[] = [];
  try {
    // Warm the code paths once so the baseline is not first-use cost.
    const warm = await connectHttp("meta", gateway, "bench-warm");
    if (withUpstream) await waitConnected(warm.client);
    await metaCall(warm.client, "list_servers");
    await warm.close();
    const baseline = await gateway.settledRss(1000);
    await mapLimit(
      Array.from({ length: opts.idleSessions }, (_, i) => i),
      withUpstream ? 4 : 8,
      async (i) => {
        const conn = await connectHttp("meta", gateway, `bench-idle-${i}`);
        conns.push(conn);
        if (withUpstream) await waitConnected(conn.client);
        else await metaCall(conn.client, "list_servers");
      },
    );
    const upstreams = gateway.upstreamPids().length;
    const loaded = await gateway.settledRss(1000);
    log(`idle sessions: ${conns.length} open, ${upstreams} upstream processes, gateway RSS ${mb(baseline)} → ${mb(loaded)}`);
    await Promise.all(conns.splice(0).map((c) => c.close()));
    const after = await gateway.settledRss(1000);
    results.idle.push({ label, sessions: opts.idleSessions, baseline, loaded, after, upstreams });
  } finally {
    await Promise.all(conns.map((c) => c.close()));
    await gateway.stop();
  }
}

let replyBytes = 0;
let lastReplyBytes = 0;

async function tasksPhase(): Promise<void> {
  log(`tasks: promoting ${opts.tasks} calls of trigger-long-running-operation to working tasks`);
  const gateway = await startGatewayProcess(gatewayConfig(true), "tasks");
  cleanups.push(() => gateway.stop());
  const conn = await connectHttp("meta", gateway, "bench-tasks");
  try {
    await waitConnected(conn.client);
    const promote = async () => {
      const r = await metaCall(conn.client, "execute_tool", {
        server: "everything",
        tool: "trigger-long-running-operation",
        args: { duration: 1200, steps: 1 },
        timeout_ms: 0,
        task_ttl_ms: 1_800_000,
      });
      const bytes = JSON.stringify(r).length;
      replyBytes += bytes;
      lastReplyBytes = bytes;
      const task = jsonBlocks(r).find((b) => "proxy_task" in b)?.proxy_task as { task_id: string; status: string } | undefined;
      if (!task || task.status !== "working") throw new Error(`not promoted: ${JSON.stringify(r.content).slice(0, 300)}`);
      return task.task_id;
    };
    // Warm-up: a few tasks, cancelled again.
    for (let i = 0; i < 10; i++) await metaCall(conn.client, "cancel_task", { task_id: await promote() });
    await metaCall(conn.client, "list_tasks", { include_completed: true });
    const baseline = await gateway.settledRss(1000);
    const t0 = performance.now();
    replyBytes = 0;
    await mapLimit(
      Array.from({ length: opts.tasks }, (_, i) => i),
      16,
      async () => void (await promote()),
    );
    const issueMs = performance.now() - t0;
    const promotedBytes = replyBytes;
    const lastBytes = lastReplyBytes;
    // Drain the task_created events so the event buffer holds what it would in steady state.
    await metaCall(conn.client, "list_servers");
    const working =
      (jsonBlocks(await metaCall(conn.client, "list_tasks", { status: "working" })).find((b) => "tasks" in b)?.tasks as unknown[] | undefined)?.length ?? 0;
    if (working < opts.tasks) throw new Error(`only ${working} of ${opts.tasks} tasks are working`);
    const loaded = await gateway.settledRss(1000);
    // The session's SSE replay buffer (src/http/sse-replay-store.ts) keeps its last 1,000 messages, here the promotion
    // replies, which list every working task of the server. Cycle it with small replies to see the tasks alone.
    log(`tasks: ${working} working, gateway RSS ${mb(baseline)} → ${mb(loaded)}; cycling the replay buffer with 1,000 pings`);
    for (let i = 0; i < 1000; i++) await conn.client.ping(CALL_OPTIONS);
    const cycled = await gateway.settledRss(1000);
    log(`tasks: after cycling ${mb(cycled)}; ending the session (cancels them all)`);
    await conn.close();
    const after = await gateway.settledRss(1500);
    results.tasks = { count: opts.tasks, baseline, loaded, cycled, after, issueMs, replyBytes: promotedBytes, lastReplyBytes: lastBytes };
  } finally {
    await conn.close();
    await gateway.stop();
  }
}

async function wakePhase(client: Client): Promise<void> {
  log(`await_activity: ${opts.wakeSamples} wake-ups on a task completing`);
  await metaCall(client, "await_activity", { timeout_ms: 0 }); // drain
  for (let i = 0; i < opts.wakeSamples; i++) {
    const r = await metaCall(client, "execute_tool", {
      server: "everything",
      tool: "trigger-long-running-operation",
      args: { duration: 0.2, steps: 1 },
      timeout_ms: 0,
    });
    const taskId = (jsonBlocks(r).find((b) => "proxy_task" in b)?.proxy_task as { task_id: string } | undefined)?.task_id;
    if (!taskId) throw new Error(`not promoted: ${JSON.stringify(r.content).slice(0, 300)}`);
    for (let attempt = 0; attempt < 20; attempt++) {
      const woke = await metaCall(client, "await_activity", { timeout_ms: 10_000 });
      const received = Date.now();
      const activity = jsonBlocks(woke)[0] as
        { events?: Array<{ events: Array<{ type: string; created_at: string; data: { taskId?: string } }> }> } | undefined;
      const event = activity?.events?.flatMap((g) => g.events).find((e) => e.type === "task_completed" && e.data.taskId === taskId);
      if (event) {
        results.wake.push(received - Date.parse(event.created_at));
        break;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

function report(): string {
  const lat = (mode: Mode, p: number) => percentile(results.latency[mode], p);
  const tp = (mode: Mode) => {
    const r = results.throughput[mode];
    return (r.calls * 1000) / r.ms;
  };
  const per1k = (mode: Mode, key: "gatewayCpuMs" | "upstreamCpuMs" | "clientCpuMs") => {
    const r = results.throughput[mode];
    return (r[key] * 1000) / r.calls;
  };
  const cell = (mode: Mode, value: number, reference: number | undefined, digits = 2) =>
    mode === "direct" ? fmt(value, digits) : `${fmt(value, digits)}${ratio(value, reference)}`;
  const row = (metric: string, value: (mode: Mode) => number, digits = 2, directCounterpart = true) => [
    metric,
    ...MODES.map((m) => (m === "direct" && !directCounterpart ? "—" : cell(m, value(m), directCounterpart ? value("direct") : undefined, digits))),
  ];
  const n = opts.concurrency;
  const main = table(
    ["metric", "direct (SDK client → server-everything)", "meta face (`execute_tool` on /mcp)", "transparent face (/servers/everything/mcp)"],
    [
      row(`echo latency p50, ms (${opts.latencyCalls} calls each, interleaved)`, (m) => lat(m, 50), 3),
      row("echo latency p99, ms", (m) => lat(m, 99), 3),
      row("echo latency mean, ms", (m) => results.latency[m].reduce((a, b) => a + b, 0) / Math.max(1, results.latency[m].length), 3),
      row(`throughput, ${n} concurrent sessions, calls/s`, tp, 0),
      row("gateway CPU per 1k calls, ms", (m) => per1k(m, "gatewayCpuMs"), 0, false),
      row("upstream (server-everything) CPU per 1k calls, ms", (m) => per1k(m, "upstreamCpuMs"), 0),
      row("client (this process) CPU per 1k calls, ms", (m) => per1k(m, "clientCpuMs"), 0),
    ],
  );
  const memRows: string[][] = [];
  for (const i of results.idle) {
    memRows.push([
      `gateway RSS per idle session (${i.label})`,
      `${kb((i.loaded - i.baseline) / i.sessions)}`,
      `${i.sessions} sessions: ${mb(i.baseline)} → ${mb(i.loaded)}; after closing them ${mb(i.after)}${i.upstreams ? `; ${i.upstreams} upstream processes (their own RSS not included)` : ""}`,
    ]);
  }
  if (results.tasks) {
    const t = results.tasks;
    memRows.push([
      "gateway RSS per working task (promoted `execute_tool`, upstream call in flight)",
      `${kb((t.cycled - t.baseline) / t.count)}`,
      `${t.count} tasks in 1 session: ${mb(t.baseline)} → ${mb(t.cycled)}, measured after 1,000 pings pushed the promotion replies out of the session's SSE replay buffer; ending the session (cancels them) → ${mb(t.after)}`,
    ]);
    memRows.push([
      "… the same, right after promoting (replay buffer still holding the promotion replies)",
      `${kb((t.loaded - t.baseline) / t.count)}`,
      `${mb(t.loaded)}: the ${t.count} promotion replies totalled ${mb(t.replyBytes)} (the last one ${kb(t.lastReplyBytes)}; each lists at most the 20 newest working tasks), and the session's replay buffer keeps the last 1,000 of them (bounded in bytes too)`,
    ]);
    memRows.push([
      "promotion rate (`execute_tool` with `timeout_ms: 0`, 16 concurrent callers)",
      `${fmt((t.count * 1000) / t.issueMs, 0)} tasks/s`,
      `${t.count} tasks in ${fmt(t.issueMs / 1000, 1)} s`,
    ]);
  }
  if (results.wake.length) {
    memRows.push([
      "`await_activity` wake latency (task_completed event → response received), ms",
      `p50 ${fmt(percentile(results.wake, 50), 0)}, p99 ${fmt(percentile(results.wake, 99), 0)}, mean ${fmt(results.wake.reduce((a, b) => a + b, 0) / results.wake.length, 2)}`,
      `${results.wake.length} samples (a 0.2 s upstream task promoted at once, then \`await_activity\`); from the event's created_at (gateway's Date.now(), 1 ms resolution) to this process receiving the reply`,
    ]);
  }
  const other = table(["metric", "value", "details"], memRows);
  const cpus = os.cpus();
  const machine = [
    `- machine: ${cpus.length} CPUs (\`nproc\`: ${os.availableParallelism?.() ?? cpus.length}), ${cpus[0]?.model ?? "unknown CPU"}, ${mb(os.totalmem())} RAM, ${os.type()} ${os.release()}`,
    `- node ${process.version}; run ${new Date().toISOString()}; total time ${fmt((performance.now() - started) / 1000, 0)} s`,
    `- options: ${Object.entries(opts)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(", ")}`,
  ].join("\n");
  return [
    "## Direct vs. through emceepee (server-everything `echo`)",
    "",
    main,
    "",
    "Ratios are against direct. Gateway CPU is the `emceepee serve` child process only (from /proc/<pid>/stat); upstream CPU sums the server-everything processes serving that mode; client CPU is this benchmark process, which shares the same cores.",
    "",
    "## Gateway memory and wake-up",
    "",
    other,
    "",
    machine,
    "",
  ].join("\n");
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

async function main(): Promise<void> {
  log(`options ${JSON.stringify(opts)}`);
  const gateway = await startGatewayProcess(gatewayConfig(true), "main");
  cleanups.push(() => gateway.stop());
  log(`gateway pid ${gateway.pid} at ${gateway.url}`);
  const direct = await connectDirect();
  cleanups.push(() => direct.close());
  const meta = await connectHttp("meta", gateway);
  cleanups.push(() => meta.close());
  await waitConnected(meta.client);
  const transparent = await connectHttp("transparent", gateway);
  cleanups.push(() => transparent.close());

  if (runs("latency")) await latencyPhase({ direct, meta, transparent });
  if (runs("throughput")) await throughputPhase(gateway);
  if (runs("wake")) await wakePhase(meta.client);
  await cleanupAll();

  if (runs("tasks")) await tasksPhase();
  if (runs("idle")) {
    await idleSessionsPhase(false);
    if (!opts.skipStdioIdle) await idleSessionsPhase(true);
  }
  await cleanupAll();

  process.stdout.write(report());
}

let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${signal}: cleaning up`);
    void cleanupAll().finally(() => process.exit(130));
  });
}

/** Leave nothing behind: any upstream or gateway process this run started that is somehow still there is ended by pid. */
function reapLeftovers(): void {
  for (const pid of childPids(process.pid)) {
    let cmd = "";
    try {
      cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue;
    }
    if ((cmd.includes("server-everything") || cmd.includes("src/cli/main.ts")) && alive(pid)) {
      log(`killing leftover process ${pid}`);
      process.kill(pid, "SIGKILL");
    }
  }
}

main()
  .catch(async (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    await cleanupAll();
    process.exitCode = 1;
  })
  .finally(() => {
    reapLeftovers();
    process.exit(process.exitCode ?? 0);
  });
