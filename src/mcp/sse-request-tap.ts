/**
 * SDK boundary — on which of our requests' streams a Streamable HTTP upstream
 * sent each of its server→client requests (a fetch wrapper; no private member),
 * and the message bound on those streams (design LM-6). Canary:
 * test/unit/sdk-canaries.test.ts. See docs/design/upstreams-and-reliability.md,
 * "How the code keeps it".
 */
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import { createParser, type EventSourceMessage, type EventSourceParser } from "eventsource-parser";
import { isMediaType } from "./media-type.js";
import { SseEventFramer, concat } from "./sse-events.js";

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** Bound on remembered request ids and event ids (entries nobody asks about, e.g. pings, age out). */
const MAX_REMEMBERED = 1000;

/** The bound on one upstream message (gateway.upstream.maxMessageBytes). */
export interface MessageBound {
  maxBytes: number;
  /**
   * A message over the bound was dropped. `owner`: our request on whose
   * stream or body it came (fail it), undefined on the standalone stream.
   * Returns the error the body's stream ends with.
   */
  oversized(owner: RequestId | undefined): Error;
}

export class SseRequestTap {
  /** Upstream request id → the id of our request on whose stream it arrived. */
  private readonly related = new Map<RequestId, RequestId>();
  /** The last event id seen on a stream → the id of our request that stream belongs to (for resumption). */
  private readonly resumable = new Map<string, RequestId>();
  /** Our requests failed for an oversized answer: their streams are not resumed. */
  private readonly failed = new Map<RequestId, true>();

  constructor(
    private readonly base: FetchLike = (url, init) => fetch(url, init),
    private readonly bound?: MessageBound,
  ) {}

  /** Pass as StreamableHTTPClientTransport's `fetch` option. */
  readonly fetch: FetchLike = async (url, init) => {
    const posted = init?.method === "POST";
    const owner = posted ? postedRequestId(init.body) : this.resumedOwner(init?.headers);
    // 405 on a GET ends the SDK's attempts to resume a stream without an error.
    if (!posted && owner !== undefined && this.failed.has(owner)) return new Response(null, { status: 405 });
    const response = await this.base(url, init);
    if (!response.ok || !response.body) return response;
    let body: ReadableStream<Uint8Array>;
    if (isMediaType(response.headers.get("content-type"), "text/event-stream")) body = response.body.pipeThrough(this.recorder(owner));
    else if (this.bound) body = response.body.pipeThrough(this.counter(owner, this.bound));
    else return response;
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };

  /**
   * The id of our request on whose stream the upstream sent its request `id`,
   * once (the entry is consumed); undefined when it came on the standalone
   * stream or was never seen.
   */
  take(id: RequestId): RequestId | undefined {
    const ours = this.related.get(id);
    this.related.delete(id);
    return ours;
  }

  private resumedOwner(headers: RequestInit["headers"]): RequestId | undefined {
    const lastEventId = new Headers(headers).get("last-event-id");
    return lastEventId === null ? undefined : this.resumable.get(lastEventId);
  }

  /**
   * Passes the stream through event by event, recording each event before it
   * is handed on (`owner`: the request the stream belongs to, if known), and
   * keeps events over the bound from the SDK.
   */
  private recorder(owner: RequestId | undefined): TransformStream<Uint8Array, Uint8Array> {
    const decoder = new TextDecoder();
    // Fed one whole event at a time (the framer's), so each event is recorded before its bytes go on.
    const fields = owner === undefined ? undefined : this.eventRecorder(owner);
    let framer: SseEventFramer;
    return new TransformStream({
      start: (controller) => {
        framer = new SseEventFramer(this.bound?.maxBytes ?? Infinity, {
          event: (pieces) => {
            fields?.feed(decoder.decode(concat(pieces)));
            for (const piece of pieces) controller.enqueue(piece);
          },
          oversized: () => {
            if (owner === undefined || !this.bound) return true; // skip it, go on
            remember(this.failed, owner, true);
            this.bound.oversized(owner);
            controller.terminate();
            return false;
          },
          skipped: (head) => {
            this.bound?.oversized(undefined);
            // Hand on its id alone, so that a resumption starts after it (the SDK skips an event without data but keeps its id).
            const id = eventIdOf(head);
            if (id !== undefined) controller.enqueue(new TextEncoder().encode(`id: ${id}\ndata:\n\n`));
          },
        });
      },
      transform: (chunk) => framer.feed(chunk),
      flush: (controller) => {
        for (const piece of framer.rest()) controller.enqueue(piece);
      },
    });
  }

  /** Records the events of `owner`'s stream: its last event id (for a resumption) and the upstream's requests on it. */
  private eventRecorder(owner: RequestId): EventSourceParser {
    let lastId: string | undefined;
    return createParser({
      onEvent: (event) => {
        if (event.id !== undefined) {
          if (lastId !== undefined) this.resumable.delete(lastId);
          lastId = event.id;
          remember(this.resumable, event.id, owner);
        }
        const serverRequestId = requestIdOf(event.data);
        if (serverRequestId !== undefined) remember(this.related, serverRequestId, owner);
      },
    });
  }

  /** Counts a JSON body's bytes as they pass; over the bound, fails `owner` and errors the body. */
  private counter(owner: RequestId | undefined, bound: MessageBound): TransformStream<Uint8Array, Uint8Array> {
    let bytes = 0;
    return new TransformStream({
      transform: (chunk, controller) => {
        bytes += chunk.length;
        if (bytes <= bound.maxBytes) {
          controller.enqueue(chunk);
          return;
        }
        if (owner !== undefined) remember(this.failed, owner, true);
        controller.error(bound.oversized(owner));
      },
    });
  }
}

/**
 * The `id` of an oversized event from its head (the whole event when it came
 * in one piece): its whole lines (a cut-off last line is left out), then an
 * empty data line and a blank line, since eventsource-parser dispatches only
 * an event with data. The first event dispatched is the oversized one.
 */
function eventIdOf(head: string): string | undefined {
  let first: EventSourceMessage | undefined;
  const wholeLines = head.slice(0, Math.max(head.lastIndexOf("\n"), head.lastIndexOf("\r")) + 1);
  createParser({ onEvent: (event) => (first ??= event) }).feed(`${wholeLines}data:\n\n`);
  return first?.id;
}

function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_REMEMBERED) map.delete(map.keys().next().value as K);
}

/** The id of the one JSON-RPC request a POST body carries (none for notifications, responses or batches of several). */
function postedRequestId(body: RequestInit["body"]): RequestId | undefined {
  if (typeof body !== "string") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  const requests = (Array.isArray(parsed) ? parsed : [parsed]).map(requestId).filter((id) => id !== undefined);
  return requests.length === 1 ? requests[0] : undefined;
}

/** The id of the JSON-RPC request in an SSE event's data, if it is one. */
function requestIdOf(data: string): RequestId | undefined {
  if (!data.includes('"method"')) return undefined;
  try {
    return requestId(JSON.parse(data));
  } catch {
    return undefined;
  }
}

function requestId(message: unknown): RequestId | undefined {
  if (!message || typeof message !== "object" || !("method" in message) || !("id" in message)) return undefined;
  const id = (message as { id: unknown }).id;
  return typeof id === "string" || typeof id === "number" ? id : undefined;
}
