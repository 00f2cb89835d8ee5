/**
 * Issue 27's comparison in one command (`npm run bench:compare`): runs, one
 * after another, bench/relay.bench.ts (16 sessions calling echo: throughput,
 * p50, the relay's own CPU per call), bench/startup.bench.ts (start to ready)
 * and bench/session-open.bench.ts (100 sessions opened at once, the first call
 * of 16 new sessions), each against a direct connection to server-everything
 * and the peers in the same rounds, then prints the issue's table with ratios
 * against direct and each goal of the issue with its verdict.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`): relay-calls (150 per
 * session per round), relay-rounds (3), startup-rounds (7), open-rounds (3),
 * open-peers (mcp-proxy: the opening goal's peer; supergateway starts a process
 * per session, about 40 s a round on 2 cores), keep=<dir> (each bench's markdown
 * and JSON are kept there; else in a temporary folder that is removed), from=<dir> (only the report, from what
 * `--keep` kept there).
 * The three benches' own tables and progress go to stderr; the comparison to stdout.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { option } from "./lib/options.js";
import type { BenchResults } from "./lib/results.js";
import { fmt, percentile, table } from "./lib/stats.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const RELAY_CALLS = option("relay-calls", 150);
const RELAY_ROUNDS = option("relay-rounds", 3);
const STARTUP_ROUNDS = option("startup-rounds", 7);
const OPEN_ROUNDS = option("open-rounds", 3);
const OPEN_PEERS = process.argv.find((a) => a.startsWith("--open-peers="))?.slice("--open-peers=".length) ?? process.env.BENCH_OPEN_PEERS ?? "mcp-proxy";
/** Report again from a folder an earlier run kept (`--keep`), without running anything. */
const FROM = process.argv.find((a) => a.startsWith("--from="))?.slice("--from=".length) ?? process.env.BENCH_FROM;
const KEEP = process.argv.find((a) => a.startsWith("--keep="))?.slice("--keep=".length) ?? process.env.BENCH_KEEP;

interface RelayMode {
  tp: number;
  p50: number;
  p99: number;
  relayUs?: number;
  upstreamUs: number;
}
interface StartupMode {
  readyMs: number;
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  clientListCpuMs: number;
}
interface RelayData {
  sessions: number;
  calls: number;
  rounds: number;
  modes: Record<string, RelayMode>;
}
interface StartupData {
  rounds: number;
  modes: Record<string, StartupMode>;
}
interface OpenData {
  sessions: number;
  burst: number;
  peers: string[];
  rounds: OpenRow[][];
}
interface OpenRow {
  name: string;
  key: string;
  coldMs: number;
  openMs: number;
  p50: number;
  max: number;
}

const log = (s: string) => process.stderr.write(`${s}\n`);

/** Runs one bench to the end, its markdown into `<dir>/<name>.md` and on stderr; its numbers from `<dir>/<name>.json`. */
async function run<T>(dir: string, name: string, script: string, args: string[]): Promise<BenchResults<T>> {
  const json = path.join(dir, `${name}.json`);
  fs.rmSync(json, { force: true }); // a kept folder's earlier results are not this run's
  const md = fs.createWriteStream(path.join(dir, `${name}.md`));
  log(`\n# ${name}: node --import tsx bench/${script} ${args.join(" ")}`);
  // Only the options given here: a BENCH_* variable of the caller's (BENCH_BEFORE, BENCH_STEPS, …) would change what the bench measures.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("BENCH_")));
  const child = spawn(process.execPath, ["--import", "tsx", path.join(here, script), ...args, `--results=${json}`], {
    stdio: ["ignore", "pipe", "inherit"],
    env,
  });
  child.stdout.on("data", (chunk: Buffer) => {
    md.write(chunk);
    process.stderr.write(chunk);
  });
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  await new Promise<void>((resolve) => md.end(resolve));
  if (code !== 0) throw new Error(`bench/${script} ended with ${code}; its output is above`);
  if (!fs.existsSync(json)) throw new Error(`bench/${script} ended without writing its results to ${json}`);
  return JSON.parse(fs.readFileSync(json, "utf8")) as BenchResults<T>;
}

const x = (r: number) => (Number.isFinite(r) ? `×${fmt(r)}` : "—");
const verdict = (ok: boolean) => (ok ? "held" : "**not held**");

async function main(): Promise<void> {
  if (FROM) {
    const read = (name: string) => JSON.parse(fs.readFileSync(path.join(FROM, `${name}.json`), "utf8"));
    const relay = read("relay");
    return report(relay, read("startup"), read("session-open"), new Date(relay.started), relay.load[0]);
  }
  const dir = KEEP ?? fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-bench-compare-"));
  fs.mkdirSync(dir, { recursive: true });
  const started = new Date();
  const load0 = os.loadavg()[0]!;
  try {
    const relay = await run<RelayData>(dir, "relay", "relay.bench.ts", [
      "--modes=direct,supergateway,mcp-proxy,session,shared,meta",
      `--calls=${RELAY_CALLS}`,
      `--rounds=${RELAY_ROUNDS}`,
    ]);
    const startup = await run<StartupData>(dir, "startup", "startup.bench.ts", [
      "--modes=direct,supergateway,mcp-proxy,session,shared,meta",
      `--rounds=${STARTUP_ROUNDS}`,
    ]);
    const open = await run<OpenData>(dir, "session-open", "session-open.bench.ts", [`--rounds=${OPEN_ROUNDS}`, `--peers=${OPEN_PEERS}`]);
    report(relay, startup, open, started, load0);
    if (!KEEP) fs.rmSync(dir, { recursive: true, force: true });
  } catch (err) {
    if (!KEEP) log(`what was measured is kept in ${dir}`);
    throw err;
  }
}

function report(relay: BenchResults<RelayData>, startup: BenchResults<StartupData>, open: BenchResults<OpenData>, started: Date, load0: number): void {
  const r = relay.data.modes;
  const s = startup.data.modes;
  // Opening: rows by key (direct, the peers, transparent, all, meta), medians over the rounds.
  const openBy = new Map<string, OpenRow[]>();
  for (const round of open.data.rounds) for (const row of round) openBy.set(row.key, [...(openBy.get(row.key) ?? []), row]);
  const o = (key: string, k: keyof Omit<OpenRow, "name" | "key">) =>
    percentile(
      (openBy.get(key) ?? []).map((row) => row[k]),
      50,
    );
  const cols = ["direct", "supergateway", "mcp-proxy", "session", "shared", "meta"] as const;
  const d = r.direct!;
  const cell = (v: number | undefined, base: number | undefined, digits = v !== undefined && v >= 100 ? 0 : 2) =>
    v === undefined || !Number.isFinite(v) ? "—" : `${fmt(v, digits)}${base !== undefined && Number.isFinite(base) ? ` (${x(v / base)})` : ""}`;
  const rows = [
    [`${relay.data.sessions}-session throughput, calls/s`, ...cols.map((m) => cell(r[m]?.tp, d.tp))],
    ["relay's own CPU per call, µs", ...cols.map((m) => (m === "direct" ? "—" : cell(r[m]?.relayUs, undefined, 0)))],
    ["upstreams' CPU per call, µs (server-everything)", ...cols.map((m) => cell(r[m]?.upstreamUs, undefined, 0))],
    ["whole tree's CPU per call, µs", ...cols.map((m) => cell(r[m] ? (r[m].relayUs ?? 0) + r[m].upstreamUs : undefined, d.upstreamUs))],
    ["echo latency p50, ms", ...cols.map((m) => cell(r[m]?.p50, d.p50))],
    ["start to ready, ms (ratio: median of the rounds')", ...cols.map((m) => (s[m] ? `${fmt(s[m].readyMs, 0)} (${x(s[m].ratio)})` : "—"))],
  ];
  const header = [
    "",
    "direct",
    "supergateway (a process per session)",
    "mcp-proxy (one process)",
    "emceepee transparent, session mode",
    "emceepee transparent, shared mode",
    "emceepee meta",
  ];
  // Opening (session-open.bench.ts): the gateway in session mode on each face.
  const openCols = ["direct", ...open.data.peers, "transparent", "all", "meta"];
  const openHeader = [
    "",
    ...openCols.map((k) => (k === "transparent" ? "emceepee /servers/everything/mcp" : k === "all" ? "emceepee /all/mcp" : k === "meta" ? "emceepee meta" : k)),
  ];
  const openRows = [
    [`${open.data.sessions} sessions opened at once, ms`, ...openCols.map((k) => cell(o(k, "openMs"), o("direct", "openMs")))],
    ["… right after the start, ms", ...openCols.map((k) => cell(o(k, "coldMs"), o("direct", "coldMs")))],
    [`first call on ${open.data.burst} new sessions, p50 ms`, ...openCols.map((k) => cell(o(k, "p50"), o("direct", "p50")))],
    ["… max, ms", ...openCols.map((k) => cell(o(k, "max"), o("direct", "max")))],
  ];

  const relayUs = (m: string) => r[m]?.relayUs ?? NaN;
  const goals: Array<[string, string, boolean]> = [];
  const goal = (what: string, value: string, ok: boolean) => goals.push([what, value, ok]);
  for (const m of ["session", "shared"]) goal(`transparent ${m}: relay's own CPU per call ≤ 300 µs`, `${fmt(relayUs(m), 0)} µs`, relayUs(m) <= 300);
  goal(`shared: ${relay.data.sessions}-session throughput ≥ direct's`, x(r.shared!.tp / d.tp), r.shared!.tp >= d.tp);
  goal("session: 16-session throughput ≥ mcp-proxy's (the issue's words)", x(r.session!.tp / r["mcp-proxy"]!.tp), r.session!.tp >= r["mcp-proxy"]!.tp);
  goal("session: 16-session throughput ≥ supergateway's (its topology, ADR 0061)", x(r.session!.tp / r.supergateway!.tp), r.session!.tp >= r.supergateway!.tp);
  for (const m of ["session", "shared"])
    goal(`${m}: p50 ≤ supergateway's`, `${fmt(r[m]!.p50, 2)} vs ${fmt(r.supergateway!.p50, 2)} ms`, r[m]!.p50 <= r.supergateway!.p50);
  goal("meta within ×1.2 of transparent session: throughput", x(r.session!.tp / r.meta!.tp), r.session!.tp / r.meta!.tp <= 1.2);
  goal("meta within ×1.2 of transparent session: p50", x(r.meta!.p50 / r.session!.p50), r.meta!.p50 / r.session!.p50 <= 1.2);
  goal("meta within ×1.2 of transparent session: relay CPU", x(relayUs("meta") / relayUs("session")), relayUs("meta") / relayUs("session") <= 1.2);
  // The goal is the transparent faces' (session mode); the meta face's opening is in the table above.
  for (const k of ["transparent", "all"]) {
    const what = `${k}: ${open.data.sessions} sessions opened in ≤ mcp-proxy's time (median of the rounds; rounds held)`;
    if (!openBy.has("mcp-proxy")) {
      goal(what, "mcp-proxy not measured (--open-peers)", false);
      continue;
    }
    // Round by round, this face against mcp-proxy in the same round.
    const held = open.data.rounds.flatMap((round) => {
      const face = round.find((row) => row.key === k);
      const peer = round.find((row) => row.key === "mcp-proxy");
      return face && peer ? [face.openMs <= peer.openMs] : [];
    });
    goal(
      what,
      `${fmt(o(k, "openMs") / 1000)} vs ${fmt(o("mcp-proxy", "openMs") / 1000)} s; ${held.filter(Boolean).length} of ${held.length}`,
      o(k, "openMs") <= o("mcp-proxy", "openMs"),
    );
  }
  goal(
    `meta: first call of ${open.data.burst} new sessions ≲ 300 ms (p50; max)`,
    `${fmt(o("meta", "p50"), 0)}; ${fmt(o("meta", "max"), 0)} ms`,
    o("meta", "max") <= 300,
  );
  for (const m of ["session", "shared", "meta"])
    goal(`${m}: start to ready ≤ ×1.5 of direct`, `×${fmt(s[m]!.ratio, 3)} (${fmt(s[m]!.ratioMin)}–${fmt(s[m]!.ratioMax)})`, s[m]!.ratio <= 1.5);

  const loads = [relay, startup, open].map((b) => `${b.bench} ${fmt(b.load[0])} → ${fmt(b.load[1])}`).join(", ");
  process.stdout.write(
    `\n## Issue 27's comparison, ${started.toISOString().slice(0, 16).replace("T", " ")}–${open.at.slice(11, 16)} UTC\n\n` +
      `${table(header, rows)}\n\n` +
      `${table(openHeader, openRows)}\n\n` +
      `${os.cpus().length} × ${os.cpus()[0]?.model ?? "?"}, node ${process.version}; server-everything over stdio behind every relay, the SDK client over Streamable HTTP; ` +
      `relay ${relay.data.rounds} rounds × ${relay.data.sessions} sessions × ${relay.data.calls} calls, start ${startup.data.rounds} rounds, opening ${open.data.rounds.length} rounds (medians; opening with the gateway in session mode on each face); ratios against direct in the same bench. ` +
      `Load average (1 min) ${fmt(load0)} at the start; per bench ${loads}.\n\n` +
      `${table(
        ["goal", "measured", ""],
        goals.map(([what, value, ok]) => [what, value, verdict(ok)]),
      )}\n`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
