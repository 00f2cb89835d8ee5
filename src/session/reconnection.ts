/**
 * Reconnection of one session's upstreams (design UP-6..UP-8): after a drop, connect
 * again in the background with capped exponential backoff and jitter; when a
 * connection to a dropped server succeeds (in the background or on use),
 * detect a restart, refresh the server's lists, report which changed
 * (list_changed) and emit `server_reconnected` with counts. Only connecting
 * is retried — never a tool call, which may have had side effects. The
 * backoff starts over only once a connection stayed up `stableAfterMs`: an
 * upstream that dies right after each reconnect (a crash loop) keeps counting
 * attempts, so maxDelayMs and maxAttempts apply (design UP-13).
 */
import type { Implementation } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, TimerHandle } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import { backoffDelay } from "../upstream/backoff.js";
import type { UpstreamHandle } from "../upstream/handle.js";
import type { ListKind } from "../upstream/requests.js";

export interface ReconnectionHost {
  settings: GatewaySettings;
  clock: Clock;
  logger: Logger;
  random?: (() => number) | undefined;
  /** Whether the server is still configured and the session still open. */
  wanted(server: string): boolean;
  connect(server: string): Promise<UpstreamHandle>;
  /** A list of `server` changed across the reconnect. */
  listChanged(server: string, kind: ListKind): void;
  reconnected(server: string, report: ReconnectReport): void;
}

export interface ReconnectReport {
  attempts: number;
  restarted: boolean;
  changedLists: ListKind[];
  failedTasks: number;
  rejectedRequests: number;
}

/** What the session remembers about a dropped upstream until it is back. */
interface Dropped {
  attempt: number;
  timer?: TimerHandle;
  serverInfo: Implementation | undefined;
  upstreamSessionId: string | undefined;
  digests: UpstreamHandle["listDigests"];
  failedTasks: number;
  rejectedRequests: number;
}

const KINDS: readonly ListKind[] = ["tools", "resources", "prompts"];

/** A reconnect that succeeded: its attempt count carries over to a drop before `stableAfterMs`. */
interface Reconnected {
  attempt: number;
  /** Epoch ms (the host's clock). */
  at: number;
}

export class Reconnections {
  private readonly dropped = new Map<string, Dropped>();
  private readonly recent = new Map<string, Reconnected>();

  constructor(private readonly host: ReconnectionHost) {}

  /** The connection to `server` dropped (its tasks and requests were already failed). */
  onDrop(server: string, lost: UpstreamHandle | undefined, counts: { failedTasks: number; rejectedRequests: number }): void {
    const previous = this.dropped.get(server);
    this.clearTimer(previous);
    // A drop during an earlier outage keeps what was known before the first one.
    const state: Dropped = {
      attempt: Math.max(previous?.attempt ?? 0, this.carriedAttempts(server)),
      serverInfo: previous ? previous.serverInfo : lost?.serverInfo,
      upstreamSessionId: previous ? previous.upstreamSessionId : lost?.upstreamSessionId,
      digests: previous ? previous.digests : { ...lost?.listDigests },
      failedTasks: (previous?.failedTasks ?? 0) + counts.failedTasks,
      rejectedRequests: (previous?.rejectedRequests ?? 0) + counts.rejectedRequests,
    };
    this.dropped.set(server, state);
    this.schedule(server, state);
  }

  /** A connection to `server` succeeded: reconcile if it had dropped. */
  onConnected(server: string, conn: UpstreamHandle): void {
    const state = this.dropped.get(server);
    if (state) void this.reconcile(server, conn, state);
  }

  stop(server: string): void {
    this.clearTimer(this.dropped.get(server));
    this.dropped.delete(server);
    this.recent.delete(server);
  }

  /** The attempts of the last reconnect, when that connection dropped before it was stable (else 0: the backoff starts over). */
  private carriedAttempts(server: string): number {
    const recent = this.recent.get(server);
    this.recent.delete(server);
    const stableAfterMs = this.host.settings.upstream.reconnect.stableAfterMs;
    return recent && this.host.clock.now() - recent.at < stableAfterMs ? recent.attempt : 0;
  }

  close(): void {
    for (const server of [...this.dropped.keys()]) this.stop(server);
  }

  private schedule(server: string, state: Dropped): void {
    const { host } = this;
    const policy = host.settings.upstream.reconnect;
    if (this.dropped.get(server) !== state || !host.wanted(server)) return;
    if (state.attempt >= policy.maxAttempts) {
      const reason = `gave up reconnecting '${server}' after ${state.attempt} attempts (gateway.upstream.reconnect.maxAttempts), each connection dropping within stableAfterMs (${policy.stableAfterMs} ms) or failing; the next use of the server tries again`;
      host.logger.warn({ server, attempts: state.attempt, reason }, "upstream_reconnect_gave_up");
      return; // The next use of the server tries again.
    }
    state.attempt++;
    const attempt = state.attempt;
    const delayMs = backoffDelay(policy, attempt, host.random);
    // Operator log events (design EV-13): server_reconnecting / server_reconnect_failed.
    host.logger.info({ server, attempt, delayMs }, "server_reconnecting");
    state.timer = host.clock.setTimeout(() => {
      delete state.timer;
      host.connect(server).catch((err: unknown) => {
        host.logger.warn({ server, attempt, error: errorMessage(err) }, "server_reconnect_failed");
        this.schedule(server, state);
      });
    }, delayMs);
  }

  /**
   * A restart is a new stdio process, a new upstream session id or different
   * server info. Each list is refreshed and compared with its digest from
   * before the drop; one never fetched then (or not fetchable now) counts as
   * changed, since the client cannot know.
   */
  private async reconcile(server: string, conn: UpstreamHandle, state: Dropped): Promise<void> {
    this.stop(server);
    // Until it has stayed up stableAfterMs, a drop of this connection (even during the refresh below) goes on counting attempts.
    this.recent.set(server, { attempt: Math.max(1, state.attempt), at: this.host.clock.now() });
    const restarted =
      conn.pid !== null || conn.upstreamSessionId !== state.upstreamSessionId || JSON.stringify(conn.serverInfo) !== JSON.stringify(state.serverInfo);
    const refresh: Record<ListKind, () => Promise<unknown>> = {
      tools: () => conn.listTools(),
      resources: () => conn.listResources(),
      prompts: () => conn.listPrompts(),
    };
    const changedLists: ListKind[] = [];
    for (const kind of KINDS) {
      if (!conn.capabilities?.[kind]) continue;
      const ok = await refresh[kind]().then(
        () => true,
        () => false,
      );
      if (ok && state.digests[kind] !== undefined && conn.listDigests[kind] === state.digests[kind]) continue;
      changedLists.push(kind);
      this.host.listChanged(server, kind);
    }
    const report = { attempts: Math.max(1, state.attempt), restarted, changedLists, failedTasks: state.failedTasks, rejectedRequests: state.rejectedRequests };
    this.host.reconnected(server, report);
    this.host.logger.info({ server, restarted, changedLists }, "upstream_reconnected");
  }

  private clearTimer(state: Dropped | undefined): void {
    if (state?.timer) this.host.clock.clearTimeout(state.timer);
    if (state) delete state.timer;
  }
}
