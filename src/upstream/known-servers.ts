/**
 * KnownServers: what the gateway last learned from each upstream's
 * initialize (serverInfo, capabilities, instructions), per server and config,
 * so that a transparent session's initialize can answer without waiting for a
 * process (docs/adr/0034). Filled by every connection the upstream factory
 * makes (the start-up check's, shared ones, sessions' own); forgotten when the
 * server changes. Plain JSON values only. It also knows the first session's
 * connect while it is under way, so that sessions opened before the first
 * answer wait for that one instead of each starting its own process
 * (`answerFor`).
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
  /** First sessions' connects under way by server, with the config each connects with; removed when it settles. */
  private readonly connecting = new Map<string, Set<{ config: ServerConfig; done: Promise<unknown> }>>();

  /** Tracks a connect of `server` with `config` until `done` settles. */
  private learning(server: string, config: ServerConfig, done: Promise<unknown>): void {
    const entry = { config, done };
    let set = this.connecting.get(server);
    if (!set) this.connecting.set(server, (set = new Set()));
    set.add(entry);
    void entry.done.then(() => {
      set.delete(entry);
      if (set.size === 0 && this.connecting.get(server) === set) this.connecting.delete(server);
    });
  }

  /**
   * What `server` answers with `config`, for a session about to initialize. Known now: that. Else, when a first session
   * is connecting with this config, once it has (within its connect timeout; its connect teaches this class through the
   * upstream factory before it calls `done`); `info` stays undefined when it failed, and the caller connects itself.
   * Else the caller is that first session: its connect counts as under way from this moment, so the sessions opened
   * meanwhile wait for it, until it calls `done` (always, whatever the outcome).
   */
  async answerFor(server: string, config: ServerConfig): Promise<{ info?: KnownServer | undefined; done?: () => void }> {
    if (this.underWay(server, config).length === 0 && this.get(server, config) === undefined) {
      let done!: () => void;
      this.learning(server, config, new Promise<void>((resolve) => (done = resolve)));
      return { done };
    }
    for (;;) {
      const info = this.get(server, config);
      const under = this.underWay(server, config);
      if (info || under.length === 0) return { info };
      await Promise.race(under.map((c) => c.done)); // the settled one has left `connecting` by now (its cleanup was registered first)
    }
  }

  private underWay(server: string, config: ServerConfig): Array<{ done: Promise<unknown> }> {
    return [...(this.connecting.get(server) ?? [])].filter((c) => sameServerConfig(c.config, config));
  }

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
