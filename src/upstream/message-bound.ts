/**
 * The bound on one upstream message (`gateway.upstream.maxMessageBytes`,
 * design LM-6): the error a call gets when its answer is over it, and how the
 * JSON-RPC id of an oversized message is found from its first and last bytes
 * alone (the middle was never kept), and whether it is an answer at all.
 */
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError } from "../errors.js";

/** `gateway.upstream.maxMessageBytes` as people read it: "16 MiB", "512 KiB", "1000 bytes". */
export function formatBytes(bytes: number): string {
  if (bytes >= 1 << 20 && bytes % (1 << 20) === 0) return `${bytes / (1 << 20)} MiB`;
  if (bytes >= 1 << 10 && bytes % (1 << 10) === 0) return `${bytes / (1 << 10)} KiB`;
  return `${bytes} bytes`;
}

/**
 * EMCP_RESPONSE_TOO_LARGE for a message of `server` over `maxBytes`.
 * @param received its whole size when known (stdio reads to its end; HTTP stops at the bound)
 */
export function messageTooLarge(server: string, maxBytes: number, received?: number): GatewayError {
  const size = received === undefined ? `more than ${maxBytes} bytes` : `${received} bytes`;
  return new GatewayError(
    ErrorCodes.RESPONSE_TOO_LARGE,
    `upstream '${server}' sent a message of ${size}, over gateway.upstream.maxMessageBytes (${formatBytes(maxBytes)}); it was dropped. Ask the upstream for less (paging, a narrower query) or raise gateway.upstream.maxMessageBytes`,
    { details: { server, maxMessageBytes: maxBytes, ...(received === undefined ? {} : { bytes: received }) } },
  );
}

/** What the edges of an oversized message show of its top level. */
export interface MessageEdges {
  /** Its top-level `id`, when an edge shows it whole. */
  id?: RequestId;
  /** A top-level `method` key was seen: a request or notification of the upstream's. */
  request: boolean;
  /** A top-level `result` or `error` key was seen (and no `method`): an answer to one of ours. */
  response: boolean;
}

/**
 * What a message known only by its first and last bytes shows of its top
 * level: a depth-aware scan of the head forward and of the tail backward
 * (strings and nesting tracked, so keys inside `params` or `result` or inside
 * strings do not count), in any key order.
 */
export function messageEdgesOf(head: string, tail: string): MessageEdges {
  const keys = new Map<string, RequestId | null | undefined>();
  scanHead(head, keys);
  scanTail(tail, keys);
  const request = keys.has("method");
  const id = keys.get("id") ?? undefined;
  return { ...(id !== undefined ? { id } : {}), request, response: !request && (keys.has("result") || keys.has("error")) };
}

/**
 * The JSON-RPC id of the answer a message is, known only by its edges:
 * undefined unless an edge shows its top-level id and a top-level `result` or
 * `error`, and neither shows a top-level `method` (the upstream's own
 * requests number their ids from 0 too).
 */
export function messageIdOf(head: string, tail: string): RequestId | undefined {
  const edges = messageEdgesOf(head, tail);
  return edges.response ? edges.id : undefined;
}

/** `keys` gets the top-level keys seen; for `id`, its value when whole (null when not a plain number or string). */
function scanHead(text: string, keys: Map<string, RequestId | null | undefined>): void {
  let i = skipSpace(text, 0);
  if (text[i] !== "{") return;
  i++;
  let depth = 1;
  while (i < text.length && depth > 0) {
    const c = text[i]!;
    if (c === '"') {
      const end = stringEnd(text, i);
      if (end < 0) return; // cut inside a string
      const after = skipSpace(text, end + 1);
      if (depth === 1 && text[after] === ":") {
        const key = parseString(text.slice(i, end + 1));
        if (key === undefined) return;
        if (key === "id") keys.set(key, valueAt(text, after + 1));
        else keys.set(key, undefined);
        i = after + 1;
        continue;
      }
      i = end + 1;
      continue;
    }
    if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") depth--;
    i++;
  }
}

/** Like scanHead, from the last `}` backwards (a JSON string's quote is escaped when an odd number of backslashes precede it). */
function scanTail(text: string, keys: Map<string, RequestId | null | undefined>): void {
  let i = text.length - 1;
  while (i >= 0 && /\s/.test(text[i]!)) i--;
  if (text[i] !== "}") return;
  i--;
  let depth = 1;
  while (i >= 0 && depth > 0) {
    const c = text[i]!;
    if (c === '"') {
      const open = stringStartBefore(text, i);
      if (open < 0) return; // cut inside a string, or an escape we cannot see whole
      const after = skipSpace(text, i + 1);
      if (depth === 1 && text[after] === ":") {
        const key = parseString(text.slice(open, i + 1));
        if (key === undefined) return;
        if (key === "id") keys.set(key, valueAt(text, after + 1));
        else if (!keys.has(key)) keys.set(key, undefined);
      }
      i = open - 1;
      continue;
    }
    if (c === "}" || c === "]") depth++;
    else if (c === "{" || c === "[") depth--;
    i--;
  }
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && /\s/.test(text[i]!)) i++;
  return i;
}

/** Index of the quote closing the string opened at `open`; -1 when the text ends first. */
function stringEnd(text: string, open: number): number {
  for (let i = open + 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === '"') return i;
  }
  return -1;
}

/** Index of the quote opening the string closed at `close`; -1 when the text starts first (or a quote's escaping is cut off). */
function stringStartBefore(text: string, close: number): number {
  for (let i = close - 1; i >= 0; i--) {
    if (text[i] !== '"') continue;
    let slashes = 0;
    while (i - slashes - 1 >= 0 && text[i - slashes - 1] === "\\") slashes++;
    if (i - slashes === 0) return -1; // what precedes the text may escape it
    if (slashes % 2 === 0) return i;
  }
  return -1;
}

function parseString(literal: string): string | undefined {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return undefined;
  }
}

/** The id value at `i` when it is whole: a number or string followed by `,` or `}`; null otherwise. */
function valueAt(text: string, i: number): RequestId | null {
  const found = /^\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|"(?:[^"\\]|\\.)*")\s*[,}]/.exec(text.slice(i, i + 300));
  if (!found) return null;
  try {
    return JSON.parse(found[1]!) as RequestId;
  } catch {
    return null;
  }
}
