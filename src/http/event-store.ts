/**
 * A bounded in-memory EventStore for one downstream session's SSE streams:
 * what the SDK transport needs to replay missed messages after a reconnect
 * with Last-Event-ID. Oldest events are dropped past `maxEvents` or once the
 * stored messages exceed `maxBytes` (large tool results would otherwise pin
 * memory for the session's life). One store per session, so replay can never
 * cross sessions.
 */
import { randomBytes } from "node:crypto";
import type { EventId, EventStore, StreamId } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";

export class BoundedEventStore implements EventStore {
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

  async replayEventsAfter(lastEventId: EventId, { send }: { send: (id: EventId, m: JSONRPCMessage) => Promise<void> }): Promise<StreamId> {
    const from = this.events.get(lastEventId);
    if (!from) return "";
    let after = false;
    for (const [id, e] of this.events) {
      if (id === lastEventId) {
        after = true;
        continue;
      }
      // Priming events carry an empty message: nothing to resend.
      if (after && e.streamId === from.streamId && Object.keys(e.message).length > 0) await send(id, e.message);
    }
    return from.streamId;
  }
}
