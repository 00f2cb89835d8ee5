/**
 * Splits a byte stream into '\n'-terminated lines in linear time, with a bound
 * on one line (design LM-6). The SDK's stdio ReadBuffer concatenates the whole
 * buffer on every chunk and rescans it from the start, which is quadratic on a
 * long line (a 9 MB result stalled the event loop for seconds) and over 10 MB
 * throws. Here the chunks of the current line are kept in a list, only new
 * bytes are searched for '\n', and a line is joined once, when it ends.
 *
 * A line over `maxLineBytes` is not accumulated: its bytes are counted and
 * dropped up to the next '\n' (newline-delimited JSON has no raw newline
 * inside a message, so the next line is a fresh message) and onOversized gets
 * its first and last few KiB, enough to find a JSON-RPC id.
 */

/** How much of an oversized line's start and end is kept (to find its JSON-RPC id). */
export const EDGE_BYTES = 4096;

export interface OversizedLine {
  /** The line's whole length in bytes (without its '\n'). */
  bytes: number;
  /** Its first EDGE_BYTES bytes, as text. */
  head: string;
  /** Its last EDGE_BYTES bytes, as text. */
  tail: string;
}

export interface LineReaderOptions {
  /** Longest line kept, in bytes. */
  maxLineBytes: number;
  /** A whole line (a trailing '\r' removed), as UTF-8 text. */
  onLine(line: string): void;
  /** A line over maxLineBytes ended; its content was dropped. */
  onOversized(line: OversizedLine): void;
}

export class LineReader {
  /** Pieces of the current line (while it is within the bound). */
  private pieces: Buffer[] = [];
  /** Bytes of the current line so far (also while skipping). */
  private size = 0;
  /** Set while the current line is over the bound: its first bytes; the rest is dropped. */
  private head: Buffer | undefined;
  /** The last EDGE_BYTES bytes seen of a line being skipped. */
  private tail: Buffer = Buffer.alloc(0);

  constructor(private readonly options: LineReaderOptions) {}

  /** Feeds the next chunk of the stream; calls onLine / onOversized for each line it ends. */
  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      if (newline < 0) {
        if (start < chunk.length) this.add(chunk.subarray(start));
        return;
      }
      if (newline > start) this.add(chunk.subarray(start, newline));
      this.endLine();
      start = newline + 1;
    }
  }

  /** Bytes of an unfinished line held (or counted, when skipping). */
  get pending(): number {
    return this.size;
  }

  /** Drops an unfinished line. */
  clear(): void {
    this.pieces = [];
    this.size = 0;
    this.head = undefined;
    this.tail = Buffer.alloc(0);
  }

  private add(bytes: Buffer): void {
    this.size += bytes.length;
    if (this.head !== undefined) {
      this.keepTail(bytes);
      return;
    }
    if (this.size <= this.options.maxLineBytes) {
      this.pieces.push(bytes);
      return;
    }
    // Over the bound: keep the edges only, from here to the line's end.
    const held = Buffer.concat([...this.pieces, bytes]);
    this.pieces = [];
    this.head = Buffer.from(held.subarray(0, EDGE_BYTES));
    this.tail = Buffer.alloc(0);
    this.keepTail(held);
  }

  private keepTail(bytes: Buffer): void {
    if (bytes.length >= EDGE_BYTES) this.tail = Buffer.from(bytes.subarray(bytes.length - EDGE_BYTES));
    else this.tail = Buffer.concat([this.tail, bytes]).subarray(-EDGE_BYTES);
  }

  private endLine(): void {
    if (this.head !== undefined) {
      const oversized = { bytes: this.size, head: this.head.toString("utf8"), tail: this.tail.toString("utf8").replace(/\r$/, "") };
      this.clear();
      this.options.onOversized(oversized);
      return;
    }
    const line = this.pieces.length === 1 ? this.pieces[0]! : Buffer.concat(this.pieces, this.size);
    this.clear();
    let text = line.toString("utf8");
    if (text.endsWith("\r")) text = text.slice(0, -1);
    this.options.onLine(text);
  }
}
