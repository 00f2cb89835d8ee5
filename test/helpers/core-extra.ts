/**
 * Extra helpers for the gateway-core integration tests (meta-core, cli):
 * a direct SDK client to server-everything for side-by-side comparison,
 * server-everything as a Streamable HTTP child process, raw HTTP requests,
 * and envelope/event parsing.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { everythingServerEntry } from "../../src/config/demo.js";
import { cliNodeArgs } from "./cli-build.js";
import { block, blocks, call, drainEvents } from "./gateway.js";

/** The capabilities the gateway's upstream client declares (src/upstream/connection.ts). */
export const GATEWAY_UPSTREAM_CAPABILITIES = {
  elicitation: { form: {}, url: {} },
  sampling: {},
  tasks: { list: {}, cancel: {}, requests: { elicitation: { create: {} }, sampling: { createMessage: {} } } },
} as const;

/** A plain SDK client connected straight to a fresh server-everything over stdio. */
export async function connectDirectEverything(): Promise<Client> {
  const client = new Client({ name: "direct-client", version: "1.0.0" }, { capabilities: GATEWAY_UPSTREAM_CAPABILITIES });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [everythingServerEntry(), "stdio"], stderr: "ignore" }));
  return client;
}

/** The tool calls whose results must pass through the gateway unchanged. */
export const EVERYTHING_CALLS: ReadonlyArray<{ tool: string; args: Record<string, unknown> }> = [
  { tool: "echo", args: { message: "hello through the gateway ✓" } },
  { tool: "get-sum", args: { a: 19, b: 23.5 } },
  { tool: "get-tiny-image", args: {} },
  { tool: "get-structured-content", args: { location: "Chicago" } },
  // An upstream-side validation failure is a result too, and must also be passed through as is.
  { tool: "get-sum", args: { a: "nineteen", b: 1 } },
];

export async function callDirect(client: Client, tool: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name: tool, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult;
}

/** JSON round trip: what a value looks like after crossing the wire. */
export function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/**
 * Asserts that `gatewayClient` (any downstream transport) sees server-everything
 * exactly as `direct` does: the same tool definitions from list_tools and the
 * same CallToolResult for every call in EVERYTHING_CALLS.
 */
export async function assertSameAsDirect(gatewayClient: Client, server: string, direct: Client): Promise<void> {
  const directTools = (await direct.listTools()).tools;
  // Every tool on one page (list_tools pages: default limit 10).
  const listed = await call(gatewayClient, "list_tools", { server, limit: 500 });
  assert.notEqual(listed.isError, true, `list_tools failed: ${JSON.stringify(listed.content)}`);
  const rows = block<Array<{ server: string; tools?: Tool[]; error?: string }>>(listed, "servers");
  assert.ok(rows, `list_tools answered without a servers block: ${JSON.stringify(listed.content)}`);
  assert.equal(rows.length, 1);
  assert.equal(rows[0]?.server, server);
  assert.deepEqual(rows[0]?.tools, wire(directTools), "list_tools must give the upstream's tool definitions unchanged");

  for (const { tool, args } of EVERYTHING_CALLS) {
    const expected = await callDirect(direct, tool, args);
    await drainEvents(gatewayClient);
    const got = await call(gatewayClient, "execute_tool", { server, tool, args });
    assert.deepEqual(got, expected, `execute_tool ${tool} ${JSON.stringify(args)} must equal the direct result`);
  }
}

/**
 * A free TCP port on 127.0.0.1 (closed again before returning), for a child
 * told `--port`. Picked at random below Linux's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range): a port the kernel handed out
 * (`listen(0)`) is handed out again to the next outgoing connection or
 * `listen(0)` of any process, which then held it before the child bound it
 * (CI: "127.0.0.1:34835: port already in use"). Below that range only another
 * pick can collide: never one of this process's own (kept), rarely another
 * test process's (about 1 in 10,000 a pair).
 */
export async function freePort(): Promise<number> {
  const [low, high] = freePortRange();
  for (let tries = 1; ; tries++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (!handedOut.has(port) && (await bindable(port))) {
      handedOut.add(port);
      return port;
    }
    if (tries >= 50) throw new Error(`freePort: ${tries} random ports in ${low}–${high - 1} were all taken`);
  }
}
/** Ports this process's freePort gave (a child may not have bound one yet). */
const handedOut = new Set<number>();

/** [low, high): the 10,000 ports below the kernel's ephemeral range (32768 by default; a range starting lower is not used). */
function freePortRange(): [number, number] {
  let ephemeralLow = 32_768;
  try {
    const first = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(first) && first >= 11_024) ephemeralLow = first;
  } catch {
    // not Linux: the default range
  }
  return [ephemeralLow - 10_000, ephemeralLow];
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

export interface ChildServer {
  url: string;
  port: number;
  child: ChildProcess;
  output(): string;
  close(): Promise<void>;
}

/** Waits for a child to exit (or returns at once if it already has); the default bound is generous for a loaded machine. */
export function waitExit(child: ChildProcess, timeoutMs = 60_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit within ${timeoutMs}ms`)), timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

/** Stops a child we started: SIGTERM, then SIGKILL if it lingers. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  try {
    await waitExit(child, 5_000);
  } catch {
    child.kill("SIGKILL");
    await waitExit(child, 5_000).catch(() => undefined);
  }
}

/** server-everything in Streamable HTTP mode on `port` (default: a free one); resolves once it listens. */
export async function startEverythingHttp(timeoutMs = 90_000, fixedPort?: number): Promise<ChildServer> {
  const port = fixedPort ?? (await freePort());
  const child = spawn(process.execPath, [everythingServerEntry(), "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (c: Buffer) => (out += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (out += c.toString("utf8")));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server-everything (streamableHttp) did not listen within ${timeoutMs}ms:\n${out}`)), timeoutMs);
      const onData = () => {
        if (out.includes(`listening on port ${port}`)) {
          clearTimeout(timer);
          child.stderr?.off("data", onData);
          resolve();
        }
      };
      child.stderr?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`server-everything (streamableHttp) exited with ${code}:\n${out}`));
      });
    });
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return { url: `http://127.0.0.1:${port}/mcp`, port, child, output: () => out, close: () => stopChild(child) };
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP request with full control over headers (including Host). */
export function rawRequest(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<RawResponse> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { hostname: u.hostname, port: u.port, path: u.pathname + u.search, method: init.method ?? "POST", headers: init.headers ?? {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error(`request to ${url} timed out`)));
    req.on("error", reject);
    if (init.body !== undefined) req.write(init.body);
    req.end();
  });
}

export const MCP_POST_HEADERS = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" } as const;

/** The JSON-RPC messages of a response body: plain JSON or the data lines of an SSE stream. */
export function jsonRpcMessages(res: RawResponse): Array<Record<string, any>> {
  const type = String(res.headers["content-type"] ?? "");
  if (type.includes("text/event-stream")) {
    return res.body
      .split(/\r?\n/)
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).trim())
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as Record<string, any>);
  }
  const parsed = JSON.parse(res.body) as unknown;
  return (Array.isArray(parsed) ? parsed : [parsed]) as Array<Record<string, any>>;
}

export function initializeBody(id: number | string = 1, protocolVersion = "2025-06-18"): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: { protocolVersion, capabilities: {}, clientInfo: { name: "raw-client", version: "1.0.0" } },
  });
}

/** Opens a session with a raw initialize POST; returns its Mcp-Session-Id. */
export async function rawInitialize(url: string): Promise<string> {
  const res = await rawRequest(url, { headers: { ...MCP_POST_HEADERS }, body: initializeBody() });
  assert.equal(res.status, 200, `initialize failed: ${res.status} ${res.body}`);
  const id = res.headers["mcp-session-id"];
  assert.equal(typeof id, "string", "initialize must return an Mcp-Session-Id header");
  const messages = jsonRpcMessages(res);
  assert.equal(messages[0]?.result?.serverInfo?.name, "emceepee");
  return id as string;
}

export interface EnvelopeEvent {
  id: string;
  type: string;
  server: string;
  created_at: string;
  data: Record<string, any>;
}

/** The events_since_last_response of a meta-tool response ([] when none). */
export function eventsOf(result: CallToolResult): EnvelopeEvent[] {
  const found: EnvelopeEvent[] = [];
  for (const b of blocks(result)) {
    if (b && typeof b === "object" && "events_since_last_response" in b) {
      found.push(...((b as { events_since_last_response: EnvelopeEvent[] }).events_since_last_response ?? []));
    }
  }
  return found;
}

/** The first text block of a result. */
export function firstText(result: CallToolResult): string {
  const first = result.content[0];
  return first && first.type === "text" ? first.text : "";
}

/** Polls `probe` until it returns a value that is not undefined. */
export async function pollFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() >= end) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Whether a process with this pid still exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export interface ServerRow {
  name: string;
  transport: string;
  target: string;
  status: string;
  connected: boolean;
  last_error?: string;
  server_info?: { name: string; version: string };
}

export async function listServers(client: Client): Promise<ServerRow[]> {
  const result = await call(client, "list_servers");
  assert.notEqual(result.isError, true, `list_servers failed: ${JSON.stringify(result.content)}`);
  const servers = block<ServerRow[]>(result, "servers");
  assert.ok(Array.isArray(servers), `list_servers answered without a servers array: ${JSON.stringify(result.content)}`);
  return servers;
}

/** Node arguments that run the CLI: the bundle with source maps (cli-build.ts; EMCEEPEE_TEST_CLI=modules or =tsx for the others). */
export const CLI_ARGS: readonly string[] = cliNodeArgs();

let stateRoot: string | undefined;
let stateDirs = 0;

/**
 * The environment of a CLI child: its own XDG_STATE_HOME (a fresh folder per
 * child, removed when the test process exits), so `serve`'s default state file
 * is never the user's and two children never share one; `env` on top.
 */
export function cliEnv(env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  if (!stateRoot) {
    const root = mkdtempSync(path.join(os.tmpdir(), "emceepee-test-state-"));
    stateRoot = root;
    process.once("exit", () => rmSync(root, { recursive: true, force: true }));
  }
  return { ...process.env, XDG_STATE_HOME: path.join(stateRoot, String(++stateDirs)), ...env };
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `emceepee <args>` to completion (killed after timeoutMs). With
 * `stopWhenStdout`, a child whose stdout matches it is stopped at once (for
 * runs that are expected to fail but might start serving instead).
 */
export async function runCli(
  cwd: string,
  args: string[],
  options: { timeoutMs?: number; stopWhenStdout?: RegExp; env?: NodeJS.ProcessEnv } = {},
): Promise<CliRun> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const child = spawn(process.execPath, [...CLI_ARGS, ...args], { cwd, env: cliEnv(options.env), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => {
    stdout += c.toString("utf8");
    if (options.stopWhenStdout?.test(stdout)) child.kill("SIGTERM");
  });
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  try {
    const { code, signal } = await waitExit(child, timeoutMs);
    await closed;
    return { code, signal, stdout, stderr };
  } catch (err) {
    await stopChild(child);
    throw new Error(`${String(err)}\nstdout: ${stdout}\nstderr: ${stderr}`);
  }
}

export interface RunningCli {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
}

/** The JSON log lines (pino, one per line on stderr) whose `msg` is `msg`. */
export function logLines(stderr: string, msg: string): Array<Record<string, any>> {
  return stderr.split("\n").flatMap((line) => {
    try {
      const parsed = JSON.parse(line) as Record<string, any>;
      return parsed.msg === msg ? [parsed] : [];
    } catch {
      return [];
    }
  });
}

/** Starts `emceepee serve <args>` (environment: cliEnv(env)) and resolves with the URL it prints once listening. */
export async function startCliServe(cwd: string, args: string[], timeoutMs = 120_000, env?: NodeJS.ProcessEnv): Promise<RunningCli> {
  const child = spawn(process.execPath, [...CLI_ARGS, "serve", ...args], { cwd, env: cliEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`emceepee serve printed no URL within ${timeoutMs}ms`)), timeoutMs);
      const onData = () => {
        const m = /listening on (http:\/\/\S+)/.exec(stdout);
        if (m?.[1]) {
          clearTimeout(timer);
          child.stdout?.off("data", onData);
          resolve(m[1]);
        }
      };
      child.stdout?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`emceepee serve exited with ${code} before listening`));
      });
    });
    return { child, url, stdout: () => stdout, stderr: () => stderr };
  } catch (err) {
    await stopChild(child);
    throw new Error(`${String(err)}\nstdout: ${stdout}\nstderr: ${stderr}`);
  }
}
