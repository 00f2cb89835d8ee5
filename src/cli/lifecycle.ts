/**
 * The CLI's exit paths and reload, installed once per process.
 *
 * - The first SIGINT/SIGTERM (or, for `stdio`, the end of stdin) closes the
 *   gateway, which resolves only once every upstream process group is gone,
 *   then exits 0. A second one forces: SIGKILL to every upstream group,
 *   synchronously, then exit 1. Any other exit (an uncaught error, a
 *   process.exit elsewhere) still SIGKILLs what is left, from 'exit'.
 * - Under `npm start` the terminal's Ctrl-C reaches the gateway twice (npm
 *   is in the same process group and forwards what it got), so a repeat of
 *   the same signal within `repeatWindowMs` counts as the same one.
 * - SIGHUP re-reads the config and applies it (Gateway.reload); a config
 *   that does not load is logged (`config_reload_failed`, with why) and the
 *   running one is kept. Reloads run one at a time, in the order received.
 */
import type { LoadedConfig } from "../config/load.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { Gateway } from "../server/gateway.js";

export interface ExitPathOptions {
  /** Re-reads the config for SIGHUP; without it SIGHUP is logged and ignored. */
  reload?: (() => Promise<LoadedConfig>) | undefined;
  /** A repeat of the first shutdown signal within this many ms is not a second signal. @default 0 */
  repeatWindowMs?: number | undefined;
}

export interface ExitPaths {
  /** Closes the gateway (awaited) and exits with `code`; later calls do nothing. */
  shutdown(code: number): Promise<void>;
}

/** Logs what loadConfig found that the operator should know (serve, stdio and reload). */
export function reportConfig(config: LoadedConfig, logger: Logger): void {
  for (const server of config.disabledServers) logger.info({ server }, "server_disabled_in_config");
  for (const warning of config.warnings) logger.warn({ warning }, "config_warning");
}

export function installExitPaths(gateway: Gateway, options: ExitPathOptions = {}): ExitPaths {
  const { logger, clock } = gateway.context;
  let shuttingDown = false;
  let first: { signal: NodeJS.Signals; at: number } | undefined;

  async function shutdown(code: number): Promise<void> {
    if (shuttingDown) return;
    shuttingDown = true;
    await gateway.close().catch((err: unknown) => logger.error({ err: errorMessage(err) }, "shutdown_failed"));
    process.exit(code);
  }

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (shuttingDown) {
        if (first?.signal === signal && clock.now() - first.at < (options.repeatWindowMs ?? 0)) {
          logger.debug({ signal }, "signal_repeat_ignored");
          return;
        }
        logger.warn({ signal }, "shutdown_forced");
        gateway.destroy();
        process.exit(1);
      }
      first = { signal, at: clock.now() };
      logger.info({ signal }, "shutdown_started");
      void shutdown(0);
    });
  }
  process.on("exit", () => gateway.destroy());

  let reloads: Promise<void> = Promise.resolve();
  process.on("SIGHUP", () => {
    if (shuttingDown) return;
    const reload = options.reload;
    if (!reload) {
      logger.warn({ signal: "SIGHUP" }, "config_reload_unavailable");
      return;
    }
    reloads = reloads.then(() => reloadOnce(gateway, reload, logger));
  });

  return { shutdown };
}

async function reloadOnce(gateway: Gateway, read: () => Promise<LoadedConfig>, logger: Logger): Promise<void> {
  logger.info({ signal: "SIGHUP" }, "config_reload_started");
  let config: LoadedConfig;
  try {
    config = await read();
  } catch (err) {
    logger.error({ reason: errorMessage(err) }, "config_reload_failed");
    return;
  }
  reportConfig(config, logger);
  try {
    const report = await gateway.reload(config);
    const { added, removed, updated, unchanged, skipped, settingsChanged, listChanged } = report;
    for (const s of skipped) logger.warn(s, "config_reload_server_skipped");
    if (settingsChanged.length) logger.warn({ settings: settingsChanged }, "config_reload_settings_need_restart");
    logger.info({ added, removed, updated, unchanged, skipped: skipped.map((s) => s.server), listChanged }, "config_reloaded");
    if (added.length || updated.length) void gateway.checkUpstreams([...added, ...updated]);
  } catch (err) {
    logger.error({ reason: errorMessage(err) }, "config_reload_failed");
  }
}
