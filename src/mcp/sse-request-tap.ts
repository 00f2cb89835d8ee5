/**
 * SDK boundary — on which of our requests' streams a Streamable HTTP upstream
 * sent each of its server→client requests.
 *
 * MCP (2025-11-25, Streamable HTTP): a server sends the requests that belong
 * to a client request on that request's SSE stream (the POST's response) and
 * unrelated ones on the standalone GET stream. The SDK's
 * StreamableHTTPClientTransport reads both but does not say which stream a
 * message came on (`_handleSseStream` calls `onmessage(message)` only). Its
 * public `fetch` option lets us see both ends instead: this fetch reads each
 * POST body (the id of the JSON-RPC request it carries) and passes the SSE
 * response body through a transform that parses every event *before* it hands
 * the bytes on, so "upstream request id → our request id" is recorded before
 * the SDK can dispatch the upstream's request. A POST stream the SDK resumes
 * (GET with Last-Event-ID after a drop) still belongs to the request whose
 * stream carried that event id. Requests on the standalone stream, or on a
 * stream we cannot place, are simply not recorded: unknown.
 *
 * No private member is touched. Relies on the transport calling the given
 * fetch for every POST with the JSON-RPC message as a JSON string body, and on
 * SSE framing. Canary: test/unit/sdk-canaries.test.ts.
 */
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** Bound on remembered request ids and event ids (entries nobody asks about, e.g. pings, age out). */
const MAX_REMEMBERED = 1000;

export class SseRequestTap {
  /** Upstream request id → the id of our request on whose stream it arrived. */
  private readonly related = new Map<RequestId, RequestId>();
  /** The last event id seen on a stream → the id of our request that stream belongs to (for resumption). */
  private readonly resumable = new Map<string, RequestId>();

  constructor(private readonly base: FetchLike = (url, init) => fetch(url, init)) {}

  /** Pass as StreamableHTTPClientTransport's `fetch` option. */
  readonly fetch: FetchLike = async (url, init) => {
    const owner = init?.method === "POST" ? postedRequestId(init.body) : this.resumedOwner(init?.headers);
    const response = await this.base(url, init);
    if (owner === undefined || !response.ok || !response.body || !isEventStream(response)) return response;
    const body = response.body.pipeThrough(this.recorder(owner));
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

  /** Passes the stream through unchanged, recording each event of it first. */
  private recorder(owner: RequestId): TransformStream<Uint8Array, Uint8Array> {
    const parser = new SseParser((event) => {
      if (event.id !== undefined) {
        if (event.previousId !== undefined) this.resumable.delete(event.previousId);
        remember(this.resumable, event.id, owner);
      }
      const serverRequestId = requestIdOf(event.data);
      if (serverRequestId !== undefined) remember(this.related, serverRequestId, owner);
    });
    return new TransformStream({
      transform(chunk, controller) {
        parser.feed(chunk);
        controller.enqueue(chunk);
      },
    });
  }
}

function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_REMEMBERED) map.delete(map.keys().next().value as K);
}

function isEventStream(response: Response): boolean {
  return (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase() === "text/event-stream";
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

interface SseEvent {
  id: string | undefined;
  /** The stream's event id before this one (so it can be forgotten). */
  previousId: string | undefined;
  data: string;
}

/** A minimal incremental parser of the SSE framing: `id` and `data` fields, events ended by a blank line. */
class SseParser {
  private readonly decoder = new TextDecoder();
  private buffer = "";
  private data: string[] = [];
  private id: string | undefined;
  private lastId: string | undefined;

  constructor(private readonly onEvent: (event: SseEvent) => void) {}

  feed(chunk: Uint8Array): void {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      // A lone trailing CR may be the first half of CRLF: wait for the next chunk.
      if (end < 0 || (end === this.buffer.length - 1 && this.buffer[end] === "\r")) return;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(this.buffer.startsWith("\r\n", end) ? end + 2 : end + 1);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.id = value;
  }

  private dispatch(): void {
    const id = this.id;
    const previousId = this.lastId;
    if (id !== undefined) this.lastId = id;
    const data = this.data.join("\n");
    this.data = [];
    this.id = undefined;
    if (id !== undefined || data) this.onEvent({ id, previousId: id !== undefined ? previousId : undefined, data });
  }
}
