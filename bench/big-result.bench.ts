/**
 * Large upstream answers (issue 20, design LM-6). Two parts, in one run:
 * 1. Reading one long stdio line in 64 KiB chunks: the SDK's ReadBuffer
 *    (concatenates and rescans on every chunk) against our LineReader, in this
 *    process, CPU time per size.
 * 2. Through `emceepee serve` (a child process, stdio fixture upstream in
 *    session mode): while session A's call returns `size` bytes, session B
 *    calls `echo` back to back; B's slowest echo and A's call time, against
 *    B's echo on an idle gateway. A is a raw HTTP client that only counts the
 *    bytes (an SDK client would parse the answer in this process and stall
 *    B's timing itself). Ratios only — the machine is shared.
 * Options: --sizes-mb=1,4,9 (part 1 also 16), --echoes=20.
 * Run: npm run bench:bigresult
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ReadBuffer, deserializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import { LineReader } from "../src/upstream/line-reader.js";
import { option } from "./lib/options.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const FIXTURE = path.join(ROOT, "test/fixtures/big-result-server.ts");
const MB = 1_000_000;
const sizesArg = process.argv.find((a) => a.startsWith("--sizes-mb="))?.slice(11) ?? process.env.BENCH_SIZES_MB ?? "1,4,9";
const sizes = sizesArg.split(",").map(Number);
const echoes = option("echoes", 20);

function line(bytes: number): Buffer {
  const text = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "x".repeat(bytes) }] } });
  return Buffer.from(text + "\n");
}

function chunked(buf: Buffer, size = 64 * 1024): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size));
  return out;
}

function readerTimes(bytes: number): { sdk: number | string; ours: number } {
  const chunks = chunked(line(bytes));
  let sdk: number | string;
  const buffer = new ReadBuffer();
  let t = performance.now();
  try {
    for (const c of chunks) {
      buffer.append(c);
      while (buffer.readMessage() !== null);
    }
    sdk = performance.now() - t;
  } catch (err) {
    sdk = `throws (${(err as Error).message})`;
  }
  let got = 0;
  const reader = new LineReader({ maxLineBytes: 32 * 1024 * 1024, onLine: (l) => (got += deserializeMessage(l) ? 1 : 0), onOversized: () => undefined });
  t = performance.now();
  for (const c of chunks) reader.push(c);
  const ours = performance.now() - t;
  if (got !== 1) throw new Error("LineReader lost the line");
  return { sdk, ours };
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: "bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** Session A: initialize by hand, then `tools/call big` whose answer is drained unparsed; resolves with the bytes read. */
async function rawSession(url: string): Promise<(bytes: number) => Promise<number>> {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  const post = (body: unknown, session?: string) =>
    fetch(url, {
      method: "POST",
      headers: { ...headers, ...(session ? { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" } : {}) },
      body: JSON.stringify(body),
    });
  const init = await post({
    jsonrpc: "2.0",
    id: 0,
    method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
  });
  const session = init.headers.get("mcp-session-id")!;
  await init.text();
  await (await post({ jsonrpc: "2.0", method: "notifications/initialized" }, session)).text();
  let id = 1;
  return async (bytes) => {
    const response = await post({ jsonrpc: "2.0", id: id++, method: "tools/call", params: { name: "big", arguments: { bytes } } }, session);
    let read = 0;
    for await (const chunk of response.body!) read += (chunk as Uint8Array).length;
    return read;
  };
}

async function echoMs(client: Client): Promise<number> {
  const t = performance.now();
  await client.callTool({ name: "echo", arguments: { message: "x" } });
  return performance.now() - t;
}

async function throughGateway(): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-bigresult-"));
  const config = path.join(dir, "config.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: { big: { command: process.execPath, args: ["--import", "tsx", FIXTURE], cwd: ROOT } } }));
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", "serve", "--config", config, "--port", "0", "--log-level", "silent", "--store", "memory"],
    {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const meta = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`gateway exited with ${code}`)));
  });
  const url = new URL("/servers/big/mcp", meta).href;
  const rows: string[] = [];
  try {
    const a = await rawSession(url);
    const b = await connect(url);
    for (let i = 0; i < 5; i++) await echoMs(b);
    const idle: number[] = [];
    for (let i = 0; i < echoes; i++) idle.push(await echoMs(b));
    idle.sort((x, y) => x - y);
    const idleP50 = idle[Math.floor(idle.length / 2)]!;
    for (const mb of sizes) {
      let done = false;
      const t = performance.now();
      const big = a(mb * MB).finally(() => (done = true));
      const during: number[] = [];
      while (!done) during.push(await echoMs(b));
      if ((await big) < mb * MB) throw new Error(`session A got less than ${mb} MB`);
      const callMs = performance.now() - t;
      const worst = Math.max(...during);
      rows.push(
        `| ${mb} MB | ${callMs.toFixed(0)} ms | ${during.length} | ${worst.toFixed(1)} ms (×${(worst / idleP50).toFixed(1)} of idle p50 ${idleP50.toFixed(1)} ms) |`,
      );
    }
    await b.close();
  } finally {
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

console.log("## Reading one stdio line in 64 KiB chunks (CPU in this process)\n");
console.log("| line | SDK ReadBuffer | LineReader | ratio |\n| --- | --- | --- | --- |");
for (const mb of [...sizes, 16]) {
  const { sdk, ours } = readerTimes(mb * MB);
  const ratio = typeof sdk === "number" ? `×${(sdk / ours).toFixed(1)}` : "—";
  console.log(`| ${mb} MB | ${typeof sdk === "number" ? `${sdk.toFixed(1)} ms` : sdk} | ${ours.toFixed(1)} ms | ${ratio} |`);
}
console.log("\n## Through emceepee serve: another session's echo while a big stdio result arrives\n");
console.log("| result | big call | echoes meanwhile | slowest echo meanwhile |\n| --- | --- | --- | --- |");
for (const row of await throughGateway()) console.log(row);
