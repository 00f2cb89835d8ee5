/**
 * Start to ready (`npm run bench:startup`, issue 27 "Start to ready ≤ ×1.5 of
 * server-everything's own", issue 21 "Start fast"). Each round starts, one at
 * a time in rotating order: server-everything's own Streamable HTTP server
 * (direct), supergateway and mcp-proxy in front of server-everything over
 * stdio, and `emceepee serve` (the compiled CLI, test/helpers/cli-build.ts;
 * SQLite store, serve's default; upstream check on, serve's default) with one
 * stdio server-everything upstream, in transparent session mode, shared mode
 * and on the meta face.
 *
 * Ready = from spawn until an SDK client over Streamable HTTP has had answers
 * to `initialize` and `tools/list` through to the upstream: the transparent
 * face's tools/list is the upstream's; on the meta face (whose tools/list is
 * its own) also a `list_tools` call for the upstream. The client first waits
 * for the port to accept (polled every 5 ms; also reported, with when each
 * of initialize, tools/list and list_tools was answered after it), then sends
 * initialize once. For emceepee also the first `200` from /healthz (polled
 * alongside). Also when the relay's first upstream process started, from
 * /proc start times (10 ms ticks; for emceepee its early process, ADR 0063):
 * session and shared mode's ready waits for that process's own start. CPU: the whole process tree at ready (the process, every live
 * descendant, and what reaped children used), and the relay process's own;
 * and the client's own CPU in tools/list (the SDK client compiles a validator
 * for each output schema in the list there: the meta face lists 27).
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`): rounds (5),
 * modes (direct,supergateway,mcp-proxy,session,shared,meta),
 * before=<dir> (also run `<dir>/dist/cli/emceepee.mjs`, else `<dir>/dist/cli/main.js`, a build of another commit
 * beside a node_modules symlink, as "<mode> (before)" in the same rounds;
 * before-label=<word> names them otherwise),
 * profile=<dir> (emceepee runs with `--cpu-prof` into <dir>/<mode>),
 * check=0 (emceepee with `--no-upstream-check`),
 * results=<file> (the medians as JSON too, keyed by mode, bench/lib/results.ts).
 * Markdown on stdout, progress on stderr. Every process it starts is stopped.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { bundledCliEntry } from "../test/helpers/cli-build.js";
import { freePort } from "../test/helpers/core-extra.js";
import { peerArgs, peerBin } from "./lib/peers.js";
import { alive, descendantPids, threadCpuMs } from "./lib/proc.js";
import { fmt, percentile, table } from "./lib/stats.js";
import { option } from "./lib/options.js";
import { writeResults } from "./lib/results.js";

const ROUNDS = option("rounds", 5);
/** 0: emceepee starts with --no-upstream-check (serve's start-up check of each upstream off). */
const CHECK = option("check", 1, 0) > 0;
const arg = (name: string): string | undefined =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? process.env[`BENCH_${name.toUpperCase().replace(/-/g, "_")}`];
type Mode = "direct" | "supergateway" | "mcp-proxy" | "session" | "shared" | "meta";
const ALL_MODES: Mode[] = ["direct", "supergateway", "mcp-proxy", "session", "shared", "meta"];
const MODES = (arg("modes") ?? ALL_MODES.join(",")).split(",") as Mode[];
for (const m of MODES) if (!ALL_MODES.includes(m)) throw new Error(`--modes: unknown '${m}' (have ${ALL_MODES.join(", ")})`);
const BEFORE = arg("before");
const PROFILE = arg("profile");
/** How the --before build's rows are named, e.g. `--before-label=bundled`. */
const BEFORE_LABEL = arg("before-label") ?? "before";
const EVERYTHING = [process.execPath, everythingServerEntry(), "stdio"];

const began = performance.now();
const log = (msg: string): void => void process.stderr.write(`[startup ${((performance.now() - began) / 1000).toFixed(1)}s] ${msg}\n`);

/** USER_HZ: /proc's clock ticks per second (100 on Linux everywhere this runs). */
const TICKS = 100;
/** CPU ms of `pid` itself (all threads) and of its reaped children (cutime + cstime, 10 ms ticks). */
function ownAndReaped(pid: number): { own: number; reaped: number } {
  let reaped = 0;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    reaped = ((Number(f[13]) + Number(f[14])) * 1000) / TICKS;
  } catch {
    /* gone */
  }
  return { own: threadCpuMs(pid), reaped };
}

/** The relay's own CPU and the whole tree's (it, its live descendants, and what every one of them reaped). */
function treeCpu(pid: number): { relay: number; tree: number } {
  const root = ownAndReaped(pid);
  let tree = root.own + root.reaped;
  for (const d of descendantPids(pid)) {
    const c = ownAndReaped(d);
    tree += c.own + c.reaped;
  }
  return { relay: root.own, tree };
}

/** Start time of `pid` in clock ticks after boot (/proc stat field 22), or undefined if it is gone. */
function startTicks(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
  } catch {
    return undefined;
  }
}

/** When the relay's first live descendant (its upstream: for emceepee the early process) started, in ms after the relay (10 ms ticks). */
function firstChildMs(pid: number): number | undefined {
  const own = startTicks(pid);
  const starts = descendantPids(pid).flatMap((d) => startTicks(d) ?? []);
  return own === undefined || !starts.length ? undefined : ((Math.min(...starts) - own) * 1000) / TICKS;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1", () => (sock.destroy(), resolve(true)));
    sock.once("error", () => resolve(false));
  });
}

function healthz(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/healthz", agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.once("error", () => resolve(false));
  });
}

/** Polls `probe` every 5 ms until true; the ms since `t0` then. Throws once the child exits or after 120 s. */
async function until(probe: () => Promise<boolean>, t0: number, child: ChildProcess, what: string, output: () => string): Promise<number> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${what}: the process exited (${child.exitCode ?? child.signalCode}):\n${output()}`);
    if (await probe()) return performance.now() - t0;
    if (performance.now() - t0 > 120_000) throw new Error(`${what}: not within 120 s:\n${output()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Sample {
  listenMs: number;
  healthzMs?: number | undefined;
  readyMs: number;
  relayCpuMs?: number | undefined;
  treeCpuMs: number;
  /** The relay's first live descendant at ready started this many ms after the relay (10 ms ticks). */
  upstreamStartMs?: number | undefined;
  /** After the port accepts: ms until initialize, tools/list and (meta) list_tools were answered. */
  steps: number[];
  /** The bench's own CPU (the SDK client's) while tools/list was answered and taken in: its parse and Ajv compile of each output schema. */
  clientListCpuMs: number;
}

interface Started {
  child: ChildProcess;
  port: number;
  output: () => string;
}

function launch(command: string, args: string[], env: NodeJS.ProcessEnv, port: number, cwd?: string): Started {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], cwd, detached: true });
  let out = "";
  const keep = (c: Buffer) => void (out = (out + c.toString("utf8")).slice(-4000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  return { child, port, output: () => out };
}

/** The process group (each start is its own group leader: `detached`), SIGKILLed, and waited for. */
async function stop(s: Started): Promise<void> {
  const pids = descendantPids(s.child.pid!);
  const exited = s.child.exitCode !== null || s.child.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => s.child.once("exit", () => r()));
  // A CPU profile is written when the process exits on its own: SIGTERM (serve closes and exits) first.
  if (PROFILE && s.child.exitCode === null) {
    s.child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
  }
  try {
    process.kill(-s.child.pid!, "SIGKILL");
  } catch {
    /* gone */
  }
  for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL");
  await exited;
}

/** The bundled CLI, built once before the first round (a source edited meanwhile is not rebuilt inside a timing). */
let cliEntry: string | undefined;

/** The --before build's executable: its bundle when it has one, else tsc's dist/cli/main.js. */
function beforeEntry(): string {
  const bundled = path.resolve(BEFORE!, "dist/cli/emceepee.mjs");
  return fs.existsSync(bundled) ? bundled : path.resolve(BEFORE!, "dist/cli/main.js");
}

async function start(mode: Mode, before: boolean, tmp: string): Promise<Started> {
  const port = await freePort();
  if (mode === "direct") return launch(process.execPath, [everythingServerEntry(), "streamableHttp"], { PORT: String(port) }, port);
  if (mode === "supergateway" || mode === "mcp-proxy") return launch(process.execPath, [peerBin(mode, log), ...peerArgs(mode, port, EVERYTHING)], {}, port);
  const dir = fs.mkdtempSync(path.join(tmp, `${mode}-`));
  const config = path.join(dir, "config.json");
  const sharing = mode === "shared" ? "shared" : "session";
  fs.writeFileSync(config, JSON.stringify({ mcpServers: { everything: { command: EVERYTHING[0], args: EVERYTHING.slice(1), sharing } } }));
  const entry = before ? beforeEntry() : (cliEntry ??= bundledCliEntry());
  const prof = PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(PROFILE, before ? `${mode}-before` : mode)}`, "--cpu-prof-interval=250"] : [];
  // serve keeps its state in SQLite by default: under this start's own folder.
  return launch(
    process.execPath,
    [...prof, entry, "serve", "--config", config, "--port", String(port), "--log-level", "silent", ...(CHECK ? [] : ["--no-upstream-check"])],
    { XDG_STATE_HOME: dir },
    port,
    before ? path.resolve(BEFORE!) : undefined,
  );
}

async function measure(mode: Mode, before: boolean, tmp: string): Promise<Sample> {
  const t0 = performance.now();
  const s = await start(mode, before, tmp);
  try {
    const gateway = !["direct", "supergateway", "mcp-proxy"].includes(mode);
    const health = gateway ? until(() => healthz(s.port), t0, s.child, `${mode} /healthz`, s.output) : undefined;
    const listenMs = await until(() => accepts(s.port), t0, s.child, `${mode} listening`, s.output);
    const face = mode === "meta" || !gateway ? "/mcp" : "/servers/everything/mcp";
    const client = new Client({ name: "bench-startup", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${s.port}${face}`));
    const step = (): number => performance.now() - t0 - listenMs;
    await client.connect(transport);
    const steps = [step()];
    const cpu0 = process.cpuUsage();
    const tools = await client.listTools(undefined, { timeout: 120_000 });
    const used = process.cpuUsage(cpu0);
    const clientListCpuMs = (used.user + used.system) / 1000;
    steps.push(step());
    if (mode === "meta") {
      const listed = await client.callTool({ name: "list_tools", arguments: { server: "everything" } }, undefined, { timeout: 120_000 });
      if (listed.isError || !JSON.stringify(listed.content).includes("echo"))
        throw new Error(`meta: list_tools failed ${JSON.stringify(listed).slice(0, 300)}`);
      steps.push(step());
    } else if (!tools.tools.some((t) => t.name === "echo")) throw new Error(`${mode}: tools/list has no echo`);
    const readyMs = performance.now() - t0;
    const cpu = treeCpu(s.child.pid!);
    const upstreamStartMs = mode === "direct" ? undefined : firstChildMs(s.child.pid!);
    const healthzMs = await health;
    await transport.terminateSession().catch(() => undefined);
    await client.close().catch(() => undefined);
    return {
      listenMs,
      healthzMs,
      readyMs,
      relayCpuMs: mode === "direct" ? undefined : cpu.relay,
      treeCpuMs: cpu.tree,
      upstreamStartMs,
      steps,
      clientListCpuMs,
    };
  } finally {
    await stop(s);
  }
}

function label(mode: Mode, before: boolean): string {
  const name =
    mode === "direct"
      ? "direct (server-everything's own HTTP)"
      : mode === "supergateway" || mode === "mcp-proxy"
        ? `${mode} (stdio)`
        : mode === "meta"
          ? "emceepee meta"
          : `emceepee transparent ${mode}`;
  return before ? `${name} (${BEFORE_LABEL})` : name;
}

async function main(): Promise<void> {
  const load0 = os.loadavg();
  const entries: Array<{ mode: Mode; before: boolean }> = MODES.flatMap((mode) =>
    BEFORE && !["direct", "supergateway", "mcp-proxy"].includes(mode)
      ? [
          { mode, before: false },
          { mode, before: true },
        ]
      : [{ mode, before: false }],
  );
  if (!MODES.includes("direct")) throw new Error("--modes must include direct (the ratios are against it)");
  log(`${os.cpus().length} CPUs, node ${process.version}, load ${load0.map((l) => l.toFixed(1)).join(" ")}; ${entries.length} starts × ${ROUNDS} rounds`);
  cliEntry = bundledCliEntry(); // built (or found) before the first round, not inside a timing
  for (const m of MODES) if (m === "supergateway" || m === "mcp-proxy") peerBin(m, log);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-bench-startup-"));
  // Per round: each entry's sample, and its ratio to direct in the same round.
  const samples = new Map<string, Sample[]>();
  const ratios = new Map<string, { ready: number[]; cpu: number[] }>();
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const inRound = new Map<string, Sample>();
      for (let k = 0; k < entries.length; k++) {
        const { mode, before } = entries[(round + k) % entries.length]!;
        const s = await measure(mode, before, tmp);
        const key = label(mode, before);
        inRound.set(key, s);
        samples.set(key, [...(samples.get(key) ?? []), s]);
        log(
          `round ${round + 1} ${key}: ready ${fmt(s.readyMs, 0)} ms (port ${fmt(s.listenMs, 0)}, then +${s.steps.map((x) => fmt(x, 0)).join(" +")}), tree CPU ${fmt(s.treeCpuMs, 0)} ms`,
        );
      }
      const direct = inRound.get(label("direct", false))!;
      for (const [key, s] of inRound) {
        const r = ratios.get(key) ?? { ready: [], cpu: [] };
        r.ready.push(s.readyMs / direct.readyMs);
        r.cpu.push(s.treeCpuMs / direct.treeCpuMs);
        ratios.set(key, r);
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const med = (xs: number[]) => percentile(xs, 50);
  const range = (xs: number[]) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`;
  const rows = [...samples].map(([key, ss]) => {
    const r = ratios.get(key)!;
    const healthz = ss.flatMap((s) => (s.healthzMs === undefined ? [] : [s.healthzMs]));
    const relay = ss.flatMap((s) => (s.relayCpuMs === undefined ? [] : [s.relayCpuMs]));
    const upstream = ss.flatMap((s) => (s.upstreamStartMs === undefined ? [] : [s.upstreamStartMs]));
    return [
      key,
      `${fmt(med(ss.map((s) => s.readyMs)), 0)}`,
      `×${fmt(med(r.ready))} (${range(r.ready)})`,
      upstream.length ? fmt(med(upstream), 0) : "—",
      fmt(med(ss.map((s) => s.listenMs)), 0),
      ss[0]!.steps.map((_, i) => fmt(med(ss.map((s) => s.steps[i]!)), 0)).join(" / "),
      fmt(med(ss.map((s) => s.clientListCpuMs)), 0),
      healthz.length ? fmt(med(healthz), 0) : "—",
      relay.length ? fmt(med(relay), 0) : "—",
      fmt(med(ss.map((s) => s.treeCpuMs)), 0),
      `×${fmt(med(r.cpu))}`,
    ];
  });
  writeResults("startup", load0[0]!, {
    rounds: ROUNDS,
    modes: Object.fromEntries(
      entries.map(({ mode, before }) => {
        const ss = samples.get(label(mode, before)) ?? [];
        const r = ratios.get(label(mode, before)) ?? { ready: [], cpu: [] };
        const steps = ss[0]?.steps.map((_, i) => med(ss.map((x) => x.steps[i]!))) ?? [];
        return [
          before ? `${mode} (${BEFORE_LABEL})` : mode,
          {
            readyMs: med(ss.map((x) => x.readyMs)),
            ratio: med(r.ready),
            ratioMin: Math.min(...r.ready),
            ratioMax: Math.max(...r.ready),
            listenMs: med(ss.map((x) => x.listenMs)),
            steps,
            clientListCpuMs: med(ss.map((x) => x.clientListCpuMs)),
          },
        ];
      }),
    ),
  });
  const load1 = os.loadavg();
  process.stdout.write(
    `\n${table(
      [
        "",
        "start to ready, ms (median)",
        "vs direct, same round (median, range)",
        "upstream process started, ms",
        "port accepts, ms",
        "then answered: initialize / tools/list / list_tools (meta), ms after the port accepts",
        "client's CPU in tools/list, ms",
        "/healthz 200, ms",
        "relay CPU at ready, ms",
        "tree CPU at ready, ms",
        "tree CPU vs direct",
      ],
      rows,
    )}\n\n` +
      `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${os.cpus().length} × ${os.cpus()[0]?.model ?? "?"}, node ${process.version}; ${ROUNDS} rounds, starts one at a time in rotating order${CHECK ? "" : "; emceepee with --no-upstream-check"}; ` +
      `load average ${load0.map((l) => l.toFixed(1)).join(" ")} before, ${load1.map((l) => l.toFixed(1)).join(" ")} after.\n`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
