/**
 * `emceepee <args>` for commands that only print and end (help, version,
 * schema, check without --connect, config and flag errors), run in one shared
 * child process (test/helpers/cli-host-child.mjs) instead of a process each:
 * the same CLI as a spawn runs (cli-build.ts: the bundle's program.mjs) and its run(), with each command's
 * stdout, stderr and exit code captured as a spawn would see them (issue 21:
 * a spawn costs 0.4–1.3 s of CPU). Lifecycle — serving, signals, exit paths,
 * a process ending by itself — stays with runCli/startCliServe (core-extra.ts).
 * Commands run one at a time; the host dies with the test process.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { cliProgramModule } from "./cli-build.js";
import type { CliRun } from "./core-extra.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const CHILD = path.join(ROOT, "test/helpers/cli-host-child.mjs");

interface Reply {
  id?: number;
  ready?: boolean;
  stdout: string;
  stderr: string;
  code: number;
}

let host: { child: ChildProcess; ready: Promise<void>; output: () => string } | undefined;
let queue: Promise<unknown> = Promise.resolve();
let ids = 0;
let stateRoot: string | undefined;

function start(): NonNullable<typeof host> {
  const program = cliProgramModule();
  const child = fork(CHILD, [program.module], { cwd: ROOT, execArgv: program.execArgv, stdio: ["ignore", "pipe", "pipe", "ipc"] });
  let output = "";
  child.stdout?.on("data", (c: Buffer) => (output += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (output += c.toString("utf8")));
  const ready = new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) => reject(new Error(`the CLI host exited (${code}) before it was ready: ${output}`)));
  });
  child.once("exit", () => (host = undefined));
  return { child, ready, output: () => output };
}

type Refable = { ref?: () => void; unref?: () => void } | null | undefined;

/** Held (ref'd) while a command is in flight; idle, the host does not keep the test process alive, which ends it by disconnecting. */
function hold(child: ChildProcess, on: boolean): void {
  for (const handle of [child, child.channel, child.stdout, child.stderr] as Refable[]) {
    if (on) handle?.ref?.();
    else handle?.unref?.();
  }
}
/** The environment a command sees on top of the host's: its own XDG_STATE_HOME (as cliEnv gives a spawned CLI), then `env`. */
function commandEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  if (!stateRoot) {
    const root = mkdtempSync(path.join(os.tmpdir(), "emceepee-test-state-"));
    stateRoot = root;
    process.once("exit", () => rmSync(root, { recursive: true, force: true }));
  }
  const out: Record<string, string> = { XDG_STATE_HOME: path.join(stateRoot, `host-${++ids}`) };
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}

async function once(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<CliRun> {
  host ??= start();
  const { child, ready, output } = host;
  hold(child, true);
  try {
    await ready;
    const id = ++ids;
    const reply = await new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`emceepee ${args.join(" ")}: no answer from the CLI host within ${timeoutMs} ms`)), timeoutMs);
      const onMessage = (message: Reply) => {
        if (message.id !== id) return;
        cleanup();
        resolve(message);
      };
      const onExit = (code: number | null) => {
        cleanup();
        reject(new Error(`the CLI host exited (${code}) during emceepee ${args.join(" ")}: ${output()}`));
      };
      const cleanup = () => {
        clearTimeout(timer);
        child.off("message", onMessage);
        child.off("exit", onExit);
      };
      child.on("message", onMessage);
      child.once("exit", onExit);
      child.send({ id, args, env: commandEnv(env) });
    });
    return { code: reply.code, signal: null, stdout: reply.stdout, stderr: reply.stderr };
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  } finally {
    hold(child, false);
  }
}

/** Runs `emceepee <args>` in the shared host (one command at a time) and returns what a spawned `runCli` would. */
export function runCliHosted(args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliRun> {
  const result = queue.then(() => once(args, options.env ?? {}, options.timeoutMs ?? 120_000));
  queue = result.catch(() => undefined);
  return result;
}
