/**
 * Replicas benchmark (`npm run bench:replicas`): 1 vs 2 vs 3 `emceepee serve`
 * replicas sharing one redis-server (docs/adr/0013) behind a round-robin
 * balancer (test/helpers/balancer.ts), in one run, reported as ratios to one
 * replica.
 *
 * - Throughput and latency: `--sessions` meta-face sessions, each making
 *   `--calls` sequential `execute_tool` echo calls (answered before their
 *   timeout: no task) through the balancer, all sessions at once. With N
 *   replicas and no stickiness, (N-1)/N of a session's requests are forwarded
 *   to the replica that holds it, so this measures what forwarding costs as
 *   much as what more processes give.
 * - Redis round trips per call: one session's `--probe` calls under
 *   MONITOR, counting the commands clients sent (not those run inside the
 *   store's scripts); and INFO commandstats over the throughput phase for
 *   every command Redis ran, scripts' included.
 *
 * Every process here shares the machine's cores (the replicas, their
 * server-everything children, redis-server, this client and the balancer):
 * on 2 cores more replicas cannot add CPU, so the ratios show the cost of the
 * design, not the scaling a bigger machine gives. Output: markdown on stdout.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`):
 *   --sessions=8   concurrent sessions per configuration
 *   --calls=60     measured calls per session (after --warmup=5)
 *   --probe=50     calls of the round-trip probe
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Redis } from "ioredis";
import { everythingServerEntry } from "../src/config/demo.js";
import { Balancer, type Backend } from "../test/helpers/balancer.js";
import { freePort, stopChild } from "../test/helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../test/helpers/redis.js";
import { ROOT } from "./lib/gateway-process.js";
import { fmt, percentile, ratio, table } from "./lib/stats.js";
import { option } from "./lib/options.js";

const opts = { sessions: option("sessions", 8), calls: option("calls", 60), warmup: option("warmup", 5), probe: option("probe", 50) };
const started = performance.now();
const log = (msg: string) => process.stderr.write(`[bench:replicas ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
const SECRET = "bench-replicas-secret-0123456789";

interface Replica extends Backend {
  child: ChildProcess;
}

async function startReplica(redisUrl: string, prefix: string, id: string, dir: string): Promise<Replica> {
  const port = await freePort();
  const file = path.join(dir, `${id}.json`);
  fs.writeFileSync(
    file,
    JSON.stringify({
      mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"] } },
      gateway: {
        store: { kind: "redis", url: redisUrl, keyPrefix: prefix },
        cluster: { enabled: true, replicaId: id, advertiseUrl: `http://127.0.0.1:${port}`, secret: SECRET },
        sessions: { maxSessions: 1000 },
      },
    }),
  );
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "serve", "--config", file, "--port", String(port), "--log-level", "silent"], {
    cwd: ROOT,
    env: { ...process.env, XDG_STATE_HOME: dir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr?.on("data", (c: Buffer) => (out += c.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`replica ${id} did not start in 60 s\n${out}`)), 60_000);
    const check = () => {
      if (/listening on http/.test(out)) {
        clearTimeout(timer);
        child.stdout?.off("data", check);
        resolve();
      }
    };
    child.stdout?.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`replica ${id} exited with ${code}\n${out}`));
    });
  });
  return { id, port, child };
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: "bench-replicas", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function echo(client: Client, n: number): Promise<number> {
  const t0 = performance.now();
  const r = (await client.callTool({ name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: `m${n}` } } }, undefined, {
    timeout: 60_000,
  })) as CallToolResult;
  if (r.isError) throw new Error(`echo failed: ${JSON.stringify(r.content)}`);
  return performance.now() - t0;
}

/** Sum of `calls=` over INFO commandstats. */
async function commandsRun(admin: Redis): Promise<number> {
  const info = await admin.info("commandstats");
  return [...info.matchAll(/calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

interface Row {
  replicas: number;
  calls: number;
  seconds: number;
  p50: number;
  p99: number;
  roundTrips: number;
  commands: number;
}

async function measure(redis: RedisServer, n: number, dir: string): Promise<Row> {
  const replicas = await Promise.all(Array.from({ length: n }, (_, i) => startReplica(redis.url, `bench${n}:`, `r${i + 1}`, dir)));
  const balancer = new Balancer(() => replicas);
  const base = await balancer.start();
  const clients: Client[] = [];
  const admin = redis.client();
  try {
    for (let i = 0; i < opts.sessions; i++) clients.push(await connect(`${base}/mcp`));
    await Promise.all(
      clients.map(async (c) => {
        for (let k = 0; k < opts.warmup; k++) await echo(c, k);
      }),
    );

    // Round trips: one session alone, under MONITOR.
    const monitor = await redis.client().monitor();
    let sent = 0;
    monitor.on("monitor", (_time: string, _args: string[], source: string) => {
      if (!source.includes("lua")) sent++;
    });
    for (let k = 0; k < opts.probe; k++) await echo(clients[0]!, k);
    await new Promise((r) => setTimeout(r, 200));
    monitor.disconnect();
    // The MONITOR connection's own commands are not seen by it.
    const roundTrips = sent / opts.probe;

    const before = await commandsRun(admin);
    const latencies: number[] = [];
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (c) => {
        for (let k = 0; k < opts.calls; k++) latencies.push(await echo(c, k));
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const commands = ((await commandsRun(admin)) - before - 1) / latencies.length;
    return { replicas: n, calls: latencies.length, seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), roundTrips, commands };
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
    await balancer.close();
    await Promise.allSettled(replicas.map((r) => stopChild(r.child)));
  }
}

async function main(): Promise<void> {
  const skip = redisSkipReason();
  if (skip !== undefined) {
    log(skip);
    process.exitCode = 1;
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-bench-replicas-"));
  const redis = await startRedis();
  const rows: Row[] = [];
  try {
    for (const n of [1, 2, 3]) {
      log(`${n} replica(s): ${opts.sessions} sessions × ${opts.calls} calls`);
      rows.push(await measure(redis, n, dir));
    }
  } finally {
    await redis.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const one = rows[0]!;
  const tput = (r: Row) => r.calls / r.seconds;
  console.log(
    `## Replicas on Redis (${os.cpus().length} cores; ${opts.sessions} sessions × ${opts.calls} execute_tool echo calls through a round-robin balancer)\n`,
  );
  console.log(
    table(
      ["replicas", "calls/s", "p50 ms", "p99 ms", "Redis round trips / call", "Redis commands / call (incl. in scripts)"],
      rows.map((r) => [
        String(r.replicas),
        fmt(tput(r), 0) + ratio(tput(r), tput(one)),
        fmt(r.p50, 1) + ratio(r.p50, one.p50),
        fmt(r.p99, 1) + ratio(r.p99, one.p99),
        fmt(r.roundTrips, 1),
        fmt(r.commands, 1),
      ]),
    ),
  );
}

await main();
