/**
 * A real redis-server for tests: started on a free port in its own temp
 * folder with persistence off (`--save "" --appendonly no`), stopped (and the
 * folder removed) after. Missing binary: with CI=true the test fails (CI must
 * run these), otherwise it is skipped with a message saying what to install.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { freePort, stopChild, waitExit } from "./core-extra.js";

/** Where Debian's redis-server package puts it (override with REDIS_SERVER). */
export const REDIS_SERVER = process.env.REDIS_SERVER ?? "/usr/bin/redis-server";

/**
 * undefined when redis-server can be used; else the reason to skip. With
 * CI=true a missing server throws instead: CI must not pass by skipping.
 */
export function redisSkipReason(): string | undefined {
  if (existsSync(REDIS_SERVER)) return undefined;
  const why = `${REDIS_SERVER} not found: install Debian's redis-server package (apt-get install redis-server) or set REDIS_SERVER`;
  if (process.env.CI === "true") throw new Error(`CI=true and ${why}`);
  return `skipped: ${why}`;
}

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  child: ChildProcess;
  /** A plain client (for inspecting or flushing); closed by stop(). */
  client(): Redis;
  /** SIGKILLs the server (its data is gone: no persistence). */
  kill(): Promise<void>;
  /** Starts it again on the same port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedis(options: { port?: number } = {}): Promise<RedisServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-redis-"));
  const port = options.port ?? (await freePort());
  const clients: Redis[] = [];
  let child = await launch(port, dir);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get child() {
      return child;
    },
    client() {
      const c = new Redis(port, "127.0.0.1", { lazyConnect: false, maxRetriesPerRequest: 1 });
      c.on("error", () => undefined);
      clients.push(c);
      return c;
    },
    async kill() {
      child.kill("SIGKILL");
      await waitExit(child);
    },
    async restart() {
      if (child.exitCode === null && child.signalCode === null) await stopChild(child);
      child = await launch(port, dir);
    },
    async stop() {
      for (const c of clients.splice(0)) c.disconnect();
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Spawns redis-server and resolves once it accepts connections. */
async function launch(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn(REDIS_SERVER, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`redis-server was not ready within 10 s:\n${output}`)), 10_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      if (/Ready to accept connections/.test(output)) done();
    };
    const onExit = (code: number | null) => done(new Error(`redis-server exited (${code}) before it was ready:\n${output}`));
    const done = (err?: Error) => {
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      child.off("exit", onExit);
      if (err) {
        child.kill("SIGKILL");
        reject(err);
      } else resolve();
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
    child.once("exit", onExit);
  });
  // Keep draining its output so a full pipe never blocks it.
  child.stdout?.resume();
  return child;
}
