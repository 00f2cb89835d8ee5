/**
 * Relay cost (`npm run bench:relay`, issue 27): what one forwarded `tools/call`
 * costs the gateway. server-everything over its own Streamable HTTP transport
 * (direct) against the same calls through `emceepee serve` — transparent face
 * in session mode (one stdio upstream per session), transparent in shared
 * mode (one stdio upstream for all) and the meta face (`execute_tool`) — with
 * `--sessions` SDK clients calling `echo` back to back, modes alternating per
 * round. Gateway CPU is its own process (schedstat), apart from upstreams.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`): sessions (16),
 * calls (60 per session per round), rounds (3), warmup (5 per session),
 * modes (direct,session,shared,meta), profile=<dir> (each gateway runs with
 * `--cpu-prof` into <dir>; summarise with bench/lib/cpuprofile-top.ts),
 * before=<dir> (each gateway mode runs twice: this tree and the tree in <dir>,
 * e.g. `git archive <commit> | tar -x -C <dir>` plus a node_modules symlink
 * and `npm run build` there, so a change's before/after alternate in one run),
 * gateway=<json> (merged over each gateway's `gateway` settings, to measure what one costs, e.g.
 * `--gateway='{"store":{"kind":"memory"}}'` against the default SQLite store),
 * results=<file> (the medians as JSON too, bench/lib/results.ts; bench/compare.bench.ts reads them).
 * emceepee runs as the package ships it (the bundle; bench/lib/gateway-process.ts;
 * `--cli=source` runs src/ through tsx instead, so a `--profile` names source files),
 * as the peers run their published builds.
 * `-json` modes (session-json, shared-json, meta-json) set gateway.http.plainJsonResponses (on the transparent
 * faces through the relay fast path, docs/adr/0037); `session-json-sdk`, `shared-json-sdk` turn the fast path off;
 * `session-sdk`, `shared-sdk` are the default SSE answers with the fast path off (through the SDK's HTTP transport).
 * Peers (modes `supergateway`, `mcp-proxy`, in the default set): installed on
 * demand into node_modules/.cache/emceepee-bench-peers (`npm install --prefix`,
 * never package.json), each fronting server-everything over stdio: supergateway
 * `--stateful` with one process per session (as emceepee's session mode),
 * mcp-proxy's stream endpoint with one process for all sessions, started
 * before it listens (as emceepee's shared mode; docs/adr/0061);
 * their own process's CPU is reported in the gateway column. `floor` (not in
 * the default set): bench/lib/floor-relay.ts, the smallest correct Node relay
 * (node:http, one stdio server-everything, id rewrite, line splitting): the
 * lower bound for a relay's own CPU per call in the same rounds; `floor-session`
 * the same relay with one stdio server-everything per session (`--per-session`,
 * the topology of session mode and supergateway).
 */
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { performance } from "node:perf_hooks";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { descendantPids, threadCpuMs } from "./lib/proc.js";
import { fmt, percentile, table } from "./lib/stats.js";
import { option } from "./lib/options.js";
import { writeResults } from "./lib/results.js";
import { PEER_TOPOLOGY, peerArgs, peerBin, startListening, type Peer } from "./lib/peers.js";

const opts = {
  sessions: option("sessions", 16),
  calls: option("calls", 60),
  rounds: option("rounds", 3),
  warmup: option("warmup", 5, 0),
  modes: (process.argv.find((a) => a.startsWith("--modes="))?.slice(8) ?? process.env.BENCH_MODES ?? "direct,supergateway,mcp-proxy,session,shared,meta").split(
    ",",
  ),
  profile: process.argv.find((a) => a.startsWith("--profile="))?.slice(10) ?? process.env.BENCH_PROFILE,
  before: process.argv.find((a) => a.startsWith("--before="))?.slice(9) ?? process.env.BENCH_BEFORE,
  /** Settings merged over each gateway's `gateway` block (JSON), to measure what one setting costs. */
  /** "source" runs the gateway from src/ through tsx (a profile then names source files); the bundle by default. */
  cli: (process.argv.find((a) => a.startsWith("--cli="))?.slice(6) ?? process.env.BENCH_CLI ?? "bundle") as "source" | "bundle",
  gateway: JSON.parse(process.argv.find((a) => a.startsWith("--gateway="))?.slice(10) ?? process.env.BENCH_GATEWAY ?? "{}") as Record<string, unknown>,
};
type Mode =
  | "direct"
  | "floor"
  | "floor-session"
  | "supergateway"
  | "mcp-proxy"
  | "session"
  | "shared"
  | "meta"
  | "session-json"
  | "shared-json"
  | "meta-json"
  | "session-json-sdk"
  | "shared-json-sdk"
  | "session-sdk"
  | "shared-sdk";
const ALL_MODES: Mode[] = [
  "direct",
  "floor",
  "floor-session",
  "supergateway",
  "mcp-proxy",
  "session",
  "shared",
  "meta",
  "session-json",
  "shared-json",
  "meta-json",
  "session-json-sdk",
  "shared-json-sdk",
  "session-sdk",
  "shared-sdk",
];
const MODES = opts.modes as Mode[];
for (const m of MODES) if (!ALL_MODES.includes(m)) throw new Error(`--modes: unknown '${m}'`);
const FLOOR = fileURLToPath(new URL("./lib/floor-relay.ts", import.meta.url));

const started = performance.now();
const log = (msg: string): void => void process.stderr.write(`[relay ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
const EVERYTHING = { command: process.execPath, args: [everythingServerEntry(), "stdio"] };

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** server-everything on its own Streamable HTTP transport. */
async function startDirect(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, [everythingServerEntry(), "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let err = "";
    const timer = setTimeout(() => reject(new Error(`direct server-everything did not start: ${err}`)), 60_000);
    child.stderr.on("data", (c: Buffer) => {
      err += c.toString();
      if (err.includes("listening")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => reject(new Error(`direct server-everything exited ${code}: ${err}`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, child };
}

/**
 * `json`: gateway.http.plainJsonResponses (the `-json` modes): plain calls answered with JSON, not SSE — on the
 * transparent faces through the relay fast path (docs/adr/0037); `-json-sdk`: the same through the SDK's HTTP transport.
 */
function gatewayConfig(sharing: "session" | "shared", json: boolean, fastPath = true) {
  return {
    mcpServers: { everything: { ...EVERYTHING, sharing } },
    gateway: {
      sessions: { maxSessions: 1000 },
      pendingRequests: { maxPerSession: 1000 },
      ...(json ? { http: { plainJsonResponses: true } } : {}),
      ...(fastPath ? {} : { transparent: { fastPath: false } }),
      ...opts.gateway,
    },
  };
}

/**
 * A peer relay (bench/lib/peers.ts: supergateway with a stdio server-everything per session, mcp-proxy with one for all), or the
 * floor (bench/lib/floor-relay.ts: the smallest correct Node relay, one stdio server-everything), on its Streamable HTTP endpoint.
 */
async function startPeer(peer: Peer | "floor" | "floor-session"): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const everything = [EVERYTHING.command, ...EVERYTHING.args];
  const args =
    peer === "floor" || peer === "floor-session"
      ? ["--import", "tsx", FLOOR, String(port), ...(peer === "floor-session" ? ["--per-session"] : []), ...everything]
      : [peerBin(peer, log), ...peerArgs(peer, port, everything)];
  return { url: `http://127.0.0.1:${port}/mcp`, child: await startListening(peer, args, port) };
}

interface Conn {
  client: Client;
  transport: StreamableHTTPClientTransport;
}

async function connect(url: string): Promise<Conn> {
  const client = new Client({ name: "bench-relay", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

async function echo(mode: Mode, c: Conn, message: string): Promise<void> {
  const result = (
    mode.startsWith("meta")
      ? await c.client.callTool({ name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message } } }, undefined, { timeout: 300_000 })
      : await c.client.callTool({ name: "echo", arguments: { message } }, undefined, { timeout: 300_000 })
  ) as CallToolResult;
  const first = result.content[0];
  if (result.isError || first?.type !== "text" || first.text !== `Echo: ${message}`)
    throw new Error(`${mode}: echo failed ${JSON.stringify(result).slice(0, 300)}`);
}

interface Target {
  mode: Mode;
  /** The mode, with " (before)" for the --before tree's gateway. */
  label: string;
  url: string;
  /** The process whose own CPU is "the gateway's" (none for direct). */
  gatewayPid?: number;
  /** Processes counted as upstream CPU. */
  upstreamPids(): number[];
  conns: Conn[];
  stop(): Promise<void>;
}

/** Per round: calls/s, gateway and upstream CPU µs per call (the report gives each one's median over the rounds: the load of a shared machine comes and goes). */
interface Round {
  tp: number;
  gatewayUs: number;
  upstreamUs: number;
}
const stats = new Map<string, { rounds: Round[]; lat: number[] }>();

async function open(mode: Mode, before = false): Promise<Target> {
  if (mode === "direct") {
    const d = await startDirect();
    return {
      mode,
      label: mode,
      url: d.url,
      upstreamPids: () => [d.child.pid!],
      conns: [],
      async stop() {
        d.child.kill("SIGKILL");
      },
    };
  }
  if (mode === "supergateway" || mode === "mcp-proxy" || mode === "floor" || mode === "floor-session") {
    const p = await startPeer(mode);
    return {
      mode,
      label: mode,
      url: p.url,
      gatewayPid: p.child.pid!,
      upstreamPids: () => descendantPids(p.child.pid!),
      conns: [],
      async stop() {
        for (const pid of descendantPids(p.child.pid!)) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            /* gone */
          }
        }
        p.child.kill("SIGKILL");
      },
    };
  }
  const prof = opts.profile ? ["--cpu-prof", `--cpu-prof-dir=${opts.profile}/${mode}`, "--cpu-prof-interval=200"] : [];
  const root = before ? path.resolve(opts.before!) : undefined;
  const g: GatewayProcess = await startGatewayProcess(
    gatewayConfig(mode.startsWith("shared") ? "shared" : "session", mode.includes("-json"), !mode.endsWith("-sdk")),
    `relay-${mode}`,
    "silent",
    {},
    prof,
    root,
    opts.cli,
  );
  return {
    mode,
    label: before ? `${mode} (before)` : mode,
    url: mode.startsWith("meta") ? g.url : `${g.origin}/servers/everything/mcp`,
    gatewayPid: g.pid,
    upstreamPids: () => descendantPids(g.pid),
    conns: [],
    stop: () => g.stop(),
  };
}

async function main(): Promise<void> {
  const load0 = os.loadavg()[0]!;
  log(`${os.cpus().length} CPUs, node ${process.version}; modes ${MODES.join(", ")}; ${opts.sessions} sessions × ${opts.calls} calls × ${opts.rounds} rounds`);
  const targets: Target[] = [];
  try {
    for (const mode of MODES) {
      targets.push(await open(mode));
      if (opts.before && !["direct", "floor", "floor-session", "supergateway", "mcp-proxy"].includes(mode)) targets.push(await open(mode, true));
    }
    for (const t of targets) stats.set(t.label, { rounds: [], lat: [] });
    for (const t of targets) {
      for (let i = 0; i < opts.sessions; i++) t.conns.push(await connect(t.url));
      for (let w = 0; w < opts.warmup; w++) await Promise.all(t.conns.map((c, s) => echo(t.mode, c, `warm ${s} ${w}`)));
      log(`${t.label}: ${t.conns.length} sessions warm`);
    }
    for (let round = 0; round < opts.rounds; round++) {
      for (let k = 0; k < targets.length; k++) {
        const t = targets[(round + k) % targets.length]!;
        const up = t.upstreamPids();
        const g0 = t.gatewayPid ? threadCpuMs(t.gatewayPid) : 0;
        const u0 = up.reduce((s, p) => s + threadCpuMs(p), 0);
        const t0 = performance.now();
        await Promise.all(
          t.conns.map(async (c, s) => {
            for (let i = 0; i < opts.calls; i++) {
              const c0 = performance.now();
              await echo(t.mode, c, `r${round} s${s} i${i}`);
              stats.get(t.label)!.lat.push(performance.now() - c0);
            }
          }),
        );
        const ms = performance.now() - t0;
        const calls = t.conns.length * opts.calls;
        stats.get(t.label)!.rounds.push({
          tp: (calls * 1000) / ms,
          gatewayUs: t.gatewayPid ? ((threadCpuMs(t.gatewayPid) - g0) * 1000) / calls : 0,
          upstreamUs: ((up.reduce((s, p) => s + threadCpuMs(p), 0) - u0) * 1000) / calls,
        });
        log(`round ${round + 1} ${t.label}: ${fmt((t.conns.length * opts.calls * 1000) / ms, 0)} calls/s`);
      }
    }
  } finally {
    for (const t of targets) {
      await Promise.all(t.conns.map((c) => c.transport.terminateSession().catch(() => undefined)));
      await Promise.all(t.conns.map((c) => c.client.close().catch(() => undefined)));
      await t.stop().catch(() => undefined);
    }
  }
  const median = (label: string, k: keyof Round): number => percentile(stats.get(label)?.rounds.map((r) => r[k]) ?? [], 50);
  const dTp = median("direct", "tp");
  const dP50 = percentile(stats.get("direct")?.lat ?? [], 50);
  const dTree = median("direct", "gatewayUs") + median("direct", "upstreamUs");
  const rows = [...stats.keys()].map((m) => {
    const r = stats.get(m)!;
    const tp = median(m, "tp");
    const p50 = percentile(r.lat, 50);
    return [
      m === "direct"
        ? "direct (server-everything HTTP)"
        : m === "supergateway" || m === "mcp-proxy"
          ? `${m} (${PEER_TOPOLOGY[m]})`
          : m === "floor"
            ? "floor (minimal Node relay, one stdio)"
            : m === "floor-session"
              ? "floor-session (minimal Node relay, stdio per session)"
              : m.startsWith("meta")
                ? `emceepee ${m} (execute_tool)`
                : `emceepee transparent ${m}`,
      `${fmt(tp, 0)} (×${fmt(tp / dTp)})`,
      `${fmt(p50, 2)} (×${fmt(p50 / dP50)})`,
      fmt(percentile(r.lat, 99), 2),
      m === "direct" ? "—" : fmt(median(m, "gatewayUs"), 0),
      fmt(median(m, "upstreamUs"), 0),
      `${fmt(median(m, "gatewayUs") + median(m, "upstreamUs"), 0)} (×${fmt((median(m, "gatewayUs") + median(m, "upstreamUs")) / dTree)})`,
    ];
  });
  writeResults("relay", load0, {
    sessions: opts.sessions,
    calls: opts.calls,
    rounds: opts.rounds,
    modes: Object.fromEntries(
      [...stats.keys()].map((m) => [
        m,
        {
          tp: median(m, "tp"),
          p50: percentile(stats.get(m)!.lat, 50),
          p99: percentile(stats.get(m)!.lat, 99),
          relayUs: m === "direct" ? undefined : median(m, "gatewayUs"),
          upstreamUs: median(m, "upstreamUs"),
        },
      ]),
    ),
  });
  process.stdout.write(
    `\n${table(["", `${opts.sessions}-session throughput, calls/s (vs direct)`, "p50 ms (vs direct)", "p99 ms", "relay CPU µs/call", "upstream CPU µs/call", "tree CPU µs/call (vs direct)"], rows)}\n\n` +
      `${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? "?"}, node ${process.version}; ${opts.rounds} rounds alternating, medians of the rounds; relay CPU is the gateway's or peer's own process; load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}.\n`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
