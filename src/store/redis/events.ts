/**
 * Redis EventStore and ReplayStore. Each session's events are a hash seq →
 * "id\n" + JSON with its counters in a second hash, plus one gateway-wide
 * sorted set in global order for the gateway bound (scripts.ts has the
 * layout). Append (with its evictions) and each take are one script, so an
 * event is handed out once across concurrent callers, replicas and restarts.
 * The stored JSON has no seq: it is added back from the hash field on read.
 */
import type {
  EventInput,
  EventLimits,
  EventRecord,
  EventStore,
  EventTake,
  EvictedCounts,
  EvictionReport,
  ReplayedMessage,
  ReplayLimits,
  ReplayStore,
} from "../contracts.js";
import { assertLimit, evictBatch, REPLAY_EVENT_ID } from "../policy.js";
import type { RedisConn } from "./conn.js";

type Reply = Array<string | number | null>;

/** "id\nJSON" → the record with its seq. */
function eventOf(seq: number, stored: string): EventRecord {
  return { ...(JSON.parse(stored.slice(stored.indexOf("\n") + 1)) as EventInput), seq };
}

/** The `seq, value, …` tail of a reply from `start`. */
function eventsFrom(reply: Reply, start: number): EventRecord[] {
  const out: EventRecord[] = [];
  for (let i = start; i + 1 < reply.length; i += 2) out.push(eventOf(Number(reply[i]), String(reply[i + 1])));
  return out;
}

export class RedisEventStore implements EventStore {
  constructor(private readonly conn: RedisConn) {}

  async append(sessionId: string, event: EventInput, limits: EventLimits): Promise<{ event: EventRecord; evicted: EvictionReport[] }> {
    assertLimit("maxPerSession", limits.maxPerSession);
    assertLimit("maxTotal", limits.maxTotal);
    const { seq: _ignored, ...input } = event as EventInput & { seq?: number };
    const json = JSON.stringify(input);
    const reply = (await this.conn.script(
      "store an event",
      "eventAppend",
      sessionId,
      event.id,
      json,
      limits.maxPerSession,
      evictBatch(limits.maxPerSession),
      limits.maxTotal,
      evictBatch(limits.maxTotal),
    )) as Reply;
    const evicted: EvictionReport[] = [];
    for (let i = 1; i + 3 < reply.length; i += 4) {
      evicted.push({
        sessionId: String(reply[i]),
        reason: reply[i + 1] === "session" ? "session" : "gateway",
        count: Number(reply[i + 2]),
        undelivered: Number(reply[i + 3]),
      });
    }
    return { event: { ...(JSON.parse(json) as EventInput), seq: Number(reply[0]) }, evicted };
  }

  async takeUndelivered(sessionId: string): Promise<EventTake> {
    const reply = await this.read("take undelivered events", sessionId, "undelivered", "");
    return { events: eventsFrom(reply, 3), evicted: evictedOf(reply) };
  }

  async takeAfter(sessionId: string, cursorId: string): Promise<EventTake & { found: boolean }> {
    const reply = await this.read("read events after a cursor", sessionId, "after", cursorId);
    return { events: eventsFrom(reply, 3), found: reply[2] === 1, evicted: evictedOf(reply) };
  }

  async listAfter(sessionId: string, cursorId?: string): Promise<{ events: EventRecord[]; found: boolean }> {
    const reply = await this.read("list events", sessionId, "list", cursorId ?? "");
    return { events: eventsFrom(reply, 3), found: reply[2] === 1 };
  }

  async stats(sessionId: string): Promise<{ count: number; undelivered: number; lastId?: string; evicted: EvictedCounts }> {
    const reply = (await this.conn.script("count events", "eventStats", sessionId)) as Reply;
    const last = reply[4];
    return {
      count: Number(reply[0]),
      undelivered: Number(reply[1]),
      ...(typeof last === "string" ? { lastId: last.slice(0, last.indexOf("\n")) } : {}),
      evicted: { session: Number(reply[2]), gateway: Number(reply[3]) },
    };
  }

  async total(): Promise<number> {
    return this.conn.run("count events", (r) => r.zcard(this.conn.key("eg")));
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return (await this.conn.script("delete a session's events", "eventDeleteSession", sessionId)) as number;
  }

  private async read(what: string, sessionId: string, mode: "undelivered" | "after" | "list", cursor: string): Promise<Reply> {
    return (await this.conn.script(what, "eventRead", sessionId, mode, cursor)) as Reply;
  }
}

function evictedOf(reply: Reply): EvictedCounts {
  return { session: Number(reply[0]), gateway: Number(reply[1]) };
}

/** Event ids are the session's sequence numbers as strings. */

export class RedisReplayStore implements ReplayStore {
  constructor(private readonly conn: RedisConn) {}

  async append(sessionId: string, streamId: string, message: Record<string, unknown>, limits: ReplayLimits): Promise<string> {
    assertLimit("maxEvents", limits.maxEvents);
    assertLimit("maxBytes", limits.maxBytes);
    const seq = await this.conn.script("store an SSE message", "replayAppend", sessionId, streamId, JSON.stringify(message), limits.maxEvents, limits.maxBytes);
    return String(seq);
  }

  async streamOf(sessionId: string, eventId: string): Promise<string | undefined> {
    if (!REPLAY_EVENT_ID.test(eventId)) return undefined;
    const stream = await this.conn.run("look up an SSE event", (r) => r.hget(this.conn.key("rs", sessionId), eventId));
    return stream ?? undefined;
  }

  async replayAfter(
    sessionId: string,
    eventId: string,
  ): Promise<{ streamId: string; messages: Array<{ eventId: string; message: Record<string, unknown> }> } | undefined> {
    if (!REPLAY_EVENT_ID.test(eventId)) return undefined;
    const reply = (await this.conn.script("replay SSE messages", "replayAfter", sessionId, eventId)) as Reply | null;
    if (!Array.isArray(reply)) return undefined;
    const messages: Array<{ eventId: string; message: Record<string, unknown> }> = [];
    for (let i = 1; i + 1 < reply.length; i += 2)
      messages.push({ eventId: String(reply[i]), message: JSON.parse(String(reply[i + 1])) as Record<string, unknown> });
    return { streamId: String(reply[0]), messages };
  }

  async replayStream(sessionId: string, streamId: string, afterSeq: number): Promise<{ keptFrom: number; messages: ReplayedMessage[] }> {
    const reply = (await this.conn.script("replay an SSE stream", "replayStream", sessionId, streamId, afterSeq)) as Reply;
    const messages: ReplayedMessage[] = [];
    for (let i = 1; i + 1 < reply.length; i += 2)
      messages.push({ eventId: String(reply[i]), message: JSON.parse(String(reply[i + 1])) as Record<string, unknown> });
    return { keptFrom: Number(reply[0]), messages };
  }

  async size(sessionId: string): Promise<{ events: number; bytes: number }> {
    const [c, b] = await this.conn.run("measure SSE replay", (r) => r.hmget(this.conn.key("rm", sessionId), "c", "b"));
    return { events: Number(c ?? 0), bytes: Number(b ?? 0) };
  }

  async deleteBySession(sessionId: string): Promise<number> {
    return (await this.conn.script("delete a session's SSE replay", "replayDeleteSession", sessionId)) as number;
  }
}
