/**
 * ConsoleLive: tells each open console page over SSE that something changed,
 * on this replica or another. See docs/design/sessions-and-events.md,
 * "How the code keeps it".
 */
import type http from "node:http";
import type { Clock, TimerHandle } from "../clock.js";
import type { SessionChange, SessionManager } from "../session/session-manager.js";
import { SECURITY_HEADERS } from "./http.js";

/** Changes within this many ms reach the pages as one message. */
export const CHANGE_DELAY_MS = 50;

/** How often open pages look for changes on the other replicas. */
export const REMOTE_POLL_MS = 1_500;

/** The last reconnection of a server in any session (from its server_reconnected event). */
export interface ReconnectNote {
  attempts: number;
  at: number;
  drops: number;
}

export interface ConsoleLiveOptions {
  sessions: SessionManager;
  clock: Clock;
  /** gateway.http.sseKeepAliveMs (0: no keep-alive frames). */
  keepAliveMs: number;
  /** A fingerprint of the other replicas' changes (cluster.ts); absent without replicas. */
  remoteVersions?: () => Promise<string>;
}

export class ConsoleLive {
  private readonly streams = new Set<http.ServerResponse>();
  private version = 0;
  private ownVersion = 0;
  private pollTimer: TimerHandle | undefined;
  private polling = false;
  private lastRemote: string | undefined;
  private unsubscribe: (() => void) | undefined;
  private changeTimer: TimerHandle | undefined;
  private keepAliveTimer: TimerHandle | undefined;
  private closed = false;
  /** By server name. */
  readonly reconnects = new Map<string, ReconnectNote>();

  constructor(private readonly options: ConsoleLiveOptions) {}

  start(): void {
    if (this.closed || this.unsubscribe) return;
    this.unsubscribe = this.options.sessions.observe((change) => this.changed(change));
  }

  /** This replica's own changes so far (what the other replicas' pages compare). */
  get localVersion(): number {
    return this.ownVersion;
  }

  /** Open console streams (tests, and the overview's own line). */
  get streamCount(): number {
    return this.streams.size;
  }

  /** Serves one SSE stream until the page goes away or close(). */
  serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.closed) {
      res.writeHead(503, SECURITY_HEADERS).end();
      return;
    }
    res.writeHead(200, { ...SECURITY_HEADERS, "Content-Type": "text/event-stream", Connection: "keep-alive", "X-Accel-Buffering": "no" });
    res.write(`retry: 2000\nevent: hello\ndata: {"version":${this.version}}\n\n`);
    this.streams.add(res);
    const gone = () => {
      this.streams.delete(res);
      if (this.streams.size === 0) this.stopTimers();
    };
    req.once("close", gone);
    res.once("close", gone);
    this.scheduleKeepAlive();
    this.schedulePoll();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.stopTimers();
    for (const res of [...this.streams]) res.end();
    this.streams.clear();
  }

  private changed(change: SessionChange): void {
    if (change.type === "change") {
      const { type, server, data } = change.change;
      if (type === "server_disconnected" || type === "server_reconnected") {
        const note = this.reconnects.get(server) ?? { attempts: 0, at: 0, drops: 0 };
        if (type === "server_disconnected") note.drops++;
        else note.attempts = typeof data.attempts === "number" ? data.attempts : note.attempts;
        note.at = this.options.clock.now();
        this.reconnects.set(server, note);
      }
    }
    this.ownVersion++;
    this.bump();
  }

  /** Something this replica's pages show changed that is no session change (activity written). */
  poke(): void {
    if (this.closed) return;
    this.ownVersion++;
    this.bump();
  }

  /** Something the pages show changed: one change message within CHANGE_DELAY_MS. */
  private bump(): void {
    this.version++;
    if (this.changeTimer !== undefined || this.streams.size === 0) return;
    this.changeTimer = this.options.clock.setTimeout(() => {
      this.changeTimer = undefined;
      this.broadcast(`event: change\ndata: {"version":${this.version}}\n\n`);
    }, CHANGE_DELAY_MS);
  }

  private scheduleKeepAlive(): void {
    const ms = this.options.keepAliveMs;
    if (ms <= 0 || this.keepAliveTimer !== undefined || this.closed) return;
    this.keepAliveTimer = this.options.clock.setTimeout(() => {
      this.keepAliveTimer = undefined;
      this.broadcast(": keepalive\n\n");
      if (this.streams.size > 0) this.scheduleKeepAlive();
    }, ms);
  }

  /** Reads the other replicas' counters every REMOTE_POLL_MS while a page is open (one read at a time). */
  private schedulePoll(): void {
    const read = this.options.remoteVersions;
    if (!read || this.pollTimer !== undefined || this.polling || this.closed) return;
    this.pollTimer = this.options.clock.setTimeout(() => {
      this.pollTimer = undefined;
      if (this.streams.size === 0 || this.closed) return;
      this.polling = true;
      read()
        .then((fingerprint) => {
          // The very first reading counts as a change too (one extra re-read): a change between a page's render and this reading is never missed.
          if (fingerprint !== this.lastRemote && !this.closed) this.bump();
          this.lastRemote = fingerprint;
        })
        .catch(() => undefined)
        .finally(() => {
          this.polling = false;
          if (this.streams.size > 0) this.schedulePoll();
        });
    }, REMOTE_POLL_MS);
  }

  private broadcast(frame: string): void {
    for (const res of this.streams) res.write(frame);
  }

  private stopTimers(): void {
    this.options.clock.clearTimeout(this.changeTimer);
    this.options.clock.clearTimeout(this.keepAliveTimer);
    this.options.clock.clearTimeout(this.pollTimer);
    this.changeTimer = undefined;
    this.keepAliveTimer = undefined;
    this.pollTimer = undefined;
  }
}
