/**
 * The state store's lifecycle in the gateway (docs/adr/0007): opened once, by
 * the first listen()/serveStdio(), before any session exists (a store that
 * cannot be opened fails the start, EMCP_STORE_UNAVAILABLE, never falls back
 * to memory); a sweep timer then deletes expired rows; closed last. An
 * injected store is the caller's to close. healthy() is what /readyz asks,
 * at most once per READY_CHECK_MS (concurrent probes share one check).
 * With replicas (ADR 0013) the store is wrapped so server changes reach them.
 */
import type { Clock } from "../clock.js";
import type { Cluster } from "../cluster/index.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { Observability } from "../observability/observability.js";
import type { Store } from "../store/contracts.js";
import { openStore } from "../store/open.js";
import { sweepStoreLogged } from "./recovery.js";

/** How long a /readyz store health check answers for later probes. */
const READY_CHECK_MS = 1_000;
/** A store health check that takes longer counts as failed. */
const READY_CHECK_TIMEOUT_MS = 2_000;

export interface GatewayStoreOptions {
  settings: GatewaySettings;
  clock: Clock;
  logger: Logger;
  observability: Observability;
  cluster: Cluster | undefined;
  /** Already open (tests, benches): used as is, never closed here. */
  injected: Store | undefined;
}

export class GatewayStore {
  #store: Store | undefined;
  /** The store open() opened, unwrapped (for announce and problem). */
  #raw: Store | undefined;
  #check: { at: number; ok: boolean } | undefined;
  #checking: Promise<boolean> | undefined;
  #sweepTimer: ReturnType<Clock["setTimeout"]> | undefined;
  #sweeping: Promise<void> = Promise.resolve();
  #sweepsStopped = false;

  constructor(private readonly o: GatewayStoreOptions) {
    this.#store = o.injected && o.observability.store(o.injected);
  }

  /** The store, or undefined before open(). */
  get current(): Store | undefined {
    return this.#store;
  }

  /** The open store; EMCP_CLOSED before the gateway started (sessions exist only after it, so they always find it open). */
  opened(): Store {
    if (!this.#store) throw new GatewayError(ErrorCodes.CLOSED, "the state store is not open: the gateway has not started (listen() or serveStdio())");
    return this.#store;
  }

  /** Opens `gateway.store` (unless one was injected); returns the unwrapped store for the cluster. */
  async open(): Promise<Store> {
    if (this.#store) return this.#store;
    // Exclusive: a second gateway on the same SQLite file is refused, naming this one (ADR 0007, "One gateway per file").
    const raw = await openStore(this.o.settings.store, { clock: this.o.clock, exclusive: true, logger: this.o.logger });
    this.#raw = raw;
    this.#store = this.o.observability.store(this.o.cluster ? this.o.cluster.wrap(raw) : raw);
    return raw;
  }

  /** Records the listening port as the store's owner (SQLite); a failure is only logged. */
  async announce(port: number): Promise<void> {
    await this.#raw?.announce?.({ port }).catch((err: unknown) => this.o.logger.warn({ err: errorMessage(err) }, "store_owner_not_recorded"));
  }

  /** The store's health, asked at most once per READY_CHECK_MS; logs store_unhealthy with the reason. */
  healthy(): boolean | Promise<boolean> {
    const current = this.#store;
    if (!current) return true;
    const { clock, logger } = this.o;
    if (this.#check && clock.now() - this.#check.at < READY_CHECK_MS) return this.#check.ok;
    this.#checking ??= boundedHealthCheck(current, clock).then((ok) => {
      this.#check = { at: clock.now(), ok };
      this.#checking = undefined;
      if (!ok) logger.warn({ store: current.kind, location: current.location, reason: (this.#raw ?? this.o.injected)?.problem?.() }, "store_unhealthy");
      return ok;
    });
    return this.#checking;
  }

  /** Deletes expired task and pending-request rows every sessions.sweepIntervalMs, until stopSweeps(). */
  startSweeps(): void {
    if (this.#sweepsStopped) return;
    this.#sweepTimer = this.o.clock.setTimeout(() => {
      this.#sweeping = sweepStoreLogged(this.opened(), this.o.clock.now(), this.o.logger).then(async () => {
        await this.healthy(); // logs store_unhealthy with the reason, also when no probe asks (a deleted file, a full disk)
        this.startSweeps();
      });
    }, this.o.settings.sessions.sweepIntervalMs);
  }

  stopSweeps(): void {
    this.#sweepsStopped = true;
    this.o.clock.clearTimeout(this.#sweepTimer);
  }

  /** After a running sweep, closes the store this gateway opened (failures logged as store_close_failed). */
  async close(): Promise<void> {
    this.stopSweeps();
    await this.#sweeping;
    if (this.#store && !this.o.injected)
      await this.#store.close().catch((err: unknown) => this.o.logger.error({ err: errorMessage(err) }, "store_close_failed"));
  }
}

/** store.healthy(), false when it fails or takes longer than READY_CHECK_TIMEOUT_MS (its timer is cleared either way). */
async function boundedHealthCheck(store: Store, clock: Clock): Promise<boolean> {
  let timer: ReturnType<Clock["setTimeout"]> | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = clock.setTimeout(() => resolve(false), READY_CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([store.healthy().catch(() => false), timeout]);
  } finally {
    clock.clearTimeout(timer);
  }
}
