/**
 * SessionManager (seed 003 §7.3): creates and destroys sessions, expires idle
 * ones, and applies server add/remove to every session. The server registry is
 * shared; connections, events and tasks are per session.
 */
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { ServerConfig } from "../config/schema.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { TimerHandle } from "../clock.js";
import { Session, type SessionDeps } from "./session.js";

export interface SessionManagerOptions {
  /** Connect new sessions to every configured server at once (seed 003) or on first use. */
  connectEagerly: boolean;
}

export class SessionManager {
  private readonly sessions = new Map<string, Session>();
  private sweepTimer: TimerHandle | undefined;
  private closed = false;
  /** Called after a session is destroyed (the HTTP layer closes its transport). */
  onDestroyed: ((sessionId: string) => void) | undefined;

  constructor(
    private readonly deps: SessionDeps,
    private readonly options: SessionManagerOptions = { connectEagerly: true },
  ) {}

  start(): void {
    this.scheduleSweep();
  }

  create(options: { id?: string; downstreamCapabilities?: ClientCapabilities | undefined; connect?: boolean } = {}): Session {
    const id = options.id ?? this.deps.newId();
    if (this.closed) throw new GatewayError(ErrorCodes.CLOSED, "the gateway is shutting down");
    const { maxSessions } = this.deps.settings.sessions;
    if (this.sessions.size >= maxSessions) {
      throw new GatewayError(ErrorCodes.LIMIT_REACHED, `the gateway already has ${maxSessions} sessions (gateway.sessions.maxSessions)`);
    }
    const session = new Session(id, this.deps, options.downstreamCapabilities);
    this.sessions.set(id, session);
    this.deps.logger.info({ session: id }, "session_created");
    if (options.connect ?? this.options.connectEagerly) session.connectAllInBackground();
    return session;
  }

  get(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  get size(): number {
    return this.sessions.size;
  }

  list(): Session[] {
    return [...this.sessions.values()];
  }

  async destroy(id: string, reason = "closed"): Promise<void> {
    const session = this.sessions.get(id);
    if (!session) return;
    this.sessions.delete(id);
    await session.close();
    this.deps.logger.info({ session: id, reason }, "session_destroyed");
    this.onDestroyed?.(id);
  }

  /**
   * Registers a server and connects the calling session to it. If that
   * connection fails the server is not kept (nothing half-added). Other
   * sessions learn about it through a `server_added` event.
   */
  async addServer(caller: Session, name: string, config: ServerConfig): Promise<void> {
    const { registry, clock } = this.deps;
    registry.add({ name, config, addedAt: clock.now(), addedBy: caller.id });
    try {
      await caller.connection(name);
    } catch (err) {
      registry.remove(name);
      await caller.disconnect(name, "add_server failed");
      throw err;
    }
    for (const s of this.sessions.values()) {
      if (s !== caller) s.events.add("server_added", name, { name, addedBy: "another session" });
      s.serverSetChanged();
    }
  }

  /** Unregisters a server and disconnects every session from it. */
  async removeServer(caller: Session | undefined, name: string): Promise<number> {
    this.deps.registry.remove(name);
    const sessions = [...this.sessions.values()];
    await Promise.allSettled(
      sessions.map(async (s) => {
        await s.disconnect(name, `server '${name}' was removed`);
        s.events.add("server_removed", name, { name, removedBy: s === caller ? "this session" : "another session" });
        s.serverSetChanged();
      }),
    );
    return sessions.length;
  }

  /** Destroys sessions idle longer than sessions.idleTimeoutMs. */
  sweep(): number {
    const { clock, settings } = this.deps;
    const cutoff = clock.now() - settings.sessions.idleTimeoutMs;
    let n = 0;
    for (const s of [...this.sessions.values()]) {
      if (s.lastActivityAt <= cutoff) {
        n++;
        void this.destroy(s.id, "idle timeout");
      }
    }
    return n;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.deps.clock.clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
    await Promise.allSettled([...this.sessions.keys()].map((id) => this.destroy(id, "gateway shutdown")));
  }

  private scheduleSweep(): void {
    if (this.closed) return;
    this.sweepTimer = this.deps.clock.setTimeout(() => {
      this.sweep();
      this.scheduleSweep();
    }, this.deps.settings.sessions.sweepIntervalMs);
  }
}
