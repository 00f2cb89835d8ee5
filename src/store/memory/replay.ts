/**
 * Memory ReplayStore: per session an insertion-ordered Map (seq → message),
 * bounded in count and bytes, oldest dropped first. A message is kept as its
 * UTF-8 JSON bytes, exactly what the bytes bound counts (a parsed copy took
 * two to four times that in heap: a two-byte string or an object graph), and
 * is parsed again only when replayed. Event ids are the
 * session's sequence numbers as strings; lookups are scoped to the session.
 */
import type { ReplayedMessage, ReplayLimits, ReplayStore } from "../contracts.js";
import { assertLimit, REPLAY_EVENT_ID } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

interface Entry {
  streamId: string;
  json: Buffer;
  bytes: number;
}

interface SessionReplay {
  nextSeq: number;
  entries: Map<number, Entry>;
  bytes: number;
}

export class MemoryReplayStore implements ReplayStore {
  private readonly sessions = new Map<string, SessionReplay>();

  constructor(private readonly guard: MemoryGuard) {}

  async append(sessionId: string, streamId: string, message: Record<string, unknown>, limits: ReplayLimits): Promise<string> {
    this.guard.check();
    assertLimit("maxEvents", limits.maxEvents);
    assertLimit("maxBytes", limits.maxBytes);
    let s = this.sessions.get(sessionId);
    if (!s) this.sessions.set(sessionId, (s = { nextSeq: 1, entries: new Map(), bytes: 0 }));
    const text = JSON.stringify(message);
    // Its own memory, not a slice of Node's shared 8 KiB pool (a kept slice would keep the whole pool chunk alive).
    const json = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
    json.write(text);
    const seq = s.nextSeq++;
    const bytes = json.length;
    s.entries.set(seq, { streamId, json, bytes });
    s.bytes += bytes;
    for (const [oldSeq, e] of s.entries) {
      if (!(s.entries.size > limits.maxEvents || (s.bytes > limits.maxBytes && s.entries.size > 1))) break;
      s.entries.delete(oldSeq);
      s.bytes -= e.bytes;
    }
    return String(seq);
  }

  async streamOf(sessionId: string, eventId: string): Promise<string | undefined> {
    this.guard.check();
    return this.find(sessionId, eventId)?.streamId;
  }

  async replayAfter(
    sessionId: string,
    eventId: string,
  ): Promise<{ streamId: string; messages: Array<{ eventId: string; message: Record<string, unknown> }> } | undefined> {
    this.guard.check();
    const from = this.find(sessionId, eventId);
    if (!from) return undefined;
    const seq = Number(eventId);
    const messages: Array<{ eventId: string; message: Record<string, unknown> }> = [];
    for (const [s, e] of this.sessions.get(sessionId)!.entries) {
      if (s > seq && e.streamId === from.streamId) messages.push({ eventId: String(s), message: JSON.parse(e.json.toString()) as Record<string, unknown> });
    }
    return { streamId: from.streamId, messages };
  }

  async replayStream(sessionId: string, streamId: string, afterSeq: number): Promise<{ keptFrom: number; messages: ReplayedMessage[] }> {
    this.guard.check();
    const s = this.sessions.get(sessionId);
    if (!s) return { keptFrom: 1, messages: [] };
    const messages: ReplayedMessage[] = [];
    let keptFrom = s.nextSeq;
    for (const [seq, e] of s.entries) {
      keptFrom = Math.min(keptFrom, seq);
      if (seq > afterSeq && e.streamId === streamId) messages.push({ eventId: String(seq), message: JSON.parse(e.json.toString()) as Record<string, unknown> });
    }
    return { keptFrom, messages };
  }

  async size(sessionId: string): Promise<{ events: number; bytes: number }> {
    this.guard.check();
    const s = this.sessions.get(sessionId);
    return { events: s?.entries.size ?? 0, bytes: s?.bytes ?? 0 };
  }

  async deleteBySession(sessionId: string): Promise<number> {
    this.guard.check();
    const n = this.sessions.get(sessionId)?.entries.size ?? 0;
    this.sessions.delete(sessionId);
    return n;
  }

  private find(sessionId: string, eventId: string): Entry | undefined {
    if (!REPLAY_EVENT_ID.test(eventId)) return undefined;
    return this.sessions.get(sessionId)?.entries.get(Number(eventId));
  }
}
