/**
 * GroupStdioClientTransport: the client side of an MCP stdio connection, the
 * upstream leading its own process group (replaces the SDK's
 * StdioClientTransport). See docs/design/upstreams-and-reliability.md,
 * "How the code keeps it".
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { PassThrough } from "node:stream";
import { serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { JSONRPCMessageSchema, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../errors.js";
import { errorResponseFor } from "../mcp/error-response.js";
import { reapGroup, signalGroup, waitUntil, type GroupLeader, type ProcessGroupOwner, type ProcessGroups } from "./children.js";
import { LineReader, type OversizedLine } from "./line-reader.js";
import { messageEdgesOf, messageTooLarge } from "./message-bound.js";

/** Ids of our requests still waiting for an answer are remembered up to this many (the oldest are forgotten). */
const MAX_OUTSTANDING = 10_000;

export interface StdioProcessOptions {
  command: string;
  args: readonly string[];
  /** The child's whole environment (nothing else is inherited). */
  env: Record<string, string>;
  cwd?: string | undefined;
  /** How long the server gets to exit after stdin closes, and the group after SIGTERM (gateway.upstream.killGraceMs). */
  killGraceMs: number;
  /** Where the running group is registered, for the gateway's close() and destroy(). */
  groups?: ProcessGroups | undefined;
  /** Largest message read from the server, in bytes (gateway.upstream.maxMessageBytes). @default 16 MiB */
  maxMessageBytes?: number | undefined;
  /** The server's name, for errors. @default the command */
  name?: string | undefined;
}

export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export class GroupStdioClientTransport implements Transport, ProcessGroupOwner {
  onclose?: Transport["onclose"];
  onerror?: Transport["onerror"];
  onmessage?: Transport["onmessage"];
  /** The child's stderr; available before start() so no early line is lost. */
  readonly stderr = new PassThrough();
  private child: ChildProcess | undefined;
  private readonly lines: LineReader;
  /** Ids of our requests not yet answered (an oversized answer to one fails it). */
  private readonly outstanding = new Set<RequestId>();
  private ending: Promise<void> | undefined;
  private untrack: (() => void) | undefined;
  private closeReported = false;
  /** The spawn of prestart(), until start() takes it over. */
  private prestarted: Promise<void> | undefined;

  constructor(private readonly options: StdioProcessOptions) {
    this.lines = new LineReader({
      maxLineBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
      onLine: (line) => this.receiveLine(line),
      onOversized: (line) => this.receiveOversized(line),
    });
  }

  /**
   * Spawns the process now, before any client connects (the warm pool). The
   * server speaks only when spoken to, so nothing is lost until start() hands
   * the running process to the client.
   */
  prestart(): Promise<void> {
    this.prestarted ??= this.spawnChild();
    return this.prestarted;
  }

  /** Whether the process is still running (a prestarted one may have died while waiting). */
  get running(): boolean {
    const leader = this.leader();
    return leader !== undefined && !leader.hasExited() && !this.ending;
  }

  /** The child's pid (= its process group id) once spawned. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  start(): Promise<void> {
    if (this.prestarted) {
      const spawned = this.prestarted;
      this.prestarted = undefined;
      return spawned;
    }
    if (this.child || this.ending) return Promise.reject(new Error("GroupStdioClientTransport.start() was already called"));
    return this.spawnChild();
  }

  private spawnChild(): Promise<void> {
    const { command, args, env, cwd } = this.options;
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, {
        detached: true, // its own process group: pgid = pid
        stdio: ["pipe", "pipe", "pipe"],
        env,
        ...(cwd !== undefined ? { cwd } : {}),
        windowsHide: true,
      });
      this.child = child;
      if (child.pid !== undefined) this.untrack = this.options.groups?.track(this);
      child.on("error", (err: NodeJS.ErrnoException) => {
        const error = child.pid === undefined ? spawnError(err, command, cwd) : err;
        reject(error);
        this.onerror?.(error);
      });
      child.once("spawn", () => resolve());
      // Not asked to end: the leader crashed or was killed; what it left in its group goes too.
      child.once("exit", () => void this.terminate());
      child.once("close", () => this.reportClose());
      child.stdin?.on("error", (err) =>
        this.onerror?.(new Error(`upstream '${command}' (pid ${child.pid}) stdin: ${err.message}; the process exited or closed its input`, { cause: err })),
      );
      child.stdout?.on("data", (chunk: Buffer) => this.receive(chunk));
      child.stdout?.on("error", (err) => this.onerror?.(err));
      child.stderr?.pipe(this.stderr);
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.ending || !stdin.writable) {
      return Promise.reject(new Error(`not connected: the upstream process '${this.options.command}' is not running`));
    }
    if ("method" in message && "id" in message) {
      this.outstanding.add(message.id);
      if (this.outstanding.size > MAX_OUTSTANDING) this.outstanding.delete(this.outstanding.values().next().value!);
    }
    return new Promise((resolve, reject) => {
      stdin.write(serializeMessage(message), (err) =>
        err ? reject(new Error(`cannot write to upstream '${this.options.command}': ${errorMessage(err)}`, { cause: err })) : resolve(),
      );
    });
  }

  async close(): Promise<void> {
    await this.terminate();
    this.lines.clear();
    this.outstanding.clear();
    this.reportClose();
  }

  /**
   * Ends the whole process group (awaited; idempotent: later calls share the
   * first one's work). `graceMs` defaults to the configured killGraceMs.
   */
  terminate(graceMs = this.options.killGraceMs): Promise<void> {
    this.ending ??= this.end(graceMs).finally(() => this.untrack?.());
    return this.ending;
  }

  /** SIGKILL to the whole group, now (the gateway's destroy path). */
  kill(): void {
    const leader = this.leader();
    if (leader) signalGroup(leader, "SIGKILL");
  }

  private async end(graceMs: number): Promise<void> {
    const leader = this.leader();
    if (!leader) return;
    if (!leader.hasExited()) {
      try {
        this.child?.stdin?.end();
      } catch {
        /* already broken: the signals below still apply */
      }
      await waitUntil(() => leader.hasExited(), graceMs);
    }
    await reapGroup(leader, graceMs);
  }

  private leader(): GroupLeader | undefined {
    const child = this.child;
    if (child?.pid === undefined) return undefined;
    return { pgid: child.pid, hasExited: () => child.exitCode !== null || child.signalCode !== null };
  }

  private receive(chunk: Buffer): void {
    this.lines.push(chunk);
  }

  private receiveLine(line: string): void {
    if (line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = parseMessage(line);
    } catch (err) {
      this.onerror?.(err as Error); // one bad line; the next one is read as usual
      return;
    }
    if (!("method" in message) && message.id !== undefined) this.outstanding.delete(message.id);
    this.onmessage?.(message);
  }

  /**
   * A line over the bound was skipped. Newline-delimited JSON has no raw
   * newline inside a message, so the stream is in step again at the next line
   * and the connection goes on; only the request it answered fails.
   */
  private receiveOversized(line: OversizedLine): void {
    const server = this.options.name ?? this.options.command;
    const error = messageTooLarge(server, this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES, line.bytes);
    const edges = messageEdgesOf(line.head, line.tail);
    if (edges.response && edges.id !== undefined && this.outstanding.delete(edges.id)) {
      this.onmessage?.(errorResponseFor(edges.id, error));
      return;
    }
    // Not an answer we can attribute (a request of the server's has its own ids, from 0 like ours): dropped and reported.
    this.onerror?.(error);
    if (edges.request && edges.id !== undefined) {
      // The server's request is answered, so it does not wait for an answer that will never come.
      this.send(errorResponseFor(edges.id, error)).catch(() => undefined);
    }
  }

  private reportClose(): void {
    if (this.closeReported) return;
    this.closeReported = true;
    this.onclose?.();
  }
}

/** A spawn failure that names the command and says what to fix. */
function spawnError(err: NodeJS.ErrnoException, command: string, cwd: string | undefined): Error {
  const start = `cannot start upstream command '${command}'`;
  if (err.code === "ENOENT" && cwd !== undefined && !existsSync(cwd)) {
    return new Error(`${start}: its cwd '${cwd}' does not exist; fix the server's cwd`, { cause: err });
  }
  if (err.code === "ENOENT") {
    return new Error(
      `${start}: not found (ENOENT); give an absolute path, or put it on the PATH the child gets (the gateway's PATH unless the server's env sets one)`,
      {
        cause: err,
      },
    );
  }
  if (err.code === "EACCES") return new Error(`${start}: permission denied (EACCES); is it executable?`, { cause: err });
  return new Error(`${start}: ${err.message}`, { cause: err });
}

/**
 * One line of the upstream's stdout as a JSON-RPC message. A response whose envelope is plainly well-formed skips the
 * message schema's zod parse (issue 27: every answer crossed it; the SDK client parses a result with its own schema, and
 * a raw call's result is checked by the face's server); anything else is parsed as the SDK's `deserializeMessage` does.
 */
export function parseMessage(line: string): JSONRPCMessage {
  const m = JSON.parse(line) as { jsonrpc?: unknown; id?: unknown; method?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } | null };
  if (m !== null && typeof m === "object" && m.jsonrpc === "2.0" && m.method === undefined && (typeof m.id === "string" || typeof m.id === "number")) {
    const { result, error } = m;
    // The schema's own rule for a result response: exactly these three keys (strict), the result an object.
    if (error === undefined && typeof result === "object" && result !== null && !Array.isArray(result) && Object.keys(m).length === 3) {
      const meta = (result as { _meta?: unknown })._meta;
      if (meta === undefined || (typeof meta === "object" && meta !== null && !Array.isArray(meta))) return m as JSONRPCMessage;
    }
  }
  return JSONRPCMessageSchema.parse(m);
}
