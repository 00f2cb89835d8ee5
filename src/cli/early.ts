/**
 * `serve`'s early upstream processes (docs/adr/0039): once the config is
 * parsed, and before the gateway's modules load, one process of each stdio
 * config server starts (upstream/sharing/early-processes.ts), so that the
 * first session takes one that is already up (a shared server's: its start-up
 * check, which connects the shared connection). Only with the start-up check
 * on (serve's default; `--no-upstream-check` starts nothing early) and the
 * warm pool on (`gateway.upstream.warmPool` > 0).
 *
 * Until the gateway's exit paths are in place (lifecycle.ts), a SIGINT or
 * SIGTERM ends these processes' groups and then this process, by the same
 * signal; any exit before that SIGKILLs them (`exit`).
 */
import type { LoadedConfig } from "../config/load.js";
import type { EarlyProcesses } from "../upstream/sharing/early-processes.js";

export interface EarlyStart {
  early: EarlyProcesses;
  /** The gateway's exit paths take over: this module's signal handlers go. */
  handOver(): void;
}

export async function startEarly(config: LoadedConfig): Promise<EarlyStart | undefined> {
  const { upstream } = config.gateway;
  if (upstream.warmPool === 0) return undefined;
  const { EarlyProcesses, startsEarly } = await import("../upstream/sharing/early-processes.js");
  // Shared servers too: their start-up check connects the shared connection, which takes this process (one process
  // per shared server, never the check's beside it: docs/adr/0039 §7).
  const chosen = Object.entries(config.mcpServers).filter(([, c]) => startsEarly(c));
  if (!chosen.length) return undefined;
  const early = new EarlyProcesses({
    killGraceMs: upstream.killGraceMs,
    maxMessageBytes: upstream.maxMessageBytes,
    idleMs: upstream.warmPoolIdleMs,
  });
  const onSignal = (signal: NodeJS.Signals) => {
    early.destroy();
    handOver();
    process.kill(process.pid, signal);
  };
  const onExit = () => early.destroy();
  const handOver = () => {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.off("exit", onExit);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  process.once("exit", onExit);
  early.start(chosen);
  return { early, handOver };
}
