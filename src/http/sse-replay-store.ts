/**
 * SSE replay stores (the SDK transport's `EventStore`) behind Last-Event-ID
 * replay of a downstream session's streams: stored for owner sessions,
 * bounded in memory for attachments. See
 * docs/design/sessions-and-events.md, "How the code keeps it".
 */
import { randomBytes } from "node:crypto";
import type { EventId, EventStore, StreamId } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { ReplayedMessage, ReplayLimits, ReplayStore, Store } from "../store/contracts.js";

/** What an endpoint binding needs from its replay store. */
export interface SseReplayStore extends EventStore {
  getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined>;
  /** No writes after this; resolves once the writes under way have settled. */
  close(): Promise<void>;
  /**
   * The binding is gone: close(), and when its session ended for good (its
   * stored record was deleted first: DELETE, expiry) delete its stored replay;
   * a kept record (shutdown, failed resumption) keeps it for the next process
   * or replica. Never throws.
   */
  release(): Promise<void>;
}

type Send = (id: EventId, message: JSONRPCMessage) => Promise<void>;

/** Priming events carry an empty message: there is nothing to resend. */
const isPriming = (message: object): boolean => Object.keys(message).length === 0;

/** An unstored priming event's id: `p<seq>.<streamId>` (see the header). */
const PRIMING_ID = /^p(\d{1,16})\.(.+)$/s;

export class StoredSseReplayStore implements SseReplayStore {
  private closed = false;
  /** Appends under way (close() waits for them, so a delete after it leaves no row behind). */
  private readonly writes = new Set<Promise<unknown>>();
  /** A failed write was logged; the next ones stay quiet until one succeeds. */
  private failing = false;
  /** The highest sequence number this instance was given: every later event is numbered above it. */
  private lastSeq: number | undefined;

  private readonly replay: ReplayStore;

  constructor(
    private readonly store: Pick<Store, "replay" | "sessions">,
    /** The session id: event ids are the session's own sequence numbers, across restarts and replicas. */
    private readonly key: string,
    private readonly limits: ReplayLimits,
    private readonly logger: Logger,
    /**
     * The session was created now (its own initialize, not a resumption): nothing of it is stored, so its numbering is
     * known (after 0) and its first priming event needs no row — one write less per session opened (issue 27).
     */
    fresh = false,
  ) {
    this.replay = store.replay;
    if (fresh) this.lastSeq = 0;
  }

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    // After close (the session ended): nothing can resume, so no id.
    if (this.closed) return "";
    if (isPriming(message) && this.lastSeq !== undefined) return `p${this.lastSeq}.${streamId}`;
    const write = this.replay.append(this.key, streamId, message, this.limits);
    this.writes.add(write);
    try {
      const id = await write;
      this.lastSeq = Math.max(this.lastSeq ?? 0, Number(id));
      if (this.failing) this.logger.info("sse_replay_store_recovered");
      this.failing = false;
      return id;
    } catch (err) {
      // Sent without an id (see the header): the client cannot resume past it, nor lose what was stored before it.
      if (!this.failing) this.logger.warn({ err: errorMessage(err), streamId }, "sse_replay_store_failed");
      this.failing = true;
      return "";
    } finally {
      this.writes.delete(write);
    }
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return PRIMING_ID.test(eventId) ? (await this.primed(eventId))?.streamId : this.replay.streamOf(this.key, eventId);
  }

  async replayEventsAfter(lastEventId: EventId, { send }: { send: Send }): Promise<StreamId> {
    const found = PRIMING_ID.test(lastEventId) ? await this.primed(lastEventId) : await this.replay.replayAfter(this.key, lastEventId);
    if (!found) {
      // Evicted between the endpoint's check and here (the SDK answers 500 for a throw; no client sees this text).
      throw new Error(`Last-Event-ID '${lastEventId}' is no longer kept for this session`);
    }
    for (const { eventId, message } of found.messages) if (!isPriming(message)) await send(eventId, message as unknown as JSONRPCMessage);
    return found.streamId;
  }

  /** The stream a priming id names and its stored messages; undefined when some of them may have been evicted. */
  private async primed(eventId: EventId): Promise<{ streamId: StreamId; messages: ReplayedMessage[] } | undefined> {
    const [, seq, streamId] = PRIMING_ID.exec(eventId)!;
    const { keptFrom, messages } = await this.replay.replayStream(this.key, streamId!, Number(seq));
    return keptFrom > Number(seq) + 1 ? undefined : { streamId: streamId!, messages };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.writes]);
  }

  async release(): Promise<void> {
    await this.close();
    try {
      if ((await this.store.sessions.get(this.key)) === undefined) await this.replay.deleteBySession(this.key);
    } catch (err) {
      this.logger.error({ err: errorMessage(err) }, "session_store_write_failed");
    }
  }
}

export class BoundedSseReplayStore implements SseReplayStore {
  private readonly events = new Map<EventId, { streamId: StreamId; message: JSONRPCMessage; bytes: number }>();
  private bytes = 0;
  /**
   * Event ids: a random prefix per store (so another session's ids are simply
   * unknown here) and a counter (a ULID per SSE message cost a crypto draw each).
   */
  private readonly prefix = randomBytes(6).toString("base64url");
  private seq = 0;

  constructor(
    /** gateway.http.replayMaxEvents */
    private readonly maxEvents: number = DEFAULT_SETTINGS.http.replayMaxEvents,
    /** gateway.http.replayMaxBytes */
    private readonly maxBytes: number = DEFAULT_SETTINGS.http.replayMaxBytes,
  ) {}

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const id = `${this.prefix}-${++this.seq}`;
    const bytes = Buffer.byteLength(JSON.stringify(message));
    this.events.set(id, { streamId, message, bytes });
    this.bytes += bytes;
    while (this.events.size > this.maxEvents || (this.bytes > this.maxBytes && this.events.size > 1)) {
      const oldest = this.events.entries().next().value;
      if (!oldest) break;
      this.events.delete(oldest[0]);
      this.bytes -= oldest[1].bytes;
    }
    return id;
  }

  /** Bytes of JSON held for replay (for tests and metrics). */
  get size(): { events: number; bytes: number } {
    return { events: this.events.size, bytes: this.bytes };
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return this.events.get(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId: EventId, { send }: { send: Send }): Promise<StreamId> {
    const from = this.events.get(lastEventId);
    if (!from) return "";
    let after = false;
    for (const [id, e] of this.events) {
      if (id === lastEventId) {
        after = true;
        continue;
      }
      if (after && e.streamId === from.streamId && !isPriming(e.message)) await send(id, e.message);
    }
    return from.streamId;
  }

  async close(): Promise<void> {
    this.events.clear();
    this.bytes = 0;
  }

  release(): Promise<void> {
    return this.close();
  }
}
