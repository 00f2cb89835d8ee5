/**
 * The stdio half of the transport factory (transports.ts): one upstream
 * process, our own GroupStdioClientTransport in its own process group
 * (children.ts), and the types every transport shares. Kept apart from the
 * remote transports (Streamable HTTP, SSE, the era bridge) so that `serve`'s
 * early processes (sharing/early-processes.ts) spawn without loading those
 * (ADR 0066); transports.ts builds its stdio transports here too — one
 * construction path. The types all transports share: transport-types.ts.
 */
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { StdioServerConfig } from "../config/server-entry.js";
import type { ProcessGroups } from "./children.js";
import { GroupStdioClientTransport } from "./stdio-transport.js";
import type { CreatedTransport } from "./transport-types.js";

export interface StdioTransportOptions {
  /** gateway.upstream.killGraceMs */
  killGraceMs: number;
  /** gateway.upstream.maxMessageBytes (design LM-6). */
  maxMessageBytes: number;
  /** Registers the process group (the gateway's close() and destroy() end them all). */
  groups?: ProcessGroups | undefined;
}

/** One stdio upstream's transport: the process is spawned by start() (or prestart(), ADR 0034), not here. */
export function createStdioTransport(name: string, config: StdioServerConfig, options: StdioTransportOptions): CreatedTransport {
  const transport = new GroupStdioClientTransport({
    command: config.command,
    args: config.args,
    env: { ...getDefaultEnvironment(), ...(config.env ?? {}) },
    cwd: config.cwd,
    killGraceMs: options.killGraceMs,
    groups: options.groups,
    maxMessageBytes: options.maxMessageBytes,
    name,
  });
  return { transport, stderr: transport.stderr, pid: () => transport.pid, terminate: (graceMs) => transport.terminate(graceMs) };
}
