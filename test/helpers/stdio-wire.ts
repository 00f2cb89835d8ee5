/**
 * The stdio face's raw wire for tests: one JSON-RPC message a line each way,
 * over a spawned `emceepee stdio` (spawnStdioWire) or over the in-memory
 * streams handed to `gateway.serveStdio` (wireOver). Requests wait for their
 * answer by id, bounded, and fail at once when the process exits first.
 */
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";
import { ROOT } from "./gateway.js";
import { CLI_ARGS, cliEnv } from "./core-extra.js";
import { waitFor } from "./tasks.js";

export interface Reply {
  id: number | string;
  result?: Record<string, any>;
  error?: { code: number; message: string; data?: any };
}
export type WireMessage = Reply & { method?: string; params?: Record<string, any> };

/** How long a request waits for its answer (a loaded 2-core machine, an upstream process to start). */
const ANSWER_MS = 120_000;

/** A reply, short enough for an assertion message. */
export const brief = (value: unknown) => JSON.stringify(value)?.slice(0, 400);

export interface Wire {
  /** Every message read so far, in order. */
  messages: WireMessage[];
  /** The first message so far that matches (polled). */
  next: (match: (m: WireMessage) => boolean, what: string) => Promise<WireMessage>;
  notify: (method: string, params?: Record<string, unknown>) => void;
  /** Sends a request without waiting for its answer. */
  send: (id: number | string, method: string, params?: Record<string, unknown>) => void;
  /** Sends a request and resolves with its answer; rejects after 120 s, or when the other end is gone first. */
  request: (id: number | string, method: string, params?: Record<string, unknown>) => Promise<Reply>;
}

/**
 * The wire over `stdin`/`stdout` (the gateway's side). `answer` answers the gateway's own requests (roots/list,
 * …): its result is sent back with the request's id. `gone` settles when the other end can no longer answer.
 */
export function wireOver(
  stdin: Writable,
  stdout: Readable,
  options: { answer?: (request: WireMessage) => Record<string, unknown> | undefined; gone?: Promise<string> } = {},
): Wire {
  const waiting = new Map<number | string, (reply: Reply) => void>();
  const messages: WireMessage[] = [];
  const write = (message: Record<string, unknown>) => stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
  createInterface({ input: stdout }).on("line", (line) => {
    const message = JSON.parse(line) as WireMessage;
    messages.push(message);
    if (message.method === undefined) return waiting.get(message.id)?.(message);
    const result = message.id !== undefined ? options.answer?.(message) : undefined;
    if (result) write({ id: message.id, result });
  });
  return {
    messages,
    next: (match, what) => waitFor(() => messages.find(match), `${what} on stdout; it carried: ${brief(messages.slice(-5))}`),
    notify: (method, params = {}) => void write({ method, params }),
    send: (id, method, params = {}) => void write({ id, method, params }),
    request: (id, method, params = {}) => {
      const replied = new Promise<Reply>((resolve) => waiting.set(id, resolve));
      write({ id, method, params });
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer to ${method} (${id}) in ${ANSWER_MS / 1000} s`)), ANSWER_MS).unref();
      });
      const gone = options.gone?.then((why) => Promise.reject(new Error(`no answer to ${method} (${id}): ${why}`))) ?? late;
      return Promise.race([replied, late, gone]).finally(() => clearTimeout(timer));
    },
  };
}

export interface SpawnedWire extends Wire {
  child: ChildProcessByStdio<Writable, Readable, Readable>;
  /** The exit code once the process has exited. */
  exited: Promise<number | null>;
  /** The gateway's log so far (JSON lines on stderr). */
  log: () => string;
  /** Ends stdin; resolves with the exit code. */
  end: () => Promise<number | null>;
  /** Ends the process (SIGTERM, then SIGKILL after 10 s) if it still runs. */
  stop: () => Promise<void>;
}

/** `emceepee stdio <args>` on raw pipes, with its own state folder. */
export function spawnStdioWire(args: string[] = []): SpawnedWire {
  const child = spawn(process.execPath, [...CLI_ARGS, "stdio", ...args], { cwd: ROOT, env: cliEnv(), stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const wire = wireOver(child.stdin, child.stdout, { gone: exited.then((code) => `the gateway exited (code ${code})`) });
  return {
    ...wire,
    child,
    exited,
    log: () => stderr,
    end: async () => {
      child.stdin.end();
      return exited;
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end();
      child.kill("SIGTERM");
      const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(kill);
    },
  };
}
