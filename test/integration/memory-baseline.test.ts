/**
 * What a long-running gateway keeps (issue 29): an in-process gateway with
 * server-everything upstreams (real processes in the memory-store run, served
 * in process in the SQLite run) runs many session lifetimes — meta-face
 * sessions that call, promote, answer an elicitation and end with DELETE;
 * transparent sessions that call and either DELETE or are dropped (and expire
 * as one-shot) — and afterwards everything it holds returns to the baseline
 * taken after a warm-up: no live session, every Session object collected (a
 * WeakRef each, after a full GC), the injected clock's live timers, the
 * process's listeners and handles, and the entries of every Map and Set
 * reachable from the gateway's context (session manager, registry, store).
 * The soak itself is a bench (bench/soak.bench.ts).
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { systemClock, type Clock, type TimerHandle } from "../../src/clock.js";
import type { Session } from "../../src/session/session.js";
import { pollFor } from "../helpers/core-extra.js";
import { everythingStdio, startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

/** systemClock, counting the timers set through it that have neither fired nor been cleared. */
function countingClock(): Clock & { live(): number } {
  const live = new Set<TimerHandle>();
  return {
    now: () => systemClock.now(),
    setTimeout(fn, ms) {
      const handle: TimerHandle = systemClock.setTimeout(() => {
        live.delete(handle);
        fn();
      }, ms);
      live.add(handle);
      return handle;
    },
    clearTimeout(handle) {
      if (handle !== undefined) live.delete(handle);
      systemClock.clearTimeout(handle);
    },
    live: () => live.size,
  };
}

/** Entries of every Map and Set reachable from `root` through own properties (not through functions). */
function entries(root: unknown): number {
  const seen = new Set<object>();
  let n = 0;
  const walk = (v: unknown, depth: number): void => {
    if (v === null || typeof v !== "object" || seen.has(v) || depth > 12) return;
    seen.add(v);
    if (v instanceof Map) {
      n += v.size;
      for (const [k, x] of v) {
        walk(k, depth + 1);
        walk(x, depth + 1);
      }
      return;
    }
    if (v instanceof Set) {
      n += v.size;
      for (const x of v) walk(x, depth + 1);
      return;
    }
    if (v instanceof WeakMap || v instanceof WeakSet || v instanceof Promise || ArrayBuffer.isView(v)) return;
    for (const key of Object.getOwnPropertyNames(v)) {
      const d = Object.getOwnPropertyDescriptor(v, key);
      // Getters are not run: they may open or compute things.
      if (d && "value" in d) walk(d.value, depth + 1);
    }
  };
  walk(root, 0);
  return n;
}

function listeners(): number {
  return process.eventNames().reduce((sum, name) => sum + process.listenerCount(name), 0);
}

/** Active handles by kind, timers excluded (the SDK's request timeouts come and go with calls). */
function handles(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) if (kind !== "Timeout" && kind !== "Immediate") out[kind] = (out[kind] ?? 0) + 1;
  return out;
}

interface Census {
  sessions: number;
  timers: number;
  listeners: number;
  entries: number;
  handles: Record<string, number>;
}

function census(tg: TestGateway, clock: { live(): number }): Census {
  return { sessions: tg.gateway.context.sessions.size, timers: clock.live(), listeners: listeners(), entries: entries(tg.gateway.context), handles: handles() };
}

/**
 * The same sessions; no more timers, listeners, map entries or handles of any kind than at the baseline. Fewer is no
 * leak: keep-alive sockets close, a map entry made before the baseline may be swept after it (CI saw 8 against 9), and
 * the warm pool trims to its demand, so its spare process goes with its timer and entry (CI on Node 24 saw timers 3
 * against 4, entries 11 against 12, one ProcessWrap fewer).
 */
function atBaseline(now: Census, baseline: Census): boolean {
  const noMore = (["timers", "listeners", "entries"] as const).every((k) => now[k] <= baseline[k]);
  return now.sessions === baseline.sessions && noMore && Object.entries(now.handles).every(([kind, n]) => n <= (baseline.handles[kind] ?? 0));
}

async function connect(url: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: "memory-baseline", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

async function meta(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
  assert.notEqual(r.isError, true, `${name}: ${JSON.stringify(r.content)}`);
  return r;
}

const field = <T>(r: CallToolResult, key: string): T | undefined => (r.structuredContent as Record<string, T> | undefined)?.[key];

/** A meta-face session: an echo, a promoted call and its result, an elicitation answered, then DELETE. */
async function metaLifetime(url: string, n: number): Promise<void> {
  const { client, transport } = await connect(url);
  await meta(client, "execute_tool", { server: "everything", tool: "echo", args: { message: `m${n}` } });
  const long = field<string>(
    await meta(client, "execute_tool", { server: "everything", tool: "trigger-long-running-operation", args: { duration: 0.1, steps: 1 }, timeout_ms: 0 }),
    "task_id",
  );
  assert.ok(long, "the call was promoted");
  await meta(client, "get_task_result", { task_id: long, timeout_ms: 60_000 });
  const asking = field<string>(
    await meta(client, "execute_tool", { server: "everything", tool: "trigger-elicitation-request", args: {}, timeout_ms: 0 }),
    "task_id",
  );
  assert.ok(asking, "the elicitation call was promoted");
  const requestId = await pollFor(
    async () => field<Array<{ requestId: string }>>(await meta(client, "get_elicitations", {}), "elicitations")?.[0]?.requestId,
    "the elicitation to be pending",
  );
  const answer = n % 2 ? { action: "decline" } : { action: "accept", content: { name: "Ada", check: true, integer: 7 } };
  await meta(client, "respond_to_elicitation", { request_id: requestId, ...answer });
  await meta(client, "get_task_result", { task_id: asking, timeout_ms: 60_000 });
  await transport.terminateSession();
  await client.close();
}

/**
 * A transparent session: one tools/call and a meta face attached to it (`?session=`, left without DELETE: it ends
 * with the session), then DELETE — or, `drop`, the client just goes (one-shot expiry ends it).
 */
async function transparentLifetime(url: string, metaUrl: string, n: number, drop: boolean): Promise<void> {
  const { client, transport } = await connect(url);
  const r = (await client.callTool({ name: "echo", arguments: { message: `t${n}` } })) as CallToolResult;
  assert.notEqual(r.isError, true, JSON.stringify(r.content));
  const attached = await connect(`${metaUrl}?session=${encodeURIComponent(transport.sessionId!)}`);
  await meta(attached.client, "get_elicitations", {});
  await attached.client.close();
  if (!drop) await transport.terminateSession();
  await client.close();
}

async function lifetimes(tg: TestGateway, from: number, count: number): Promise<void> {
  const origin = new URL(tg.url).origin;
  for (let n = from; n < from + count; n++) {
    await Promise.all([metaLifetime(tg.url, n), transparentLifetime(`${origin}/servers/everything/mcp`, tg.url, n, n % 2 === 1)]);
  }
}

/** The label sets of every series /metrics shows (a series per line, values dropped). */
async function metricSeries(url: string): Promise<Set<string>> {
  const text = await (await fetch(new URL("/metrics", url))).text();
  return new Set(
    text
      .split("\n")
      .filter((l) => l && !l.startsWith("#"))
      .map((l) => l.slice(0, l.lastIndexOf(" "))),
  );
}

// The SQLite run also traces (spans to an in-memory exporter): spans and their contexts must not keep sessions either.
for (const store of ["memory", "sqlite"] as const) {
  describe(`memory baseline (${store} store${store === "sqlite" ? ", tracing" : ""})`, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-memory-baseline-"));
    let tg: TestGateway | undefined;
    after(async () => {
      await tg?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    test("many session lifetimes leave sessions, timers, listeners, handles and map entries at their baseline", async () => {
      const clock = countingClock();
      const exporter = new InMemorySpanExporter();
      // The memory run spawns real server-everything processes (their handles and the warm pool's are in the census);
      // the SQLite run serves it in process (the store's and the spans' share of the gateway's state is what it adds).
      const inProc = store === "sqlite";
      tg = await (inProc ? startInProcessGateway : startGateway)(
        {
          mcpServers: { everything: inProc ? inProcess("everything") : everythingStdio() },
          gateway: {
            store: store === "sqlite" ? { kind: "sqlite", path: path.join(dir, "state.db") } : { kind: "memory" },
            sessions: { oneShotIdleMs: 3_000, sweepIntervalMs: 200 },
          },
        },
        { clock, ...(store === "sqlite" ? { tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }) } : {}) },
      );
      const sessions: Array<WeakRef<Session>> = [];
      tg.gateway.context.sessions.observe((c) => {
        const s = c.type === "session_started" ? tg?.gateway.context.sessions.get(c.sessionId) : undefined;
        if (s) sessions.push(new WeakRef(s));
      });
      const settled = async (what: string, baseline?: Census): Promise<Census> => {
        let last: Census | undefined;
        try {
          return await pollFor(
            async () => {
              gc();
              const now = census(tg!, clock);
              last = now;
              if (now.sessions !== 0) return undefined;
              if (baseline && !atBaseline(now, baseline)) return undefined;
              return now;
            },
            what,
            60_000,
            250,
          );
        } catch (err) {
          throw new Error(`${(err as Error).message}\nbaseline: ${JSON.stringify(baseline)}\nnow:      ${JSON.stringify(last)}`);
        }
      };
      // Warm-up: the upstream spawned once (and the warm pool filled), the SDK's and the store's first-use state made.
      await lifetimes(tg, 0, 2);
      const baseline = await settled("the warm-up sessions to end");
      const seriesBefore = await metricSeries(tg.url);
      const before = sessions.length;
      // Five more of each kind (both parities: DELETE and drop): a Session kept past its end fails this with 5 as with 10
      // (a deliberate leak in SessionManager.destroy, tried 27 Nov 2026: "14 of 14 ended sessions are still in memory").
      await lifetimes(tg, 2, 5);
      assert.equal(sessions.length - before, 10, "10 more sessions started");
      await settled("sessions, timers, listeners, handles and map entries back at their baseline", baseline);
      // Metrics' label sets do not grow with sessions (no session or task id in a label): the same series as after the warm-up.
      // A store operation seen for the first time later (sessions.touch is throttled by time) is one more series of a fixed
      // set (its duration and its error count), not growth: allowed when its only labels are the store and an operation name (no id could match).
      // The same for a kind of GC first seen later (prom-client's default nodejs_gc_duration_seconds, by kind), and for a
      // kind of libuv handle or request in flight at the scrape (nodejs_active_*{type}: e.g. a socket's ShutdownWrap while a
      // connection ends, seen on a loaded machine; leaked handles are the census's to find, above).
      const fixedSet =
        /^(emceepee_store_operation_duration_seconds_(bucket|sum|count)\{store="[a-z]+",operation="[a-z.]+"(,le="[^"]+")?\}|emceepee_store_errors_total\{store="[a-z]+",operation="[a-z.]+"\}|nodejs_gc_duration_seconds_(bucket|sum|count)\{(le="[^"]+",)?kind="[a-z]+"\}|nodejs_active_(resources|requests|handles)\{type="[A-Za-z]+"\})$/;
      const grown = [...(await metricSeries(tg.url))].filter((l) => !seriesBefore.has(l) && !fixedSet.test(l));
      assert.deepEqual(grown, [], "no new metric series after 5 more lifetimes of the same kinds");
      exporter.reset();
      await pollFor(
        async () => {
          gc();
          return sessions.every((s) => s.deref() === undefined) ? true : undefined;
        },
        "every ended Session to be garbage-collected",
        60_000,
        250,
      ).catch(() => assert.fail(`${sessions.filter((s) => s.deref() !== undefined).length} of ${sessions.length} ended sessions are still in memory`));
    });
  });
}
