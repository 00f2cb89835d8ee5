/**
 * WarmPool (`gateway.upstream.warmPool`, ADR 0010): stdio processes started
 * ahead, so that a session takes a running one. See
 * docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import type { ServerConfig } from "../../config/server-entry.js";
import { errorMessage } from "../../errors.js";
import type { Logger } from "../../logging.js";
import type { ChildProcessLimiter } from "../children.js";
import { sameServerConfig } from "../registry.js";
import type { CreatedTransport, TransportFactory } from "../transports.js";

interface Prestartable {
  prestart(): Promise<void>;
  readonly running: boolean;
  onclose?: (() => void) | undefined;
}

interface Warm {
  config: ServerConfig;
  created: CreatedTransport;
  transport: Prestartable;
  /** Frees the warm process's child slot (once). */
  release: () => void;
}

export interface WarmPoolOptions {
  /** Warm processes per server (0: off). */
  size: number;
  children: ChildProcessLimiter;
  logger: Logger;
  /** The config of `name` when it is worth warming (a stdio server used per session), else undefined. */
  warmable(name: string): ServerConfig | undefined;
}

export class WarmPool {
  private readonly waiting = new Map<string, Warm[]>();
  private started = false;
  private closed = false;

  constructor(
    private readonly inner: TransportFactory,
    private readonly options: WarmPoolOptions,
  ) {}

  /** The factory for session connections: a waiting process of the same config when there is one. */
  readonly factory: TransportFactory = (name, config, transportOptions) => {
    const warm = this.take(name, config);
    this.fillSoon(name);
    return warm ? warm.created : this.inner(name, config, transportOptions);
  };

  /** Ends the waiting processes of `name` (its server was removed or changed); the next use fills the pool again. */
  evict(name: string): void {
    for (const warm of [...(this.waiting.get(name) ?? [])]) this.drop(name, warm);
  }

  /** From now on, servers that sessions use are kept warm. */
  start(): void {
    this.started = true;
  }

  /** Starts processes for `name` until its pool is full (or the child cap is reached). */
  fill(name: string): void {
    if (!this.started || this.closed || this.options.size === 0) return;
    const config = this.options.warmable(name);
    if (!config) return;
    const list = this.list(name);
    while (list.length < this.options.size) {
      const release = this.options.children.tryAcquire(name);
      if (!release) return; // at the cap: sessions' own processes come first
      const created = this.inner(name, config);
      const transport = created.transport as Partial<Prestartable>;
      if (typeof transport.prestart !== "function") {
        release();
        void created.terminate?.();
        return; // not a process this pool can start ahead (an injected factory)
      }
      const warm: Warm = { config, created, transport: transport as Prestartable, release };
      list.push(warm);
      // Died while waiting (take() clears this before a session's client sets its own).
      warm.transport.onclose = () => this.drop(name, warm);
      warm.transport.prestart().catch((err: unknown) => {
        this.options.logger.warn({ server: name, err: errorMessage(err) }, "warm_process_failed");
        this.drop(name, warm);
      });
    }
  }

  /**
   * Frees a child slot for a connection to `server` at the cap: ends another
   * server's waiting process, or lends `server`'s own (its slot freed; the
   * connection takes the process in the same tick — if not, it is ended).
   * False when nothing waits.
   */
  reclaim(server: string): boolean {
    const own = this.waiting.get(server)?.[0];
    if (own) {
      own.release();
      setImmediate(() => this.drop(server, own));
      return true;
    }
    for (const [name, list] of this.waiting) {
      if (list[0]) {
        this.drop(name, list[0]);
        return true;
      }
    }
    return false;
  }

  /** Processes waiting now, per server. */
  get size(): number {
    let n = 0;
    for (const list of this.waiting.values()) n += list.length;
    return n;
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.waiting.values()].flat();
    this.waiting.clear();
    await Promise.allSettled(
      all.map(async (warm) => {
        await warm.created.terminate?.();
        warm.release();
      }),
    );
  }

  private take(name: string, config: ServerConfig): Warm | undefined {
    const list = this.waiting.get(name);
    while (list?.length) {
      const warm = list.shift()!;
      warm.transport.onclose = undefined;
      if (warm.transport.running && sameServerConfig(warm.config, config)) {
        warm.release(); // the connection holds its own slot
        return warm;
      }
      this.end(warm);
    }
    return undefined;
  }

  private fillSoon(name: string): void {
    setImmediate(() => this.fill(name));
  }

  private list(name: string): Warm[] {
    let list = this.waiting.get(name);
    if (!list) {
      list = [];
      this.waiting.set(name, list);
    }
    return list;
  }

  private drop(name: string, warm: Warm): void {
    const list = this.waiting.get(name);
    const i = list?.indexOf(warm) ?? -1;
    if (i < 0) return;
    list!.splice(i, 1);
    this.end(warm);
  }

  /** Ends a waiting process; its child slot frees once its process group is gone (as a connection's does). */
  private end(warm: Warm): void {
    warm.transport.onclose = undefined;
    const ended = warm.created.terminate?.() ?? Promise.resolve();
    void ended.then(warm.release, warm.release);
  }
}
