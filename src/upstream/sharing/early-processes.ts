/**
 * EarlyProcesses (`serve`'s start, docs/adr/0039): one process of each stdio
 * upstream, started as soon as the config is parsed — before the gateway's
 * modules load — so that the upstream's start overlaps the gateway's. The
 * first connection the gateway makes to that server with the same config (a
 * session's own, through the warm pool's factory, or the shared one) takes
 * the running process instead of spawning one; as a warm process, it is only
 * spawned, and initialized by the connection that takes it (ADR 0034). One
 * not taken within `idleMs` is ended. The processes are made as the gateway's
 * transport factory makes its stdio ones (transports-stdio.ts, the same
 * function) and registered in its process groups (`groups`, handed to
 * createGateway). Only the stdio half is imported here: the remote transports
 * load with the gateway, not before the early spawn (ADR 0066).
 */
import { isStdioConfig, type ServerConfig } from "../../config/server-entry.js";
import { errorMessage } from "../../errors.js";
import { ProcessGroups } from "../children.js";
import { sameServerConfig } from "../registry.js";
import { hasSecrets } from "../auth/secrets.js";
import { createStdioTransport } from "../transports-stdio.js";
import type { CreatedTransport, TransportFactory } from "../transport-types.js";

interface Prestartable {
  prestart(): Promise<void>;
  readonly running: boolean;
  onclose?: (() => void) | undefined;
}

interface Early {
  config: ServerConfig;
  created: CreatedTransport;
  transport: Prestartable;
}

export interface EarlyProcessesOptions {
  /** gateway.upstream.killGraceMs */
  killGraceMs: number;
  /** gateway.upstream.maxMessageBytes */
  maxMessageBytes: number;
  /** A process nobody took in this long is ended (gateway.upstream.warmPoolIdleMs). */
  idleMs: number;
}

/** What happened to an early process, for the log once the gateway has one. */
export type EarlyEvent =
  | { event: "upstream_started_early"; server: string; upstreamPid: number | null }
  | { event: "early_process_failed"; server: string; reason: string }
  | { event: "early_process_released"; server: string };

/** Whether `serve` starts a process of `config` early: stdio, and no person's secrets in it (issue 23). */
export function startsEarly(config: ServerConfig): boolean {
  return isStdioConfig(config) && !hasSecrets(config);
}

export class EarlyProcesses {
  /** The gateway's process groups (createGateway takes them: its close() and destroy() end these processes too). */
  readonly groups = new ProcessGroups();
  private readonly waiting = new Map<string, Early>();
  private readonly events: EarlyEvent[] = [];
  private report: ((e: EarlyEvent) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: EarlyProcessesOptions) {}

  /** Spawns one process of each server (those startsEarly() accepts). */
  start(servers: ReadonlyArray<readonly [string, ServerConfig]>): void {
    for (const [name, config] of servers) {
      if (this.closed || !isStdioConfig(config) || !startsEarly(config) || this.waiting.has(name)) continue;
      const { killGraceMs, maxMessageBytes } = this.options;
      const created = createStdioTransport(name, config, { killGraceMs, maxMessageBytes, groups: this.groups });
      const transport = created.transport as Partial<Prestartable>;
      if (typeof transport.prestart !== "function") {
        void created.terminate?.();
        continue;
      }
      const early: Early = { config, created, transport: transport as Prestartable };
      this.waiting.set(name, early);
      early.transport.onclose = () => {
        if (this.drop(name, early)) this.emit({ event: "early_process_failed", server: name, reason: "the process exited before any connection took it" });
      };
      early.transport.prestart().then(
        () => this.emit({ event: "upstream_started_early", server: name, upstreamPid: created.pid?.() ?? null }),
        (err: unknown) => {
          if (this.drop(name, early)) this.emit({ event: "early_process_failed", server: name, reason: errorMessage(err) });
        },
      );
    }
    if (this.waiting.size && !this.timer) {
      this.timer = setTimeout(() => this.releaseAll(), this.options.idleMs);
      this.timer.unref();
    }
  }

  /**
   * The gateway's factory below observability: a waiting process of `name` with the same config, once; else what
   * `base` (the gateway's transport factory, over `groups`) makes.
   */
  factoryOver(base: TransportFactory): TransportFactory {
    return (name, config, transportOptions) => {
      const early = this.waiting.get(name);
      if (early) {
        this.waiting.delete(name);
        early.transport.onclose = undefined;
        if (early.transport.running && sameServerConfig(early.config, config)) return early.created;
        this.end(early);
      }
      return base(name, config, transportOptions);
    };
  }

  /** Events so far and from now on go to `report` (the gateway's logger, once it exists). */
  reportTo(report: (e: EarlyEvent) => void): void {
    this.report = report;
    for (const e of this.events.splice(0)) report(e);
  }

  /** Servers with a process waiting now. */
  get waitingFor(): string[] {
    return [...this.waiting.keys()];
  }

  /** Ends the processes nobody took (gateway close). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const all = [...this.waiting.values()];
    this.waiting.clear();
    await Promise.allSettled(
      all.map(async (e) => {
        e.transport.onclose = undefined;
        await e.created.terminate?.();
      }),
    );
  }

  /** SIGKILL to every process group started here, now (an exit before the gateway's exit paths are in place). */
  destroy(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.groups.killAll();
  }

  private releaseAll(): void {
    this.timer = undefined;
    for (const [name, early] of [...this.waiting]) {
      if (this.drop(name, early)) this.emit({ event: "early_process_released", server: name });
    }
  }

  /** Removes `early` if it still waits (true), and ends it. */
  private drop(name: string, early: Early): boolean {
    if (this.waiting.get(name) !== early) return false;
    this.waiting.delete(name);
    this.end(early);
    return true;
  }

  private end(early: Early): void {
    early.transport.onclose = undefined;
    void early.created.terminate?.();
  }

  private emit(e: EarlyEvent): void {
    if (this.report) this.report(e);
    else this.events.push(e);
  }
}
