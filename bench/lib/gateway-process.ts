/**
 * emceepee as a child process (`node --expose-gc --import bench/lib/gc-probe.mjs`
 * and the CLI: `--import tsx src/cli/main.ts`, or the bundle the package ships,
 * `dist/cli/emceepee.mjs`; then `serve --port 0`), so its CPU time and RSS can
 * be read from /proc apart from the benchmark's own clients and from the
 * upstream server processes it spawns. The benches that compare it with peers
 * run it as shipped (the bundle), as the peers run theirs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bundledCliEntry } from "../../test/helpers/cli-build.js";
import { alive, childPids, cpuMs, rssBytes } from "./proc.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const PROBE = path.join(ROOT, "bench/lib/gc-probe.mjs");

/** What bench/lib/gc-probe.mjs answers. */
export interface ProbeAnswer {
  type: string;
  id: number;
  memory?: NodeJS.MemoryUsage;
  path?: string;
}

export interface GatewayProcess {
  child: ChildProcess;
  pid: number;
  /** The meta face, e.g. http://127.0.0.1:PORT/mcp */
  url: string;
  origin: string;
  /** Full GC in the gateway, then its RSS (VmRSS) in bytes. */
  settledRss(settleMs?: number): Promise<number>;
  cpuMs(): number;
  /** Sends a gc-probe message (`{ type, ...fields }`) and resolves with its answer, or undefined after `timeoutMs`. */
  ask(type: string, fields?: Record<string, unknown>, timeoutMs?: number): Promise<ProbeAnswer | undefined>;
  /** Pids of the upstream processes the gateway spawned. */
  upstreamPids(): number[];
  /** What the gateway wrote to stderr so far (its JSON log lines, when started with a log level). */
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Writes `config` to a temp file and starts `emceepee serve` with it.
 * @param logLevel the gateway's --log-level (default "silent": logging costs CPU)
 * @param env added to (or, when undefined, removed from) the child's environment
 * @param nodeArgs extra node flags for the gateway (e.g. `--cpu-prof`, which NODE_OPTIONS refuses)
 * @param root the checkout whose CLI runs (another commit's tree beside this one, for before/after in one run)
 * @param cli "source": `<root>/src/cli/main.ts` through tsx; "bundle": the bundle (this tree's is made from its sources,
 *   test/helpers/cli-build.ts; another root's must be built there, `npm run build`: `<root>/dist/cli/emceepee.mjs`)
 */
export async function startGatewayProcess(
  config: unknown,
  label: string,
  logLevel = "silent",
  env: Record<string, string | undefined> = {},
  nodeArgs: readonly string[] = [],
  root: string = ROOT,
  cli: "source" | "bundle" = "source",
): Promise<GatewayProcess> {
  const entry = cli === "source" ? ["--import", "tsx", "src/cli/main.ts"] : [bundleOf(root)];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `emceepee-bench-${label}-`));
  const file = path.join(dir, "config.json");
  fs.writeFileSync(file, JSON.stringify(config, null, 2));
  const child = spawn(
    process.execPath,
    [...nodeArgs, "--expose-gc", "--import", PROBE, ...entry, "serve", "--config", file, "--port", "0", "--log-level", logLevel],
    // serve keeps its state in SQLite by default: in the bench's own folder, never the user's file.
    { cwd: root, env: { ...process.env, ...env, XDG_STATE_HOME: dir }, stdio: ["ignore", "pipe", "pipe", "ipc"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  const pid = child.pid!;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway (${label}) did not start in 60 s\n${stdout}\n${stderr}`)), 60_000);
    child.stdout?.on("data", () => {
      const m = /listening on (http:\/\/\S+)/.exec(stdout);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway (${label}) exited with ${code}\n${stdout}\n${stderr}`));
    });
  });
  let probeId = 0;
  const ask = (type: string, fields: Record<string, unknown> = {}, timeoutMs = 5_000) =>
    new Promise<ProbeAnswer | undefined>((resolve) => {
      const id = ++probeId;
      const timer = setTimeout(() => {
        child.off("message", onMessage);
        resolve(undefined);
      }, timeoutMs);
      const onMessage = (m: ProbeAnswer) => {
        if (m?.type !== type || m.id !== id) return;
        clearTimeout(timer);
        child.off("message", onMessage);
        resolve(m);
      };
      child.on("message", onMessage);
      child.send({ ...fields, type, id });
    });
  const gc = async () => {
    await ask("gc");
  };
  let stopped: Promise<void> | undefined;
  return {
    child,
    pid,
    url,
    origin: new URL(url).origin,
    async settledRss(settleMs = 300) {
      await new Promise((r) => setTimeout(r, settleMs));
      await gc();
      await new Promise((r) => setTimeout(r, 100));
      await gc();
      return rssBytes(pid);
    },
    cpuMs: () => cpuMs(pid),
    ask,
    stderr: () => stderr,
    upstreamPids: () =>
      childPids(pid).filter((p) => {
        try {
          return fs.readFileSync(`/proc/${p}/cmdline`, "utf8").includes("server-everything");
        } catch {
          return false;
        }
      }),
    stop() {
      stopped ??= (async () => {
        const spawned = childPids(pid);
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
          await exited;
          clearTimeout(timer);
        }
        // Whatever the gateway spawned and did not reap (it should have): end it by pid.
        for (const p of spawned) if (alive(p)) process.kill(p, "SIGKILL");
        fs.rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/** The bundled CLI of `root`: this tree's made from its sources, another's as built there. */
function bundleOf(root: string): string {
  if (path.resolve(root) === ROOT) return bundledCliEntry();
  const entry = path.join(root, "dist/cli/emceepee.mjs");
  if (!fs.existsSync(entry)) throw new Error(`${entry} is missing: build that checkout first (cd ${root} && npm run build)`);
  return entry;
}
