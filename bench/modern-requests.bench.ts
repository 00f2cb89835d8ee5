/**
 * 2026-07-28 requests one after another (`node --import tsx bench/modern-requests.bench.ts`, ADR 0058): a stateless
 * `tools/call echo` on `/servers/everything/mcp`, `calls` times, each timed from `fetch` to the whole answer, through
 * `emceepee serve` with a stdio server-everything in session mode and in shared mode (the reference: one connection
 * for everyone). With `--before=<dir>` (another checkout beside a node_modules symlink) its gateway is measured too,
 * in the same rounds. Options (argv `--name=value` or env `BENCH_NAME=value`): --calls=20, --rounds=3, --before.
 * Output: markdown on stdout, progress on stderr. Every process it starts is stopped.
 */
import { performance } from "node:perf_hooks";
import { everythingServerEntry } from "../src/config/demo.js";
import { startGatewayProcess } from "./lib/gateway-process.js";
import { option } from "./lib/options.js";
import { fmt, percentile, table } from "./lib/stats.js";

const calls = option("calls", 20);
const rounds = option("rounds", 3);
const before = process.argv.find((a) => a.startsWith("--before="))?.slice("--before=".length) ?? process.env.BENCH_BEFORE;

const ENVELOPE = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1" },
};

async function call(url: string, id: number): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2026-07-28",
      "Mcp-Method": "tools/call",
      "Mcp-Name": "echo",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "echo", arguments: { message: "hi" }, _meta: ENVELOPE } }),
  });
  const text = await res.text();
  if (res.status !== 200 || !text.includes("Echo: hi")) throw new Error(`call ${id}: ${res.status} ${text.slice(0, 300)}`);
  return performance.now() - t0;
}

/** First call, then the median and p90 of the rest (ms). */
async function measure(sharing: "session" | "shared", root: string | undefined, label: string): Promise<{ first: number; p50: number; p90: number }> {
  const config = { mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"], sharing } } };
  const gw = await startGatewayProcess(config, label, "silent", {}, [], ...(root ? [root] : []));
  try {
    const url = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    const times: number[] = [];
    for (let i = 0; i < calls; i++) times.push(await call(url, i));
    const rest = times.slice(1);
    return { first: times[0]!, p50: percentile(rest, 50), p90: percentile(rest, 90) };
  } finally {
    await gw.stop();
  }
}

const modes: Array<{ name: string; sharing: "session" | "shared"; root?: string }> = [
  { name: "session", sharing: "session" },
  ...(before ? [{ name: "session (before)", sharing: "session" as const, root: before }] : []),
  { name: "shared", sharing: "shared" },
];
const rows: string[][] = [];
for (let r = 1; r <= rounds; r++) {
  const results = new Map<string, { first: number; p50: number; p90: number }>();
  for (const m of r % 2 === 0 ? [...modes].reverse() : modes) {
    process.stderr.write(`round ${r}: ${m.name}\n`);
    results.set(m.name, await measure(m.sharing, m.root, m.name.replace(/\W+/g, "-")));
  }
  const shared = results.get("shared")!.p50;
  for (const m of modes) {
    const x = results.get(m.name)!;
    rows.push([String(r), m.name, fmt(x.first, 0), fmt(x.p50, 1), fmt(x.p90, 1), `×${fmt(x.p50 / shared, 2)}`]);
  }
}
console.log(`${calls} stateless tools/call echo one after another, ${rounds} rounds\n`);
console.log(table(["round", "gateway", "first call ms", "later calls p50 ms", "p90 ms", "p50 × shared"], rows));
