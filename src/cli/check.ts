/**
 * `emceepee check`: validates a config without serving and prints what it
 * found (servers, disabled ones, warnings, where `serve` would listen). With
 * `--connect` it also tries each upstream once, as `serve` does at start
 * (Gateway.checkUpstreams), and prints each outcome. Exit codes: 0 valid
 * (and every upstream reachable), 1 valid but an upstream failed, 2 invalid
 * (the CLI's error path prints the message).
 */
import type { LoadedConfig } from "../config/load.js";
import type { Logger } from "../logging.js";
import { createGateway } from "../server/gateway.js";
import { describeTarget } from "../upstream/registry.js";
import { installExitPaths } from "./lifecycle.js";

export function describeConfig(config: LoadedConfig, source: string): string {
  const names = Object.keys(config.mcpServers);
  const { host, port, token } = config.gateway;
  const lines = [
    `config OK: ${source}`,
    `servers (${names.length}):${names.length ? "" : " none"}`,
    ...names.map((name) => {
      const { transport, target } = describeTarget(config.mcpServers[name]!);
      return `  ${name}  ${transport}  ${target}`;
    }),
    ...(config.disabledServers.length ? [`disabled (skipped): ${config.disabledServers.join(", ")}`] : []),
    ...config.warnings.map((w) => `warning: ${w}`),
    `serve would listen on http://${host.includes(":") ? `[${host}]` : host}:${port}/mcp (token: ${token === undefined ? "none" : "set"})`,
  ];
  return lines.join("\n") + "\n";
}

/** Tries each server once; prints one line per server; returns the exit code (0 all reachable, 1 otherwise). */
export async function connectEach(config: LoadedConfig, logger: Logger, out: (text: string) => void): Promise<number> {
  const gateway = createGateway(config, { logger });
  installExitPaths(gateway);
  try {
    const names = Object.keys(config.mcpServers);
    out(`connecting to ${names.length} server${names.length === 1 ? "" : "s"}…\n`);
    const results = await gateway.checkUpstreams(names);
    for (const r of results) {
      if (r.ok) {
        const info = r.serverInfo ? `${r.serverInfo.name} ${r.serverInfo.version}, ` : "";
        out(`  ok      ${r.server}  (${info}${r.tools} tools)\n`);
      } else {
        out(`  FAILED  ${r.server}  ${r.reason}\n`);
      }
    }
    const failed = results.filter((r) => !r.ok).length;
    out(failed ? `${failed} of ${results.length} servers could not be reached\n` : "every server answered\n");
    return failed ? 1 : 0;
  } finally {
    await gateway.close();
  }
}
