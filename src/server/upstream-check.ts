/**
 * UpstreamChecker: one-off reachability checks of upstream servers, for the
 * operator — `serve` checks every config server once after it listens (and
 * servers a reload adds or changes), `emceepee check --connect` checks them
 * and exits. Each check is a throwaway UpstreamConnection made by the
 * upstream factory (Upstreams.probe: spawn/connect, initialize, tools/list)
 * that is closed — its stdio process group gone — before the result is
 * reported. Stdio checks take a slot of the
 * gateway-wide child-process cap like any session's connection; a check that
 * cannot get one fails with that reason. Nothing here touches sessions.
 * close() ends checks still running (gateway shutdown).
 *
 * Except a shared server's, once the gateway listens (docs/adr/0039 §7): its
 * check connects the shared connection itself (which takes the process
 * `serve` started early) and lists its tools through a view of it, then
 * leaves it connected for the sessions, so that a shared server never runs
 * the check's process beside its own and its first session waits for no
 * start. The report is the same (`upstream_check_ok`/`_failed`, the
 * process's own words); a failed connection is made again by the next use.
 *
 * A check's process runs in the background (docs/adr/0039 §6): niced
 * (CHECK_NICE) as soon as it is spawned, so that on a busy machine it yields
 * the CPU to the first sessions' processes and the gateway itself.
 */
import type { Implementation } from "@modelcontextprotocol/sdk/types.js";
import { writeFileSync } from "node:fs";
import os from "node:os";
import type { ServerConfig } from "../config/server-entry.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { UpstreamHandlers } from "../upstream/client-handlers.js";
import type { UpstreamHandle } from "../upstream/handle.js";
import type { Upstreams } from "../upstream/sharing/factory.js";
import type { TransportFactory } from "../upstream/transport-types.js";

export type UpstreamCheckResult =
  { server: string; ok: true; tools: number; serverInfo?: Implementation | undefined } | { server: string; ok: false; reason: string };

export interface UpstreamCheckerDeps {
  /** Makes each check's connection (the upstream factory's). */
  probe: Upstreams["probe"];
  /**
   * A shared server's check connects the shared connection itself and leaves it connected for the sessions
   * (docs/adr/0039 §7): a view of it, or undefined for servers the check makes its own connection to.
   */
  shared?: Upstreams["sharedCheck"] | undefined;
  logger: Logger;
}

/** How many checks run at once (each may start a process). */
export const CHECK_CONCURRENCY = 4;

/** The nice value of a check's process (0 is normal, 19 the lowest priority). */
export const CHECK_NICE = 10;

/**
 * The checks' transport factory: `factory`'s transports, each stdio child niced
 * to CHECK_NICE right after it is spawned (what it spawns in turn inherits it).
 * On Linux with autogroup scheduling (sched_autogroup_enabled) a detached child
 * leads a scheduling group of its own, which a nice value inside the group does
 * not weigh down, so the group's own nice (/proc/<pid>/autogroup) is set too.
 * Best effort: where either is refused, the check runs at normal priority.
 */
export function inBackground(factory: TransportFactory): TransportFactory {
  return (name, config, options) => {
    const created = factory(name, config, options);
    const pid = created.pid;
    if (!pid) return created;
    const transport = created.transport;
    const start = transport.start.bind(transport);
    transport.start = () => {
      const started = start();
      lowerPriority(pid());
      return started;
    };
    return created;
  };
}

function lowerPriority(pid: number | null): void {
  if (pid === null) return;
  try {
    os.setPriority(pid, CHECK_NICE);
  } catch {
    /* not permitted, or already gone */
  }
  if (process.platform === "linux") niceAutogroup(pid, 10);
}

/** The child's scheduling group's nice (it leads its own group: detached). */
function niceAutogroup(pid: number, tries: number): void {
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(CHECK_NICE));
  } catch (err) {
    // Without CAP_SYS_ADMIN Linux takes one autogroup nice per 100 ms machine-wide (EAGAIN for the others, e.g. the
    // checks of several servers started at once): try again shortly. Else no autogroup scheduling, or already gone.
    if ((err as NodeJS.ErrnoException).code === "EAGAIN" && tries > 1) setTimeout(() => niceAutogroup(pid, tries - 1), 110).unref();
  }
}

/** A check has no client behind it: whatever the upstream asks of one is declined. */
const NO_CLIENT = "emceepee is only checking that this server starts; there is no client to ask";

const handlers: UpstreamHandlers = {
  onElicit: () => Promise.reject(new Error(NO_CLIENT)),
  onSample: () => Promise.reject(new Error(NO_CLIENT)),
  onNotification: () => undefined,
  onLog: () => undefined,
  onStderr: () => undefined,
  onListRoots: () => Promise.resolve({ roots: [] }),
  onDisconnect: () => undefined,
};

export class UpstreamChecker {
  private readonly running = new Set<UpstreamHandle>();
  private closed = false;

  constructor(private readonly deps: UpstreamCheckerDeps) {}

  /**
   * Connects once, lists tools, closes; never throws. A shared server's check (deps.shared) connects the shared
   * connection and lists its tools through a view of it, which it then closes: the connection stays for the
   * sessions (one process per shared server, never the check's beside it).
   */
  async check(server: string, config: ServerConfig): Promise<UpstreamCheckResult> {
    if (this.closed) return { server, ok: false, reason: "the gateway is shutting down" };
    const conn = this.deps.shared?.(server, { handlers }) ?? this.deps.probe(server, config, { handlers, logger: this.deps.logger.child({ check: true }) });
    this.running.add(conn);
    try {
      await conn.connect();
      const tools = conn.capabilities?.tools ? (await conn.listTools()).length : 0;
      return { server, ok: true, tools, serverInfo: conn.serverInfo };
    } catch (err) {
      // lastError is the connection's own account (with the child's last stderr lines); the error adds advice for meta-face users.
      return { server, ok: false, reason: this.closed ? "the gateway is shutting down" : (conn.lastError ?? errorMessage(err)) };
    } finally {
      await conn.close();
      this.running.delete(conn);
    }
  }

  /** Checks every server, CHECK_CONCURRENCY at a time; results in the order given. */
  async checkAll(servers: ReadonlyArray<readonly [string, ServerConfig]>): Promise<UpstreamCheckResult[]> {
    const results: UpstreamCheckResult[] = new Array<UpstreamCheckResult>(servers.length);
    let next = 0;
    const worker = async () => {
      while (next < servers.length) {
        const i = next++;
        const [name, config] = servers[i]!;
        results[i] = await this.check(name, config);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CHECK_CONCURRENCY, servers.length) }, worker));
    return results;
  }

  /** Ends checks still running (their processes included); later checks fail at once. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.running].map((c) => c.close()));
  }
}
