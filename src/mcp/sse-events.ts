/**
 * Frames an SSE byte stream into whole events, in linear time and with a
 * bound on one event (design LM-6). Bytes are held per event as the chunks
 * they came in, line ends (CR, LF, CRLF) are searched in new bytes only, and
 * an event is handed on once its blank line arrived, byte for byte as it came:
 * what is forwarded is the input minus the events that were over the bound.
 * An event over `maxBytes` is not held: its first EDGE bytes are kept (for its
 * `id:` field) and the rest is dropped up to its blank line. The fields of an
 * event are read by eventsource-parser (sse-request-tap.ts): it has no bound
 * and does not hand on the bytes it parsed, so it cannot do this part.
 */

/** Bytes kept of an oversized event's start. */
const EDGE = 4096;

export interface SseFramerHandlers {
  /** A whole event (its lines and the blank line that ended it). */
  event(pieces: Uint8Array[], bytes: number): void;
  /** The event being read went over the bound; `head` is its start as text. Return false to stop framing (nothing more is called). */
  oversized(head: string): boolean;
  /** The oversized event ended (its blank line arrived). */
  skipped(head: string, bytes: number): void;
}

export class SseEventFramer {
  private pieces: Uint8Array[] = [];
  /** Bytes of the current event so far (held, or counted while skipping). */
  private bytes = 0;
  /** Bytes of the current line so far, before its line end. */
  private lineBytes = 0;
  /** The last byte was a CR: an LF right after it belongs to it. */
  private afterCR = false;
  /** Set while skipping an oversized event. */
  private head: string | undefined;
  private stopped = false;

  constructor(
    private readonly maxBytes: number,
    private readonly on: SseFramerHandlers,
  ) {}

  feed(chunk: Uint8Array): void {
    if (this.stopped) return;
    let i = 0;
    let start = 0; // where the current event's bytes in this chunk begin
    let nextLF = -2;
    let nextCR = -2;
    while (i < chunk.length) {
      if (this.afterCR) {
        this.afterCR = false;
        if (chunk[i] === 10) {
          i++;
          continue;
        }
      }
      if (nextLF !== -1 && nextLF < i) nextLF = chunk.indexOf(10, i);
      if (nextCR !== -1 && nextCR < i) nextCR = chunk.indexOf(13, i);
      const end = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : Math.min(nextLF, nextCR);
      if (end === -1) {
        this.lineBytes += chunk.length - i;
        break;
      }
      const blank = this.lineBytes + (end - i) === 0;
      this.lineBytes = 0;
      this.afterCR = chunk[end] === 13;
      i = end + 1;
      if (!blank) continue;
      // The event ends here (with the LF of its CRLF when that is in this chunk).
      if (this.afterCR && chunk[i] === 10) {
        this.afterCR = false;
        i++;
      }
      if (!this.take(chunk.subarray(start, i))) return;
      start = i;
      this.finish();
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
  }

  /** Whatever was held of an unfinished event at the stream's end. */
  rest(): Uint8Array[] {
    const rest = this.head === undefined ? this.pieces : [];
    this.pieces = [];
    return rest;
  }

  /** Adds bytes to the current event; false when framing stopped. */
  private take(bytes: Uint8Array): boolean {
    this.bytes += bytes.length;
    if (this.head !== undefined) return true;
    this.pieces.push(bytes);
    if (this.bytes <= this.maxBytes) return true;
    this.head = new TextDecoder().decode(concat(this.pieces, EDGE));
    this.pieces = [];
    if (this.on.oversized(this.head)) return true;
    this.stopped = true;
    return false;
  }

  private finish(): void {
    const { pieces, bytes, head } = this;
    this.pieces = [];
    this.bytes = 0;
    this.head = undefined;
    if (head !== undefined) this.on.skipped(head, bytes);
    else this.on.event(pieces, bytes);
  }
}

/** The first `limit` bytes of `pieces` (all of them without a limit), as one array. */
export function concat(pieces: Uint8Array[], limit = Infinity): Uint8Array {
  if (pieces.length === 1 && pieces[0]!.length <= limit) return pieces[0]!;
  const total = Math.min(
    limit,
    pieces.reduce((n, p) => n + p.length, 0),
  );
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of pieces) {
    if (at >= total) break;
    const part = p.subarray(0, total - at);
    out.set(part, at);
    at += part.length;
  }
  return out;
}
