/**
 * Which upstreams an /all/mcp session can list now (design TF-10). A list,
 * or the session's initialize, waits for an upstream at most
 * `gateway.transparent.aggregateWaitMs`; one that did not connect
 * within that bound, or failed, is missing: later lists do not wait for it
 * again. Its connect attempt goes on in the background; once it fails, the
 * next list after a backoff (`gateway.upstream.reconnect`) starts another,
 * again without waiting. When a missing upstream connects, `joined` tells the
 * client its lists changed. Lists name the missing upstreams and why
 * (handlers.ts: `_meta["emceepee/unavailable"]`).
 */
import type { Clock, TimerHandle } from "../../clock.js";
import { toToolErrorText } from "../../errors.js";
import type { Logger } from "../../logging.js";
import { backoffDelay, type BackoffPolicy } from "../../upstream/backoff.js";
import type { UpstreamHandle } from "../../upstream/handle.js";

export interface AggregateOptions {
  /** The session's connection to `server` (connecting on demand; concurrent callers share one attempt). */
  connect(server: string): Promise<UpstreamHandle>;
  /** The session's live connection to `server`, if it has one now (another path, e.g. a call or a reconnection, may have made it). */
  live?(server: string): UpstreamHandle | undefined;
  clock: Clock;
  /** How long a list or initialize waits for an upstream not found missing before. */
  boundMs: number;
  /** Delay before a failed upstream is tried again (in the background). */
  backoff: BackoffPolicy;
  random?: (() => number) | undefined;
  logger: Logger;
  /** A missing upstream connected: the client's lists changed. */
  joined(server: string): void;
}

export interface Missing {
  server: string;
  reason: string;
}

export interface Reached {
  /** The upstreams connected within the bound, in the order asked. */
  connected: Array<{ server: string; conn: UpstreamHandle }>;
  missing: Missing[];
}

interface UpstreamState {
  /** The connect attempt this connector started and still waits for. */
  attempt?: Promise<UpstreamHandle> | undefined;
  /** >0: missing (not waited for again until it connects). */
  misses: number;
  /** When a failed upstream may be tried again. */
  retryAt: number;
  reason?: string | undefined;
}

const TIMED_OUT = Symbol("timed out");

export class AggregateConnector {
  private readonly states = new Map<string, UpstreamState>();
  private closed = false;

  constructor(private readonly o: AggregateOptions) {}

  async reach(servers: readonly string[]): Promise<Reached> {
    // Servers removed from the registry are forgotten (the map stays as small as the server list).
    for (const name of this.states.keys()) if (!servers.includes(name)) this.states.delete(name);
    const outcomes = await Promise.all(servers.map((server) => this.reachOne(server)));
    const reached: Reached = { connected: [], missing: [] };
    servers.forEach((server, i) => {
      const outcome = outcomes[i]!;
      if ("reason" in outcome) reached.missing.push(outcome);
      else reached.connected.push({ server, conn: outcome });
    });
    return reached;
  }

  /** No more `joined` calls (the face closed); attempts under way finish on their own. */
  close(): void {
    this.closed = true;
  }

  private async reachOne(server: string): Promise<UpstreamHandle | Missing> {
    let state = this.states.get(server);
    if (!state) this.states.set(server, (state = { misses: 0, retryAt: 0 }));
    const live = this.o.live?.(server);
    if (live && state.misses > 0 && !state.attempt) {
      // Connected by another path: listed now, so no list_changed is owed.
      state.misses = 0;
      state.reason = undefined;
      this.o.logger.info({ server }, "aggregate_upstream_joined");
    }
    if (live && state.misses === 0) return live;
    if (state.misses > 0) {
      if (!state.attempt && this.o.clock.now() >= state.retryAt) void this.start(server, state);
      return { server, reason: state.reason ?? "not connected yet" };
    }
    const attempt = state.attempt ?? this.start(server, state);
    let timer: TimerHandle | undefined;
    const bound = new Promise<typeof TIMED_OUT>((resolve) => (timer = this.o.clock.setTimeout(() => resolve(TIMED_OUT), this.o.boundMs)));
    try {
      const outcome = await Promise.race([attempt, bound]);
      if (outcome !== TIMED_OUT) return outcome;
      if (state.misses === 0 && state.attempt === attempt) {
        state.misses = 1;
        state.reason = `did not connect within ${this.o.boundMs} ms (gateway.transparent.aggregateWaitMs); still connecting in the background, a list_changed follows when it joins`;
        this.o.logger.warn({ server, boundMs: this.o.boundMs }, "aggregate_upstream_missing");
      }
      return { server, reason: state.reason ?? "not connected yet" };
    } catch {
      // start() recorded why (its handlers ran first).
      return { server, reason: state.reason ?? "not connected" };
    } finally {
      this.o.clock.clearTimeout(timer);
    }
  }

  private start(server: string, state: UpstreamState): Promise<UpstreamHandle> {
    const attempt = this.o.connect(server);
    state.attempt = attempt;
    attempt.then(
      () => {
        if (state.attempt !== attempt) return;
        state.attempt = undefined;
        const wasMissing = state.misses > 0;
        state.misses = 0;
        state.reason = undefined;
        if (wasMissing && !this.closed) {
          this.o.logger.info({ server }, "aggregate_upstream_joined");
          this.o.joined(server);
        }
      },
      (err: unknown) => {
        if (state.attempt !== attempt) return;
        state.attempt = undefined;
        state.misses++;
        state.reason = toToolErrorText(err);
        state.retryAt = this.o.clock.now() + backoffDelay(this.o.backoff, state.misses, this.o.random);
      },
    );
    return attempt;
  }
}
