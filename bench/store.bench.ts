/**
 * Store benchmark (`npm run bench:store`): what the durable store costs
 * (docs/adr/0007, "Wiring"), SQLite against memory, in one run.
 *
 * - Per-call overhead, two `emceepee serve` children (one `--store memory`,
 *   one `--store sqlite:<tmp>`), interleaved: the meta face (`execute_tool`
 *   echo, answered before its timeout: no task) and the transparent task path
 *   (a task-augmented `tools/call` of echo, then `tasks/result`: a stored
 *   task created, completed and read).
 * - Memory per task: in this process (`--expose-gc`), a TaskManager over each
 *   store: heap per stored working task (record, TTL timer, runtime) and per
 *   ended task (tiny results, so "excluding results"). A gateway's RSS moves
 *   by more than that between two readings, so it is not used here.
 * - Start-up: `emceepee serve --store sqlite:<file>` until it listens, on an
 *   empty file and on one with 10,000 stored tasks (1,000 of them left
 *   working, which the start settles) and 10,000 events.
 *
 * Options (argv `--name=value` or env `BENCH_NAME=value`):
 *   --calls=500        measured calls per store and path (after --warmup=30)
 *   --tasks=5000       tasks for the in-process memory measurement
 *   --stored=10000     stored tasks for the start-up measurement
 *   --starts=3         start-ups measured per file (the median is reported)
 *
 * Output: a markdown report on stdout (progress on stderr).
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { systemClock } from "../src/clock.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { EventSystem } from "../src/session/event-system.js";
import type { Store } from "../src/store/contracts.js";
import { openStore } from "../src/store/open.js";
import { TaskManager } from "../src/tasks/task-manager.js";
import { ROOT, startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { fmt, kb, percentile, ratio, table } from "./lib/stats.js";
import { option } from "./lib/options.js";

const opts = {
  warmup: option("warmup", 30),
  calls: option("calls", 500),
  tasks: option("tasks", 5000),
  stored: option("stored", 10_000),
  starts: option("starts", 3),
};
const started = performance.now();
const log = (msg: string) => process.stderr.write(`[bench:store ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --expose-gc (npm run bench:store does)");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-bench-store-"));
const EVERYTHING = { command: process.execPath, args: [everythingServerEntry(), "stdio"] };
const KINDS = ["memory", "sqlite"] as const;
type Kind = (typeof KINDS)[number];

function gatewayConfig(kind: Kind, label: string, extra: Record<string, unknown> = {}) {
  const store = kind === "memory" ? { kind: "memory" } : { kind: "sqlite", path: path.join(tmp, `${label}.db`) };
  const limit = opts.calls + opts.warmup + 200;
  return {
    mcpServers: { everything: EVERYTHING },
    gateway: {
      store,
      tasks: { maxTasksPerSession: limit, maxRetainedPerSession: limit, defaultTtlMs: 1_800_000, maxTtlMs: 1_800_000, completedRetentionMs: 1_800_000 },
      events: { maxEvents: 4 * limit, maxTotal: 8 * limit },
      ...extra,
    },
  };
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: "bench-store", version: "1.0.0" }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

const LONG = { timeout: 300_000 };
const ECHO = { server: "everything", tool: "echo", args: { message: "hi" } };

async function metaEcho(client: Client): Promise<void> {
  const r = (await client.callTool({ name: "execute_tool", arguments: { ...ECHO, timeout_ms: 30_000 } }, undefined, LONG)) as CallToolResult;
  if (r.isError) throw new Error(`execute_tool failed: ${JSON.stringify(r.content)}`);
}

async function taskEcho(client: Client): Promise<void> {
  const created = await client.request({ method: "tools/call", params: { name: "echo", arguments: { message: "hi" } } }, CreateTaskResultSchema, {
    task: { ttl: 600_000 },
    ...LONG,
  });
  const result = await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema, LONG);
  if (result.isError) throw new Error(`tasks/result: ${JSON.stringify(result.content)}`);
}

// ---------------------------------------------------------------------------
// 1. Per-call overhead (two gateway children, interleaved)
// ---------------------------------------------------------------------------

interface CallStats {
  samples: Record<"meta" | "task", number[]>;
  cpuPer1k: Record<"meta" | "task", number>;
}

async function perCall(): Promise<Record<Kind, CallStats>> {
  const gateways = {} as Record<Kind, GatewayProcess>;
  const meta = {} as Record<Kind, Client>;
  const transparent = {} as Record<Kind, Client>;
  for (const kind of KINDS) {
    gateways[kind] = await startGatewayProcess(gatewayConfig(kind, `calls-${kind}`), `store-${kind}`);
    meta[kind] = await connect(gateways[kind].url);
    transparent[kind] = await connect(`${gateways[kind].origin}/servers/everything/mcp`);
  }
  const out = {} as Record<Kind, CallStats>;
  for (const kind of KINDS) out[kind] = { samples: { meta: [], task: [] }, cpuPer1k: { meta: 0, task: 0 } };
  try {
    for (const [path, run] of [
      ["meta", (k: Kind) => metaEcho(meta[k])],
      ["task", (k: Kind) => taskEcho(transparent[k])],
    ] as const) {
      log(`per-call: ${path} (warm-up ${opts.warmup}, then ${opts.calls} per store, interleaved)`);
      for (let i = 0; i < opts.warmup; i++) for (const kind of KINDS) await run(kind);
      const cpu0 = Object.fromEntries(KINDS.map((k) => [k, gateways[k].cpuMs()])) as Record<Kind, number>;
      for (let i = 0; i < opts.calls; i++) {
        const order = i % 2 === 0 ? KINDS : [...KINDS].reverse();
        for (const kind of order) {
          const t0 = performance.now();
          await run(kind);
          out[kind].samples[path].push(performance.now() - t0);
        }
      }
      for (const kind of KINDS) out[kind].cpuPer1k[path] = ((gateways[kind].cpuMs() - cpu0[kind]) * 1000) / opts.calls;
    }
  } finally {
    for (const kind of KINDS) {
      await meta[kind].close().catch(() => undefined);
      await transparent[kind].close().catch(() => undefined);
      await gateways[kind].stop();
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// 2. Memory per task
// ---------------------------------------------------------------------------

function heap(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed + process.memoryUsage().external;
}

async function storeOf(kind: Kind, label: string): Promise<Store> {
  return openStore(kind === "memory" ? { kind: "memory" } : { kind: "sqlite", path: path.join(tmp, `${label}.db`) });
}

/** Heap per working and per ended task of a TaskManager over `kind` (the calls' own AbortControllers excluded). */
async function taskMemory(kind: Kind): Promise<{ working: number; ended: number }> {
  const store = await storeOf(kind, `heap-${kind}`);
  const n = opts.tasks;
  const events = new EventSystem("s1", { maxEvents: 4 * n, warningThreshold: 1, maxTotal: 8 * n }, store.events, systemClock, ulidish());
  const tm = new TaskManager(
    "s1",
    { defaultTtlMs: 1_800_000, maxTtlMs: 1_800_000, completedRetentionMs: 1_800_000, maxTasksPerSession: n + 1, maxRetainedPerSession: n + 1 },
    store.tasks,
    events,
    systemClock,
    ulidish("t"),
  );
  const aborts = Array.from({ length: n }, () => new AbortController());
  // Warm the code paths and the store's statements, then drop what they left.
  const warm = await tm.create({ server: "everything", toolName: "warm", toolArgs: {}, abort: new AbortController() });
  await tm.complete(warm.taskId, { content: [] });
  await events.takeNew();
  const base = heap();
  const ids: string[] = [];
  for (const abort of aborts) {
    ids.push((await tm.create({ server: "everything", toolName: "trigger-long-running-operation", toolArgs: { duration: 1200, steps: 1 }, abort })).taskId);
  }
  await events.takeNew(); // task_created events are delivered (their rows stay until the bound evicts them)
  const working = (heap() - base) / n;
  for (const id of ids) await tm.complete(id, { content: [{ type: "text", text: "ok" }] });
  await events.takeNew();
  const ended = (heap() - base) / n;
  await tm.close();
  await events.close();
  await store.close();
  return { working, ended };
}

// ---------------------------------------------------------------------------
// 3. Start-up with stored tasks
// ---------------------------------------------------------------------------

async function seed(file: string, tasks: number): Promise<void> {
  const store = await openStore({ kind: "sqlite", path: file });
  const now = Date.now();
  const limits = { maxPerSession: tasks, maxTotal: tasks * 2 };
  for (let i = 0; i < tasks; i++) {
    const sessionId = `session-${i % 100}`;
    const working = i % 10 === 0;
    const taskId = `01SEED${String(i).padStart(20, "0")}`;
    await store.tasks.create({
      taskId,
      sessionId,
      kind: "tool",
      server: "everything",
      toolName: "echo",
      toolArgs: { message: `m${i}` },
      status: working ? "working" : "completed",
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs: 1_800_000,
      expiresAt: now + 1_800_000,
      retainUntil: now + 3_600_000,
      ...(working ? {} : { result: { content: [{ type: "text", text: `Echo: m${i}` }] }, resultBytes: 40 }),
    });
    await store.events.append(
      sessionId,
      { id: `01EV${String(i).padStart(22, "0")}`, type: "task_created", server: "everything", createdAt: now, data: { taskId } },
      limits,
    );
  }
  await store.close();
}

/** ms from spawning `emceepee serve --store sqlite:<file>` until it prints that it listens. */
async function timeToListen(file: string): Promise<number> {
  const config = path.join(tmp, "startup.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: { everything: EVERYTHING } }));
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "src/cli/main.ts",
      "serve",
      "--config",
      config,
      "--port",
      "0",
      "--store",
      `sqlite:${file}`,
      "--no-upstream-check",
      "--log-level",
      "silent",
    ],
    { cwd: ROOT, env: { ...process.env, XDG_STATE_HOME: tmp }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  const ms = await new Promise<number>((resolve, reject) => {
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString("utf8");
      if (/listening on/.test(out)) resolve(performance.now() - t0);
    });
    child.stderr.on("data", (c: Buffer) => (out += c.toString("utf8")));
    child.once("exit", (code) => reject(new Error(`serve exited with ${code} before listening:\n${out}`)));
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  await exited;
  return ms;
}

async function startup(): Promise<{ empty: number; full: number; stored: number }> {
  const full = path.join(tmp, "startup-full.db");
  log(`start-up: seeding ${opts.stored} tasks and events`);
  await seed(full, opts.stored);
  const times: Record<"empty" | "full", number[]> = { empty: [], full: [] };
  for (let i = 0; i < opts.starts; i++) {
    const empty = path.join(tmp, `startup-empty-${i}.db`);
    // A copy per start: the first start settles the working tasks; each start should see the same file.
    const copy = path.join(tmp, `startup-full-${i}.db`);
    fs.copyFileSync(full, copy);
    log(`start-up ${i + 1}/${opts.starts}`);
    times.empty.push(await timeToListen(empty));
    times.full.push(await timeToListen(copy));
  }
  return { empty: percentile(times.empty, 50), full: percentile(times.full, 50), stored: opts.stored };
}

// ---------------------------------------------------------------------------

function ulidish(prefix = "e"): () => string {
  let n = 0;
  return () => `${prefix}${String(++n).padStart(25, "0")}`;
}

async function main(): Promise<void> {
  const calls = await perCall();
  log("memory per task (in process)");
  const heapPer = {} as Record<Kind, { working: number; ended: number }>;
  for (const kind of KINDS) heapPer[kind] = await taskMemory(kind);
  const start = await startup();

  const p = (kind: Kind, path: "meta" | "task", q: number) => percentile(calls[kind].samples[path], q);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const row = (label: string, m: number, s: number, digits = 3) => [label, fmt(m, digits), `${fmt(s, digits)}${ratio(s, m)}`];
  const out = [
    "### Store: SQLite vs memory",
    "",
    table(
      ["metric", "memory", "sqlite"],
      [
        row(`meta face \`execute_tool\` echo, p50 ms (${opts.calls} calls each, interleaved)`, p("memory", "meta", 50), p("sqlite", "meta", 50)),
        row("… p99 ms", p("memory", "meta", 99), p("sqlite", "meta", 99)),
        row("… mean ms", mean(calls.memory.samples.meta), mean(calls.sqlite.samples.meta)),
        row("… gateway CPU per 1k calls, ms", calls.memory.cpuPer1k.meta, calls.sqlite.cpuPer1k.meta, 0),
        row("transparent task path (task-augmented `tools/call` echo + `tasks/result`), p50 ms", p("memory", "task", 50), p("sqlite", "task", 50)),
        row("… p99 ms", p("memory", "task", 99), p("sqlite", "task", 99)),
        row("… mean ms", mean(calls.memory.samples.task), mean(calls.sqlite.samples.task)),
        row("… gateway CPU per 1k calls, ms", calls.memory.cpuPer1k.task, calls.sqlite.cpuPer1k.task, 0),
        [`heap per stored working task (TaskManager + store, in process, ${opts.tasks} tasks)`, kb(heapPer.memory.working), kb(heapPer.sqlite.working)],
        [`heap per ended task (tiny results)`, kb(heapPer.memory.ended), kb(heapPer.sqlite.ended)],
        [`\`emceepee serve\` start until listening, ms (median of ${opts.starts})`, "—", `${fmt(start.empty, 0)} (empty file)`],
        [
          `… with ${start.stored.toLocaleString("en-US")} stored tasks (10% left working, settled at start) and as many events`,
          "—",
          `${fmt(start.full, 0)}${ratio(start.full, start.empty)}`,
        ],
      ],
    ),
    "",
    `- machine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim()}), ${fmt(os.totalmem() / 1048576, 0)} MB RAM, ${os.type()} ${os.release()}`,
    `- node ${process.version}; run ${new Date().toISOString()}; total ${fmt((performance.now() - started) / 1000, 0)} s`,
    `- options: ${Object.entries(opts)
      .map(([k, v]) => `${k}=${v}`)
      .join(", ")}`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

main()
  .catch((err: unknown) => {
    process.stderr.write(`bench:store failed: ${String(err instanceof Error ? err.stack : err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => fs.rmSync(tmp, { recursive: true, force: true }));
