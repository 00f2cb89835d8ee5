/**
 * KnownServers: what the gateway last learned from each upstream's
 * initialize (serverInfo, capabilities, instructions), per server and config,
 * so that a transparent session's initialize can answer without waiting for a
 * process (docs/adr/0034). Filled by every connection the upstream factory
 * makes (the start-up check's, shared ones, sessions' own); forgotten when the
 * server changes. Plain JSON values only.
 */
import type { Implementation, ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { ServerConfig } from "../config/server-entry.js";
import { sameServerConfig } from "./registry.js";

export interface KnownServer {
  serverInfo: Implementation | undefined;
  capabilities: ServerCapabilities;
  instructions: string | undefined;
}

/** What a handle tells after connecting. */
interface Learned {
  readonly serverInfo: Implementation | undefined;
  readonly capabilities: ServerCapabilities | undefined;
  readonly instructions: string | undefined;
}

export class KnownServers {
  private readonly known = new Map<string, { config: ServerConfig; info: KnownServer }>();

  /** Records what `server` (with `config`) answered; returns true when it differs from what was known for that config. */
  learn(server: string, config: ServerConfig, handle: Learned): boolean {
    const info: KnownServer = {
      serverInfo: handle.serverInfo === undefined ? undefined : structuredClone(handle.serverInfo),
      capabilities: structuredClone(handle.capabilities ?? {}),
      instructions: handle.instructions,
    };
    const before = this.get(server, config);
    this.known.set(server, { config, info });
    return before !== undefined && JSON.stringify(before) !== JSON.stringify(info);
  }

  /** What `server` answered when last connected with this very config (a changed config knows nothing). */
  get(server: string, config: ServerConfig): KnownServer | undefined {
    const entry = this.known.get(server);
    return entry && sameServerConfig(entry.config, config) ? entry.info : undefined;
  }

  forget(server: string): void {
    this.known.delete(server);
  }
}
