/**
 * WarmPool (`gateway.upstream.warmPool`, ADR 0010, ADR 0034, ADR 0044): stdio
 * processes started ahead, so that a session takes a running one; per server
 * as many as sessions took in the last `windowMs` (at least one, at most
 * `size`), none once nobody took one for `idleMs`. With `initialize`, a
 * process is also connected ahead — `initialize` with the client capabilities
 * (its `key`) of the last session that took one, and the first tool list — and
 * only a session with the same key takes it (takeAhead); another gets a
 * process of its own. See docs/design/upstreams-and-reliability.md, "How the
 * code keeps it".
 */
import { systemClock, type Clock, type TimerHandle } from "../../clock.js";
import type { ServerConfig } from "../../config/server-entry.js";
import { errorMessage } from "../../errors.js";
import type { Logger } from "../../logging.js";
import type { ChildProcessLimiter } from "../children.js";
import { backoffDelay, type BackoffPolicy } from "../backoff.js";
import { sameServerConfig } from "../registry.js";
import type { CreatedTransport, TransportFactory } from "../transport-types.js";

/** Processes of one server the pool starts at a time (see whileStarting()). */
const STARTS_AT_ONCE = 1;
/** The pool starts no process until sessions have stopped asking for this long (see held()). */
export const QUIET_MS = 1_000;
/** ... but for no longer than this in a row: sessions that keep coming still get spares. */
export const MAX_HOLD_MS = 3_000;
/**
 * A spare that failed before any session took it (its process did not start, exited, or its connection ahead failed)
 * delays the server's next start, doubling per failure in a row: a server that cannot start is not restarted in a loop
 * while its demand lasts (warmPoolIdleMs). A take, or a spare that lived STABLE_MS, starts the count over.
 */
export const FAILED_START_BACKOFF: BackoffPolicy = { initialDelayMs: 1_000, maxDelayMs: 60_000, jitter: 0.2 };
/** A spare that ends after living this long did not fail to start. */
export const STABLE_MS = 30_000;

interface Prestartable {
  prestart(): Promise<void>;
  readonly running: boolean;
  onclose?: (() => void) | undefined;
}

/** A connection made ahead of any session (warm-connection.ts). */
export interface Ahead {
  /** Connecting or connected. */
  readonly alive: boolean;
  /** Settles when connected (or failed). */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

interface Warm<A extends Ahead> {
  config: ServerConfig;
  created: CreatedTransport;
  transport: Prestartable;
  /** Frees the warm process's child slot (once). */
  release: () => void;
  /** Connected ahead with the capabilities `key` stands for (else a process only, spawned ahead). */
  ahead?: { key: string; value: A } | undefined;
  /** While it is starting: ends its count among the starting ones (whileStarting). */
  started?: (() => void) | undefined;
  /** When the pool started it (its clock). */
  since: number;
}

export interface WarmPoolOptions<A extends Ahead = Ahead> {
  /** At most this many warm processes per server (0: off). */
  size: number;
  /** Demand is the number of processes sessions took in this window (gateway.upstream.warmPoolWindowMs). @default 30000 */
  windowMs?: number | undefined;
  /** A server no session took a process of for this long keeps none waiting (gateway.upstream.warmPoolIdleMs). @default 300000 */
  idleMs?: number | undefined;
  /** @default systemClock */
  clock?: Clock | undefined;
  children: ChildProcessLimiter;
  logger: Logger;
  /** The config of `name` when it is worth warming (a stdio server used per session), else undefined. */
  warmable(name: string): ServerConfig | undefined;
  /**
   * Connects a process ahead over `created` (not yet started), declaring the capabilities `key` stands for;
   * `lost`: it failed or ended before a session took it. Absent: processes are only spawned ahead.
   */
  initialize?: ((name: string, config: ServerConfig, created: CreatedTransport, key: string, lost: () => void) => A) | undefined;
}

export class WarmPool<A extends Ahead = Ahead> {
  private readonly waiting = new Map<string, Warm<A>[]>();
  /** The capability key of the last session that asked for each server: what its processes are connected ahead with. */
  private readonly keys = new Map<string, string>();
  /** When sessions asked for a process of each server (newest last; only those within windowMs, or the last one). */
  private readonly demand = new Map<string, number[]>();
  /** Per server, processes the pool started that are not yet running (or connected ahead): at most STARTS_AT_ONCE. */
  private readonly starting = new Map<string, number>();
  private started = false;
  private closed = false;
  /** When a session last asked for a process of any server, or opened (held()). */
  private lastAsk: number | undefined;
  /** Since when starts have been held without a break, and the servers whose fill waits for it to end. */
  private heldSince: number | undefined;
  private readonly heldFills = new Set<string>();
  private holdTimer: TimerHandle | undefined;
  /** Per server, spares that failed in a row and when the next start may begin (FAILED_START_BACKOFF). */
  private readonly failures = new Map<string, { count: number; retryAt: number; timer?: TimerHandle | undefined }>();
  /** Trims the pools to their demand while any process waits. */
  private trimTimer: TimerHandle | undefined;
  private readonly clock: Clock;
  private readonly windowMs: number;
  private readonly idleMs: number;

  constructor(
    private readonly inner: TransportFactory,
    private readonly options: WarmPoolOptions<A>,
  ) {
    this.clock = options.clock ?? systemClock;
    this.windowMs = options.windowMs ?? 30_000;
    this.idleMs = options.idleMs ?? 300_000;
  }

  /** The factory for session connections: a waiting process (not connected ahead) of the same config when there is one. */
  readonly factory: TransportFactory = (name, config, transportOptions) => {
    this.asked(name);
    const warm = this.take(name, config, undefined);
    if (warm) warm.release(); // the connection holds its own slot
    this.fillSoon(name);
    return warm ? warm.created : this.inner(name, config, transportOptions);
  };

  /**
   * A connection to `name` made ahead with capability key `key`, for a session whose own key it is, and the
   * child slot its process holds (the taker frees it when the process is gone). Undefined when none waits:
   * the session then connects through `factory` (which counts the demand). Either way, `key` is what the
   * pool connects ahead with from now on.
   */
  takeAhead(name: string, config: ServerConfig, key: string): { value: A; release: () => void } | undefined {
    if (!this.options.initialize) return undefined;
    this.keys.set(name, key);
    const warm = this.take(name, config, key);
    if (!warm) return undefined;
    this.asked(name);
    this.fillSoon(name);
    return { value: warm.ahead!.value, release: warm.release };
  }

  /**
   * A session is opening. With lazy sessions (ADR 0034) its initialize takes no process, so it does not ask; but it is
   * a burst's first step, and its first call comes next: starts wait as after a take (held(), §7), the demand is unchanged.
   */
  opening(): void {
    this.lastAsk = this.clock.now();
  }

  /** Ends the waiting processes of `name` (its server was removed or changed); the next use fills the pool again. */
  evict(name: string): void {
    this.clearFailures(name); // a changed config may start
    for (const warm of [...(this.waiting.get(name) ?? [])]) void this.drop(name, warm);
  }

  /** From now on, servers that sessions use are kept warm. */
  start(): void {
    this.started = true;
  }

  /** Starts processes for `name` until its pool meets the demand (or the child cap is reached). */
  fill(name: string): void {
    if (!this.started || this.closed || this.options.size === 0) return;
    const config = this.options.warmable(name);
    if (!config) return;
    if (this.backingOff(name)) return;
    const list = this.list(name);
    const wanted = this.wanted(name);
    const key = this.options.initialize ? this.keys.get(name) : undefined;
    if (list.length < wanted && (this.starting.get(name) ?? 0) < STARTS_AT_ONCE && this.held(name)) return;
    while (list.length < wanted && (this.starting.get(name) ?? 0) < STARTS_AT_ONCE) {
      const release = this.options.children.tryAcquire(name);
      if (!release) return; // at the cap: sessions' own processes come first
      const created = this.inner(name, config);
      const transport = created.transport as Partial<Prestartable>;
      if (typeof transport.prestart !== "function") {
        release();
        void created.terminate?.();
        return; // not a process this pool can start ahead (an injected factory)
      }
      const warm: Warm<A> = { config, created, transport: transport as Prestartable, release, since: this.clock.now() };
      list.push(warm);
      if (key !== undefined) {
        // Connected ahead: the connection starts the process; a drop or failure before a take ends it (lost).
        warm.ahead = { key, value: this.options.initialize!(name, config, created, key, () => void this.failed(name, warm)) };
        this.whileStarting(name, warm, warm.ahead.value.ready);
        continue;
      }
      // Died while waiting (take() clears this before a session's client sets its own).
      warm.transport.onclose = () => void this.failed(name, warm);
      const started = warm.transport.prestart();
      started.catch((err: unknown) => void this.failed(name, warm, err));
      this.whileStarting(name, warm, started);
    }
    this.scheduleTrim();
  }

  /**
   * `warm` counts as starting until `started` settles or it is dropped; then the pool fills on. Refilling one at a
   * time keeps a burst of takes from starting as many processes at once beside the sessions' own first calls (16 new
   * sessions: 16 upstream starts on the same cores as their calls, ADR 0044).
   */
  private whileStarting(name: string, warm: Warm<A>, started: Promise<void>): void {
    this.starting.set(name, (this.starting.get(name) ?? 0) + 1);
    warm.started = () => {
      warm.started = undefined;
      const n = (this.starting.get(name) ?? 1) - 1;
      if (n > 0) this.starting.set(name, n);
      else this.starting.delete(name);
      this.fillSoon(name);
    };
    const done = () => warm.started?.();
    started.then(done, done);
  }

  /**
   * Whether starts wait now: a session asked for a process less than QUIET_MS ago — sessions are opening and their
   * first calls run (16 at once: their takes, initialize, first calls) — unless starts have waited MAX_HOLD_MS in a
   * row. A server-everything start is ≈ 0.3 s of CPU, on the same 2 cores as those calls, for a spare nobody waits
   * for yet (ADR 0044 §7). `name` fills when the hold ends.
   */
  private held(name: string): boolean {
    const now = this.clock.now();
    if (this.lastAsk === undefined || now - this.lastAsk >= QUIET_MS || (this.heldSince !== undefined && now - this.heldSince >= MAX_HOLD_MS)) {
      this.heldSince = undefined;
      return false;
    }
    this.heldSince ??= now;
    this.heldFills.add(name);
    if (this.holdTimer) this.clock.clearTimeout(this.holdTimer);
    const until = Math.min(this.lastAsk + QUIET_MS, this.heldSince + MAX_HOLD_MS);
    this.holdTimer = this.clock.setTimeout(() => {
      this.holdTimer = undefined;
      const names = [...this.heldFills];
      this.heldFills.clear();
      for (const n of names) this.fill(n);
    }, until - now);
    return true;
  }

  /**
   * How many processes of `name` should wait now: as many as sessions asked
   * for in the last windowMs (at least 1, at most size); 0 when none was asked
   * for in idleMs.
   */
  wanted(name: string): number {
    const times = this.demand.get(name);
    const now = this.clock.now();
    const last = times?.at(-1);
    if (last === undefined || now - last >= this.idleMs) return 0;
    const recent = times!.filter((t) => now - t < this.windowMs).length;
    return Math.min(this.options.size, Math.max(1, recent));
  }

  /** A session asked for a process of `name` (the demand the pool follows). */
  private asked(name: string): void {
    const now = this.clock.now();
    this.lastAsk = now;
    const times = (this.demand.get(name) ?? []).filter((t) => now - t < this.windowMs);
    times.push(now);
    // More than `size` within the window asks for no more: the bound holds the memory too.
    this.demand.set(name, times.slice(-Math.max(1, this.options.size)));
  }

  /** Ends waiting processes beyond each server's demand (the oldest first); runs while any waits. */
  private trim(): void {
    this.trimTimer = undefined;
    if (this.closed) return;
    for (const [name, list] of this.waiting) {
      const wanted = this.wanted(name);
      // Connected ahead for capabilities the last session did not have: ended first.
      const key = this.keys.get(name);
      for (const warm of list.filter((w) => w.ahead && w.ahead.key !== key)) void this.drop(name, warm);
      while (list.length > wanted) {
        const warm = list[0]!;
        this.options.logger.info({ server: name, waiting: list.length - 1 }, "warm_process_released");
        void this.drop(name, warm);
      }
      if (wanted === 0) {
        this.demand.delete(name);
        this.keys.delete(name);
      }
    }
    this.scheduleTrim();
  }

  private scheduleTrim(): void {
    if (this.trimTimer || this.closed || this.size === 0) return;
    // Often enough that demand falling within a window is followed; a pool at rest checks a few times a window.
    this.trimTimer = this.clock.setTimeout(() => this.trim(), Math.max(50, Math.min(this.windowMs, this.idleMs) / 4));
  }

  /**
   * Frees a child slot for a connection to `server` at the cap (ChildProcessLimiter.reserve): hands over the slot of
   * `server`'s own waiting process (returned; the connection takes the process in the same tick — if not, it is ended),
   * else ends a waiting one — `server`'s own connection made ahead first (it is only taken whole, takeAhead), then
   * another server's — and settles once its process is gone, so the cap holds even while one ends. Undefined when
   * nothing waits.
   */
  reclaim(server: string): (() => void) | Promise<void> | undefined {
    const own = this.waiting.get(server) ?? [];
    const bare = own.find((w) => !w.ahead);
    if (bare) {
      // Its slot goes to the asking connection as is (nothing can take it in between); the process follows in this tick.
      const slot = bare.release;
      bare.release = () => {};
      setImmediate(() => void this.drop(server, bare));
      return slot;
    }
    if (own[0]) return this.drop(server, own[0]);
    for (const [name, list] of this.waiting) if (list[0]) return this.drop(name, list[0]);
    return undefined;
  }

  /** Processes waiting now, per server. */
  get size(): number {
    let n = 0;
    for (const list of this.waiting.values()) n += list.length;
    return n;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.trimTimer) this.clock.clearTimeout(this.trimTimer);
    this.trimTimer = undefined;
    if (this.holdTimer) this.clock.clearTimeout(this.holdTimer);
    this.holdTimer = undefined;
    for (const name of [...this.failures.keys()]) this.clearFailures(name);
    const all = [...this.waiting.values()].flat();
    this.waiting.clear();
    await Promise.allSettled(
      all.map(async (warm) => {
        await (warm.ahead ? warm.ahead.value.close() : warm.created.terminate?.());
        warm.release();
      }),
    );
  }

  /**
   * A waiting process of `config`: connected ahead with `key`, or (key undefined) only spawned. Those of another
   * config, and dead ones, are ended on the way; those of the other kind or another key stay.
   */
  private take(name: string, config: ServerConfig, key: string | undefined): Warm<A> | undefined {
    for (const warm of [...(this.waiting.get(name) ?? [])]) {
      if (!sameServerConfig(warm.config, config)) {
        void this.drop(name, warm);
        continue;
      }
      if (warm.ahead?.key !== key) continue;
      if (!(warm.ahead ? warm.ahead.value.alive : warm.transport.running)) {
        void this.failed(name, warm);
        continue;
      }
      const list = this.waiting.get(name)!;
      list.splice(list.indexOf(warm), 1);
      this.clearFailures(name); // it started: the server can

      // A process's own watch ends here; a connection made ahead keeps its client's (the client set it).
      if (!warm.ahead) warm.transport.onclose = undefined;
      return warm;
    }
    return undefined;
  }

  private fillSoon(name: string): void {
    setImmediate(() => this.fill(name));
  }

  private list(name: string): Warm<A>[] {
    let list = this.waiting.get(name);
    if (!list) {
      list = [];
      this.waiting.set(name, list);
    }
    return list;
  }

  /**
   * `warm` failed while it waited (see FAILED_START_BACKOFF): counted unless it had lived STABLE_MS, logged, and
   * dropped. Not a failure when it no longer waits (dropped or taken before).
   */
  private failed(name: string, warm: Warm<A>, err?: unknown): Promise<void> {
    if (!this.waiting.get(name)?.includes(warm) || this.closed) return this.drop(name, warm);
    const now = this.clock.now();
    if (now - warm.since >= STABLE_MS) this.clearFailures(name);
    else {
      const previous = this.failures.get(name);
      if (previous?.timer) this.clock.clearTimeout(previous.timer);
      const count = (previous?.count ?? 0) + 1;
      const retryInMs = backoffDelay(FAILED_START_BACKOFF, count);
      this.failures.set(name, { count, retryAt: now + retryInMs });
      this.options.logger.warn({ server: name, failures: count, retryInMs, ...(err === undefined ? {} : { err: errorMessage(err) }) }, "warm_process_failed");
    }
    return this.drop(name, warm);
  }

  /** Whether `name`'s next start waits for its failures' delay; if so, fill(name) runs when it ends. */
  private backingOff(name: string): boolean {
    const failures = this.failures.get(name);
    if (!failures) return false;
    const wait = failures.retryAt - this.clock.now();
    if (wait <= 0) return false;
    failures.timer ??= this.clock.setTimeout(() => {
      failures.timer = undefined;
      this.fill(name);
    }, wait);
    return true;
  }

  private clearFailures(name: string): void {
    const failures = this.failures.get(name);
    if (failures?.timer) this.clock.clearTimeout(failures.timer);
    this.failures.delete(name);
  }

  /** Ends `warm` if it still waits; settles once its child slot is free. */
  private drop(name: string, warm: Warm<A>): Promise<void> {
    const list = this.waiting.get(name);
    const i = list?.indexOf(warm) ?? -1;
    if (i < 0) return Promise.resolve();
    list!.splice(i, 1);
    warm.started?.();
    return this.end(warm);
  }

  /** Ends a waiting process (and its connection made ahead); its child slot frees once its process group is gone (as a connection's does). */
  private end(warm: Warm<A>): Promise<void> {
    if (!warm.ahead) warm.transport.onclose = undefined;
    const ahead = warm.ahead?.value;
    const ended = (ahead ? ahead.close().then(() => warm.created.terminate?.()) : warm.created.terminate?.()) ?? Promise.resolve();
    return ended.then(warm.release, warm.release);
  }
}
