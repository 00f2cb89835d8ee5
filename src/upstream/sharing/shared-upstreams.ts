/**
 * SharedUpstreams: the gateway's shared connections ("sharing": "shared",
 * docs/adr/0010), one per server name and config. A session attaches on first
 * use (UpstreamPool). When a server is removed or its config changes (the
 * registry says so), the old shared connection is retired — closed at once
 * if no session is attached, else once its last session has detached (every
 * session is disconnected from the server by the change) — and the next
 * attach makes a new one; an update rolled back finds the retiring one again.
 * A principal's set (`unused` given) also closes a connection once its last
 * session has left (after `linger`, when given), and says when none is left.
 * close() ends them all.
 */
import type { Clock, TimerHandle } from "../../clock.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { Logger } from "../../logging.js";
import { sameServerConfig, type ServerRegistry } from "../registry.js";
import type { UpstreamConnection } from "../connection.js";
import { SharedUpstream, type NewSharedConnection } from "./shared.js";
import type { SharedAttachment, SharedUpstreamView } from "./shared-view.js";

export interface SharedUpstreamsOptions {
  /** A new connection to `name` (the upstream factory's). */
  connection(name: string, parts: Parameters<NewSharedConnection>[0]): UpstreamConnection;
  /** Each view's default request timeout (gateway.upstream.requestTimeoutMs). */
  requestTimeoutMs: number;
  /**
   * One principal's set (issue 23): each connection closes when its last session detaches, and this is called once
   * none is left (the owner forgets the set and closes it). Absent: connections stay until their config changes.
   */
  unused?: (() => void) | undefined;
  /** With `unused`: a connection whose last session left stays this long for the next (a new session takes it). */
  linger?: { ms: number; clock: Clock } | undefined;
}

export class SharedUpstreams {
  private readonly byName = new Map<string, SharedUpstream>();
  /** Replaced or removed servers' connections, closing once their sessions have detached. */
  private readonly retiring = new Set<SharedUpstream>();
  /** Connections left by their last session, each closing when its timer fires (`linger`). */
  private readonly lingering = new Map<SharedUpstream, TimerHandle>();
  private closed = false;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly registry: ServerRegistry,
    private readonly options: SharedUpstreamsOptions,
    private readonly logger: Logger,
  ) {
    this.unsubscribe = registry.onChange((name) => {
      const shared = this.byName.get(name);
      if (shared) this.settle(shared);
    });
  }

  /** A new view of `name`'s shared connection for one session (connect it with view.connect()). */
  attach(name: string, attachment: SharedAttachment): SharedUpstreamView {
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, "the gateway is shutting down");
    const entry = this.registry.require(name);
    let shared = this.byName.get(name);
    if (shared && !sameServerConfig(shared.config, entry.config)) {
      this.retire(shared);
      shared = undefined;
    }
    // An update that was rolled back: the connection of the config now current is still there.
    shared ??= [...this.retiring].find((r) => r.name === name && sameServerConfig(r.config, entry.config));
    if (shared && this.retiring.delete(shared)) this.byName.set(name, shared);
    if (shared) this.stopLingering(shared);
    if (!shared) {
      // The last session leaving a retired (or removed) server closes its connection.
      shared = new SharedUpstream(
        name,
        entry.config,
        (parts) => this.options.connection(name, parts),
        this.options.requestTimeoutMs,
        this.logger,
        (s) => this.settle(s),
      );
      this.byName.set(name, shared);
    }
    return shared.attach(attachment);
  }

  /** The shared connection of `name`, if one was made. */
  get(name: string): SharedUpstream | undefined {
    return this.byName.get(name);
  }

  list(): SharedUpstream[] {
    return [...this.byName.values()];
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe();
    for (const shared of [...this.lingering.keys()]) this.stopLingering(shared);
    const all = [...this.byName.values(), ...this.retiring];
    this.byName.clear();
    this.retiring.clear();
    await Promise.allSettled(all.map((s) => s.close()));
  }

  private settle(shared: SharedUpstream): void {
    if (this.closed || shared.attached > 0) return;
    const entry = this.registry.get(shared.name);
    const current = this.byName.get(shared.name) === shared && entry !== undefined && sameServerConfig(shared.config, entry.config);
    if (current && !this.options.unused) return;
    const linger = this.options.linger;
    if (current && linger) {
      // Kept for the next session; its timer closes it (an attach stops the timer).
      if (!this.lingering.has(shared)) {
        const timer = linger.clock.setTimeout(() => {
          this.lingering.delete(shared);
          this.release(shared);
        }, linger.ms);
        this.lingering.set(shared, timer);
      }
      return;
    }
    this.release(shared);
  }

  /** `shared` has no session left: it closes, and the owner hears when the set is empty. */
  private release(shared: SharedUpstream): void {
    if (this.closed || shared.attached > 0) return;
    this.retire(shared);
    if (this.options.unused && this.byName.size === 0 && this.retiring.size === 0) this.options.unused();
  }

  private stopLingering(shared: SharedUpstream): void {
    const timer = this.lingering.get(shared);
    if (timer === undefined) return;
    this.options.linger?.clock.clearTimeout(timer);
    this.lingering.delete(shared);
  }

  private retire(shared: SharedUpstream): void {
    this.stopLingering(shared);
    if (this.byName.get(shared.name) === shared) this.byName.delete(shared.name);
    if (shared.attached > 0) {
      this.retiring.add(shared);
      return;
    }
    this.retiring.delete(shared);
    shared.close().catch((err: unknown) => this.logger.warn({ server: shared.name, err: String(err) }, "shared_upstream_close_failed"));
  }
}
