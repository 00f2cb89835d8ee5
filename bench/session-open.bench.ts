/**
 * Opening sessions (`node --import tsx bench/session-open.bench.ts`, issue 27
 * "Opening sessions", docs/adr/0034): in one run, against server-everything,
 *
 *   direct       server-everything over Streamable HTTP, the SDK clients straight on it;
 *   transparent  `emceepee serve`, stdio server-everything in session mode, on
 *                /servers/everything/mcp (lazy initialize, the default);
 *   all          the same gateway's aggregate face (/all/mcp), first call = everything__echo;
 *   meta         the same gateway's meta face (/mcp), first call = execute_tool echo;
 *
 * 0. Just started: `sessions` sessions opened at once right after it listens (a restart whose
 *    clients reconnect together), before anything else: wall time, upstream processes then.
 * 1. `sessions` sessions opened at once (initialize + initialized, no call):
 *    wall time, upstream processes running after, gateway + children RSS after.
 * 2. First call on `burst` new sessions at once, after an earlier burst of the
 *    same size made the demand (the warm pool, `warmPool` = burst, has filled):
 *    each session's initialize + first echo, p50 and max.
 * Every session is ended (DELETE) once its step is done with it, as a client
 * that is done does; the peers count their server-everything processes only.
 * Ratios against direct in the same run. With `--eager=1` the transparent face
 * is also measured with `lazyInitialize: false` and `warmPool: 1` (what it did
 * before ADR 0034; it starts a process per session, so beware of memory).
 * With `--steps=N` (N > 0) only this is measured: where a new session's first call's
 * milliseconds go, N sessions one after another, each once a warm process waits
 * (or none, `warmPool: 0`): initialize; on the meta face `list_tools` of the server
 * (its connection: warm process taken, upstream initialize, the tool list), then
 * `execute_tool` (the call alone) and again; or `execute_tool` first (all of it);
 * on the transparent face the first `echo` (connection + call) and the second.
 *
 * emceepee runs as the package ships it (the bundle, bench/lib/gateway-process.ts), as the peers run theirs.
 * With `--before=<dir>` (another checkout beside a node_modules symlink, built there: `npm run build`) its gateway is measured too, in
 * the same rounds, alternating with this one (`--rounds=N`, default 1; the table gives each round).
 *
 * The peers (`--peers`, default supergateway,mcp-proxy; bench/lib/peers.ts) are measured as direct is, in front of a stdio
 * server-everything: supergateway starts one per session, mcp-proxy one for all.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`): --sessions=100, --burst=16, --eager=0, --steps=0, --before, --rounds=1, --peers,
 * --results=<file> (every round's rows as JSON too, each with a `key`: direct, the peer, transparent, all, meta; bench/lib/results.ts).
 * Output: markdown on stdout, progress on stderr. Every process it starts is stopped.
 */
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { freePort, startEverythingHttp } from "../test/helpers/core-extra.js";
import { startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { descendantPids, rssBytes } from "./lib/proc.js";
import { option } from "./lib/options.js";
import { writeResults } from "./lib/results.js";
import { PEER_TOPOLOGY, peerArgs, peerBin, startListening, type Peer } from "./lib/peers.js";
import { fmt, mb, percentile, ratio, table } from "./lib/stats.js";
import fs from "node:fs";
import os from "node:os";

const SESSIONS = option("sessions", 100);
const BURST = option("burst", 16);
const EAGER = option("eager", 0, 0) > 0;
const STEPS = option("steps", 0, 0);
const ROUNDS = option("rounds", 1);
const PEERS = (process.argv.find((a) => a.startsWith("--peers="))?.slice("--peers=".length) ?? process.env.BENCH_PEERS ?? "supergateway,mcp-proxy")
  .split(",")
  .filter(Boolean) as Peer[];
for (const p of PEERS) if (!(p in PEER_TOPOLOGY)) throw new Error(`--peers: unknown '${p}' (supergateway, mcp-proxy)`);
const BEFORE = process.argv.find((a) => a.startsWith("--before="))?.slice("--before=".length) ?? process.env.BENCH_BEFORE;
const log = (s: string) => process.stderr.write(`${s}\n`);

/** Connections refused or reset while opening (each retried once; counted in the report). */
let retries = 0;

async function open(url: string, again = true): Promise<Client> {
  const client = new Client({ name: "bench-open", version: "1.0.0" });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  } catch (err) {
    if (!again) throw err;
    retries++;
    return open(url, false);
  }
  return client;
}

/** Which of the gateway's faces a session opens: its first call is the echo tool there. */
type Face = "server" | "all" | "meta";

async function echo(client: Client, face: Face | boolean): Promise<void> {
  if (face === "all") await client.callTool({ name: "everything__echo", arguments: { message: "hi" } });
  else if (face === true || face === "meta")
    await client.callTool({ name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: "hi" }, timeout_ms: 120_000 } });
  else await client.callTool({ name: "echo", arguments: { message: "hi" } });
}

/** `n` sessions opened at once; resolves with the wall time and the clients. */
async function openAll(url: string, n: number): Promise<{ ms: number; clients: Client[] }> {
  const started = performance.now();
  const clients = await Promise.all(Array.from({ length: n }, () => open(url)));
  return { ms: performance.now() - started, clients };
}

/** `n` new sessions at once, each timed from its initialize to its first echo's answer. */
async function firstCalls(url: string, n: number, meta: Face | boolean): Promise<{ times: number[]; clients: Client[] }> {
  const clients: Client[] = [];
  const times = await Promise.all(
    Array.from({ length: n }, async () => {
      const started = performance.now();
      const c = await open(url);
      clients.push(c);
      await echo(c, meta);
      return performance.now() - started;
    }),
  );
  return { times, clients };
}

/** Ends each session (DELETE, as a client that is done does: a peer keeps a session's process until then), then its client. */
const closeAll = (clients: Client[]) =>
  Promise.allSettled(
    clients.map(async (c) => {
      await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await c.close();
    }),
  );

async function waitFor(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return check();
}

/** Nothing a gateway's warm pool does shows a change for this long: no start under way (a start and connect ahead is ≈ 0.3 s here). */
const REST_MS = 2_000;

/** Waits until `state()` has not changed for REST_MS (true), or `ms` passed (false). */
async function atRest(state: () => string, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  let last = state();
  let since = Date.now();
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 200));
    const now = state();
    if (now !== last) [last, since] = [now, Date.now()];
    else if (Date.now() - since >= REST_MS) return true;
  }
  return false;
}

interface Row {
  name: string;
  /** For --results: direct, a peer's name, transparent, all or meta (with " (before)" for --before), eager. */
  key?: string;
  /** Step 0: opened right after the start, and the upstream processes then. */
  coldMs: number;
  coldProcesses: number;
  openMs: number;
  processes: number | string;
  rss: string;
  p50: number;
  max: number;
}

async function gatewayRun(name: string, upstream: Record<string, unknown>, transparent: Record<string, unknown>, meta: Face, root?: string): Promise<Row> {
  const config = {
    mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"], sharing: "session" } },
    // The demand window outlasts the fill: on a loaded machine 16 starts in a row take longer than the default 30 s,
    // and the pool would trim back to one before the timed burst.
    gateway: { upstream: { maxChildProcesses: 400, warmPoolWindowMs: 600_000, ...upstream }, transparent },
  };
  // "info": the warm pool's warm_connection_ready lines say when a process made ahead is connected (ADR 0044).
  const gw: GatewayProcess = await startGatewayProcess(config, name, "info", {}, [], root, "bundle");
  const ready = () => gw.stderr().split("warm_connection_ready").length - 1;
  try {
    const face = meta === "meta" ? gw.url : gw.url.replace(/\/mcp$/, meta === "all" ? "/all/mcp" : "/servers/everything/mcp");
    const cold = await justStarted(name, face, () => gw.upstreamPids().length);
    // Warm-up: one session used, so the gateway knows the upstream's answer (the start-up check does too).
    const warm = await firstCalls(face, 1, meta);
    await closeAll(warm.clients);
    // At rest before the timing, as the peers are: the process the warm-up took is replaced (spawned, connected
    // ahead) by the warm pool, and that server-everything's start would otherwise share the cores with the opening.
    // The pool keeps as many as sessions took in its window (the just-started step's first session took one too),
    // one start at a time: at rest once one is connected ahead and nothing has changed for REST_MS.
    const settled = (await waitFor(() => ready() >= 1, 60_000)) && (await atRest(() => `${ready()} ${gw.upstreamPids().length}`, 60_000));
    log(`${name}: warm pool ${settled ? "settled" : "not settled in 60 s"} (${ready()} connected ahead so far)`);
    log(`${name}: opening ${SESSIONS} sessions (${gw.upstreamPids().length} processes waiting)`);
    const opened = await openAll(face, SESSIONS);
    const processes = gw.upstreamPids().length;
    const rss = rssBytes(gw.pid) + descendantPids(gw.pid).reduce((n, pid) => n + rssBytes(pid), 0);
    await closeAll(opened.clients);
    // The demand: a burst of first calls (kept open), then wait for the warm pool to hold its size beside them.
    log(`${name}: burst of ${BURST} to make the demand`);
    const readyBefore = ready();
    const demand = await firstCalls(face, BURST, meta);
    const spares = Math.min(BURST, Number(upstream.warmPool ?? 1));
    // Filled: as many processes waiting as the demand, each connected ahead (initialize and tool list done) once the
    // pool connects ahead; a pool that only spawns ahead (before ADR 0044) is filled when the processes are there.
    const filled = await waitFor(() => gw.upstreamPids().length >= BURST + spares, 180_000);
    const connected = filled && (await waitFor(() => ready() - readyBefore >= spares, 60_000));
    log(
      `${name}: ${gw.upstreamPids().length - BURST} waiting (${filled ? "filled" : "not filled in 180 s"}; ${ready() - readyBefore} connected ahead${connected ? "" : " after 60 s"}); timing ${BURST} new sessions' first calls`,
    );
    const timed = await firstCalls(face, BURST, meta);
    await closeAll([...demand.clients, ...timed.clients]);
    return { name, ...cold, openMs: opened.ms, processes, rss: mb(rss), p50: percentile(timed.times, 50), max: Math.max(...timed.times) };
  } finally {
    await gw.stop();
  }
}

/**
 * Direct's and a peer's two measurements on `url` (a warm-up session first): `sessions` opened at once, with the
 * processes and RSS of `pid`'s tree then, and a burst's first calls after a burst that made the demand.
 */
async function measureUrl(name: string, url: string, pid: number, processes: () => number): Promise<Row> {
  const cold = await justStarted(name, url, processes);
  await closeAll((await firstCalls(url, 1, false)).clients);
  log(`${name}: opening ${SESSIONS} sessions`);
  const opened = await openAll(url, SESSIONS);
  const count = processes();
  const rss = rssBytes(pid) + descendantPids(pid).reduce((n, child) => n + rssBytes(child), 0);
  await closeAll(opened.clients);
  await closeAll((await firstCalls(url, BURST, false)).clients);
  const timed = await firstCalls(url, BURST, false);
  await closeAll(timed.clients);
  return { name, ...cold, openMs: opened.ms, processes: count, rss: mb(rss), p50: percentile(timed.times, 50), max: Math.max(...timed.times) };
}

/** Step 0: `sessions` opened at once right after the start (nothing used yet), the upstream processes then; all ended. */
async function justStarted(name: string, url: string, processes: () => number): Promise<{ coldMs: number; coldProcesses: number }> {
  log(`${name}: opening ${SESSIONS} sessions right after the start`);
  const opened = await openAll(url, SESSIONS);
  const coldProcesses = processes();
  await closeAll(opened.clients);
  return { coldMs: opened.ms, coldProcesses };
}

async function directRun(): Promise<Row> {
  const server = await startEverythingHttp();
  try {
    return await measureUrl("direct (server-everything, Streamable HTTP)", server.url, server.child.pid!, () => 1);
  } finally {
    await server.close();
  }
}

/**
 * A peer relay in front of stdio server-everything (bench/lib/peers.ts), measured as direct is. Its upstream
 * processes are its descendants; every one of them is ended with it.
 */
async function peerRun(peer: Peer): Promise<Row> {
  const port = await freePort();
  const everything = [process.execPath, everythingServerEntry(), "stdio"];
  const child = await startListening(peer, [peerBin(peer, log), ...peerArgs(peer, port, everything)], port);
  try {
    // server-everything processes only: supergateway starts each through a shell (`sh` + `node` per session).
    const upstreams = () => descendantPids(child.pid!).filter((pid) => commandArgs(pid).includes(everythingServerEntry())).length;
    return await measureUrl(`${peer} (${PEER_TOPOLOGY[peer]})`, `http://127.0.0.1:${port}/mcp`, child.pid!, upstreams);
  } finally {
    const left = descendantPids(child.pid!);
    child.kill("SIGKILL");
    for (const pid of left) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
  }
}

/** A process's arguments (none once it is gone); a shell's `-c` command is one argument, so it is not the entry. */
function commandArgs(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
}

/** A step's time in ms. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

/** `--steps`: one new session at a time, each step of its first calls timed (see the header). */
async function stepsRun(name: string, warmPool: number, kind: "meta-list" | "meta" | "transparent"): Promise<{ name: string; steps: Map<string, number[]> }> {
  const config = {
    mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"], sharing: "session" } },
    gateway: { upstream: { warmPool } },
  };
  const gw = await startGatewayProcess(config, "steps", "silent", {}, [], undefined, "bundle");
  const steps = new Map<string, number[]>();
  const note = (step: string, ms: number) => steps.set(step, [...(steps.get(step) ?? []), ms]);
  const meta = kind !== "transparent";
  const face = meta ? gw.url : gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
  try {
    await closeAll((await firstCalls(face, 1, meta)).clients); // the demand: the pool keeps one waiting from now on
    for (let i = 0; i < STEPS; i++) {
      if (warmPool > 0 && !(await waitFor(() => gw.upstreamPids().length >= 1, 60_000))) log(`${name}: no warm process after 60 s`);
      let client: Client | undefined;
      note("initialize", await timed(async () => (client = await open(face))));
      const c = client!;
      if (kind === "meta-list")
        note("list_tools (connect + tools/list)", await timed(() => c.callTool({ name: "list_tools", arguments: { server: "everything", limit: 1 } })));
      note(kind === "meta-list" ? "execute_tool echo (the call)" : "first call", await timed(() => echo(c, meta)));
      note("second call", await timed(() => echo(c, meta)));
      await (c.transport as StreamableHTTPClientTransport).terminateSession(); // DELETE: the session ends, and its process
      await c.close();
      // Its process ends with it (session mode): wait for that, so the next session finds only the warm one.
      await waitFor(() => gw.upstreamPids().length <= Math.min(warmPool, 1), 30_000);
    }
  } finally {
    await gw.stop();
  }
  return { name, steps };
}

if (STEPS > 0) {
  const load = os.loadavg()[0]!;
  const runs = [];
  for (const warm of [1, 0]) {
    for (const kind of ["meta-list", "meta", "transparent"] as const) {
      const name = `${kind === "transparent" ? "transparent" : "meta"}${kind === "meta-list" ? " (list_tools first)" : ""}, warmPool ${warm}`;
      log(`steps: ${name}`);
      runs.push(await stepsRun(name, warm, kind));
    }
  }
  process.stdout.write(
    `\n## First calls of a new session, step by step — ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores, load ${fmt(load)} → ${fmt(os.loadavg()[0]!)}\n\n` +
      table(
        ["", "step", `p50 ms (of ${STEPS})`, "min", "max"],
        runs.flatMap((r) => [...r.steps].map(([step, ms]) => [r.name, step, fmt(percentile(ms, 50), 1), fmt(Math.min(...ms), 1), fmt(Math.max(...ms), 1)])),
      ) +
      "\n",
  );
  process.exit(0);
}

const load0 = os.loadavg()[0]!;
const allRounds: Row[][] = [];
for (let round = 1; round <= ROUNDS; round++) {
  const rows: Row[] = [];
  allRounds.push(rows);
  const load = os.loadavg()[0]!;
  rows.push({ ...(await directRun()), key: "direct" });
  for (const peer of PEERS) rows.push({ ...(await peerRun(peer)), key: peer });
  // Alternating: this tree first in odd rounds, the one before first in even rounds.
  const trees: Array<[string, string | undefined]> = BEFORE
    ? [
        ["", undefined],
        [" — before", BEFORE],
      ]
    : [["", undefined]];
  for (const [label, root] of round % 2 === 1 ? trees : trees.reverse()) {
    const suffix = root ? " (before)" : "";
    rows.push({
      ...(await gatewayRun(`transparent (lazy initialize, warmPool burst)${label}`, { warmPool: BURST }, {}, "server", root)),
      key: `transparent${suffix}`,
    });
    rows.push({ ...(await gatewayRun(`all (the aggregate face, warmPool burst)${label}`, { warmPool: BURST }, {}, "all", root)), key: `all${suffix}` });
    rows.push({ ...(await gatewayRun(`meta (warmPool burst)${label}`, { warmPool: BURST }, {}, "meta", root)), key: `meta${suffix}` });
  }
  if (EAGER)
    rows.push({
      ...(await gatewayRun("transparent before (lazyInitialize false, warmPool 1)", { warmPool: 1 }, { lazyInitialize: false }, "server")),
      key: "eager",
    });
  const direct = rows[0]!;
  process.stdout.write(
    `\n## Opening sessions — round ${round}, ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores, load ${fmt(load)} → ${fmt(os.loadavg()[0]!)}\n\n` +
      table(
        [
          "",
          `just started: ${SESSIONS} opened at once`,
          "processes then",
          `${SESSIONS} sessions opened at once`,
          "upstream processes after",
          "RSS after (gateway + children)",
          `first call, ${BURST} new sessions, p50`,
          "max",
        ],
        rows.map((r) => [
          r.name,
          `${fmt(r.coldMs / 1000)} s${ratio(r.coldMs, direct.coldMs)}`,
          String(r.coldProcesses),
          `${fmt(r.openMs / 1000)} s${ratio(r.openMs, direct.openMs)}`,
          String(r.processes),
          r.rss,
          `${fmt(r.p50, 0)} ms${ratio(r.p50, direct.p50)}`,
          `${fmt(r.max, 0)} ms`,
        ]),
      ) +
      `\n\nOpens retried after a refused or reset connection: ${retries}.\n`,
  );
}
writeResults("session-open", load0, { sessions: SESSIONS, burst: BURST, peers: PEERS, rounds: allRounds });
