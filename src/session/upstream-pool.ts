/**
 * UpstreamPool: one session's handle per upstream and its lifecycle —
 * made by the upstream factory (upstream/sharing/factory.ts) on demand
 * (concurrent callers share one attempt), the receiver tasks that die with
 * an own connection, background reconnection after a drop
 * (reconnection.ts), idle release, removal and close. What an upstream sends
 * is answered by the handlers the session supplies (routing.ts): this file
 * decides nothing about the downstream client, nor how a handle is made.
 */
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, TimerHandle } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { ReceiverTaskStore } from "../upstream/receiver-tasks.js";
import type { UpstreamHandlers } from "../upstream/client-handlers.js";
import type { ListKind } from "../upstream/requests.js";
import type { CloseMode, ConnectionPersistence } from "../upstream/session-continuation.js";
import type { UpstreamHandle } from "../upstream/handle.js";
import type { ServerRegistry } from "../upstream/registry.js";
import type { UpstreamFactory } from "../upstream/sharing/factory.js";
import { Reconnections, type ReconnectReport } from "./reconnection.js";

/** What a pool needs from the gateway (shared by all sessions). */
export interface UpstreamPoolDeps {
  registry: ServerRegistry;
  settings: GatewaySettings;
  clock: Clock;
  /** Makes the session's handle to a server: its own connection or its view of the shared one (docs/adr/0010). */
  upstreams: UpstreamFactory;
  /** Jitter source for reconnect backoff (tests inject a fixed one). */
  random?: (() => number) | undefined;
}

/** What a pool needs from its session. */
export interface UpstreamPoolHost {
  sessionId: string;
  /** Whom the session acts for: upstreams with `auth` are connected with this principal's own credentials. */
  principal?: () => { issuer: string; subject: string } | undefined;
  /** The session serves one 2026-07-28 request (UpstreamAttachment.stateless). */
  stateless?: () => boolean;
  logger: Logger;
  /** Declared to upstreams when the downstream client has roots (asked at each new connection: over stdio the client's initialize comes after the session). */
  roots(): ClientCapabilities["roots"] | undefined;
  /** How the session answers and records what `server` sends. */
  handlersFor(server: string): UpstreamHandlers;
  /** A connection to `server` is up (first time or again). */
  connected(server: string, conn: UpstreamHandle): void;
  /** An attempt to connect to `server` failed (`reason`: the connection's own account, with a stdio server's last stderr lines). */
  failed?(server: string, reason: string): void;
  /** A list of `server` changed across a reconnect. */
  listChanged(server: string, kind: ListKind): void;
  reconnected(server: string, report: ReconnectReport): void;
  /** Whether anything of the session depends on its connection to `server` now (tasks, waiting requests, subscriptions). */
  busy(server: string): boolean;
  /** What a new connection to `server` continues or sets again (upstream session, logging level, subscriptions: ADR 0007). */
  persistenceFor?(server: string): ConnectionPersistence | undefined;
}

export class UpstreamPool {
  private readonly connections = new Map<string, UpstreamHandle>();
  private readonly connecting = new Map<string, Promise<UpstreamHandle>>();
  /** Why the last connection to a server failed or dropped, kept while a new attempt replaces it (until one connects). */
  private readonly failures = new Map<string, string>();
  /** Receiver tasks per upstream (they die with the connection that created them). */
  private readonly receivers = new Map<string, ReceiverTaskStore>();
  /** Receiver stores of dropped connections still deleting their rows. */
  private readonly closingReceivers = new Set<Promise<void>>();
  private readonly reconnections: Reconnections;
  /** Idle-release checks per server (session mode; gateway.upstream.idleReleaseMs). */
  private readonly idleChecks = new Map<string, TimerHandle>();
  private closed = false;

  constructor(
    private readonly deps: UpstreamPoolDeps,
    private readonly host: UpstreamPoolHost,
  ) {
    this.reconnections = new Reconnections({
      settings: deps.settings,
      clock: deps.clock,
      logger: host.logger,
      random: deps.random,
      wanted: (server) => !this.closed && deps.registry.get(server) !== undefined,
      connect: (server) => this.connection(server),
      listChanged: (server, kind) => host.listChanged(server, kind),
      reconnected: (server, report) => host.reconnected(server, report),
    });
  }

  /** Starts connecting to `names` (every configured server the session sees) without waiting. */
  connectAllInBackground(names: readonly string[]): void {
    for (const name of names) {
      this.connection(name).catch(() => undefined);
    }
  }

  /**
   * The live connection to `name`, connecting (or reconnecting after a
   * failure) on demand. Concurrent callers share one attempt.
   */
  async connection(name: string): Promise<UpstreamHandle> {
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, "this session is closed");
    this.deps.registry.require(name);
    const existing = this.connections.get(name);
    if (existing?.status === "connected") return existing;
    const inflight = this.connecting.get(name);
    if (inflight) return inflight;
    // A view of a shared connection rejoins it after a drop; an own connection is made anew.
    if (existing?.shared && existing.status !== "closed") return this.connect(name, existing);
    if (existing?.lastError !== undefined) this.failures.set(name, existing.lastError);
    const handle = this.deps.upstreams(name, {
      sessionId: this.host.sessionId,
      handlers: this.host.handlersFor(name),
      logger: this.host.logger,
      roots: this.host.roots(),
      persistence: this.host.persistenceFor?.(name),
      principal: this.host.principal?.(),
      stateless: this.host.stateless?.(),
    });
    if (handle.receiverTasks) this.replaceReceivers(name, handle.receiverTasks);
    return this.connect(name, handle);
  }

  /** Connects `conn` as the session's handle to `name`; concurrent callers share the attempt. */
  private connect(name: string, conn: UpstreamHandle): Promise<UpstreamHandle> {
    this.connections.set(name, conn);
    const attempt = conn
      .connect()
      .then(() => {
        if (this.closed || this.connections.get(name) !== conn) {
          void conn.close();
          throw new GatewayError(ErrorCodes.CLOSED, `connection to '${name}' was closed while connecting`);
        }
        this.failures.delete(name);
        this.host.connected(name, conn);
        this.reconnections.onConnected(name, conn);
        if (!conn.shared) this.watchIdle(name, conn, conn.requestCount);
        return conn;
      })
      .catch((err: unknown) => {
        if (!this.closed && this.connections.get(name) === conn) this.host.failed?.(name, conn.lastError ?? errorMessage(err));
        throw err;
      })
      .finally(() => this.connecting.delete(name));
    this.connecting.set(name, attempt);
    return attempt;
  }

  /**
   * Idle release (session mode): a connection that sent no request for
   * `idleReleaseMs`, with nothing in flight and nothing of the session on it
   * (host.busy), is closed — its process ends — and forgotten; the next use
   * connects again (setting the logging level again: restore()).
   */
  private watchIdle(name: string, conn: UpstreamHandle, count: number): void {
    const { clock, settings } = this.deps;
    const ms = settings.upstream.idleReleaseMs;
    if (ms === 0 || this.closed) return;
    this.clearIdle(name);
    this.idleChecks.set(
      name,
      clock.setTimeout(() => {
        this.idleChecks.delete(name);
        if (this.closed || this.connections.get(name) !== conn || conn.status !== "connected") return;
        if (!conn.idleSince(count) || this.host.busy(name) || (this.receivers.get(name)?.size ?? 0) > 0) {
          this.watchIdle(name, conn, conn.requestCount);
          return;
        }
        this.connections.delete(name);
        this.reconnections.stop(name);
        this.closeReceivers(name);
        this.host.logger.info({ server: name, idleMs: ms }, "upstream_idle_released");
        void conn.close();
      }, ms),
    );
  }

  private clearIdle(name: string): void {
    const timer = this.idleChecks.get(name);
    if (timer) this.deps.clock.clearTimeout(timer);
    this.idleChecks.delete(name);
  }

  /** The connection to `name` in whatever state it is, if one was made. */
  get(name: string): UpstreamHandle | undefined {
    return this.connections.get(name);
  }

  /**
   * Why `name` is not connected: its connection's own failure, or, while a
   * new attempt is under way, why the one before failed or dropped (a
   * reconnect's `connecting` must not hide what list_servers showed a moment
   * before).
   */
  lastError(name: string): string | undefined {
    const conn = this.connections.get(name);
    if (conn?.status === "connected") return undefined;
    return conn?.lastError ?? this.failures.get(name);
  }

  /** Connections currently live. */
  live(): UpstreamHandle[] {
    return [...this.connections.values()].filter((c) => c.status === "connected");
  }

  /**
   * Drops the connection to a removed server: forgets it (no new request
   * reaches it), lets `settle` fail what ran on it, then closes its receiver
   * tasks and the connection.
   */
  async remove(name: string, settle: () => Promise<void>): Promise<void> {
    this.reconnections.stop(name);
    this.clearIdle(name);
    const conn = this.connections.get(name);
    this.connections.delete(name);
    this.connecting.delete(name);
    this.failures.delete(name);
    await settle();
    await this.receivers.get(name)?.close();
    this.receivers.delete(name);
    await conn?.close();
  }

  /**
   * The connection to `server` dropped (its work was already failed): its
   * receiver tasks end with it, and it is reconnected in the background.
   */
  dropped(server: string, counts: { failedTasks: number; rejectedRequests: number }): void {
    this.closeReceivers(server);
    this.reconnections.onDrop(server, this.connections.get(server), counts);
  }

  /** `server`'s new connection brings its receiver tasks; those of the last one end. */
  private replaceReceivers(server: string, receivers: ReceiverTaskStore): void {
    this.closeReceivers(server);
    this.receivers.set(server, receivers);
  }

  /** Ends the receiver tasks of `server`'s last connection (their rows are deleted in the background; close() waits). */
  private closeReceivers(server: string): void {
    const receivers = this.receivers.get(server);
    if (!receivers) return;
    const done = receivers.close();
    this.closingReceivers.add(done);
    void done.then(() => this.closingReceivers.delete(done));
  }

  /** No new connections, no reconnects; open connections stay until close(). */
  stop(): void {
    this.closed = true;
    this.reconnections.close();
    for (const name of [...this.idleChecks.keys()]) this.clearIdle(name);
  }

  /** stop(), then ends every receiver task and closes every connection ("suspend": their upstream sessions stay open). */
  async close(mode: CloseMode = "end"): Promise<void> {
    this.stop();
    await Promise.allSettled([...[...this.receivers.values()].map((r) => r.close()), ...this.closingReceivers]);
    this.receivers.clear();
    const conns = [...this.connections.values()];
    this.connections.clear();
    await Promise.allSettled(conns.map((c) => c.close(mode)));
  }
}
