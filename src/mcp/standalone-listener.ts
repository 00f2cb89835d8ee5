/**
 * SDK seam — whether a Streamable HTTP client is listening on its standalone
 * GET stream. The SDK server transport sends a message that belongs to no
 * request (`relatedRequestId` unset) on that stream only; while none is open
 * it stores the message for Last-Event-ID replay and returns, so a request
 * sent before the client's first GET (which carries no Last-Event-ID) is
 * never delivered (docs/adr/0047). The faces wait for `open` before sending.
 *
 * Relies on SDK 1.32 private members of the node transport's Web transport:
 * `_webStandardTransport`, its `_streamMapping` keyed by
 * `_standaloneSseStreamId`, and `handleGetRequest` (read from the instance, it
 * serves every GET, fresh or resumed). If they are missing nothing is watched
 * and messages go out at once, as before. Canary:
 * test/integration/standalone-request.test.ts.
 */
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/** One transport's standalone stream, as a face sees it. */
export interface StandaloneListener {
  /** Whether the client's standalone GET stream is open now. */
  readonly open: boolean;
  /** `listener` runs after each GET that left the stream open (a first one or a resumed one); returns the unsubscribe. */
  onOpen(listener: () => void): () => void;
}

/** The SDK Web transport's members this seam uses (SDK 1.32). */
interface WebTransport {
  _streamMapping?: unknown;
  _standaloneSseStreamId?: unknown;
  handleGetRequest?: unknown;
}

const watched = new WeakMap<Transport, StandaloneListener>();

/** Watches `transport`'s standalone stream; call it before the transport serves its first GET. Returns whether the seam holds. */
export function watchStandaloneStream(transport: StreamableHTTPServerTransport): boolean {
  const web = (transport as unknown as { _webStandardTransport?: WebTransport })._webStandardTransport;
  const streams = web?._streamMapping;
  const id = web?._standaloneSseStreamId;
  const handleGet = web?.handleGetRequest;
  if (!web || !(streams instanceof Map) || typeof id !== "string" || typeof handleGet !== "function") return false;
  const listeners = new Set<() => void>();
  web.handleGetRequest = async (req: Request): Promise<Response> => {
    const res = await (handleGet as (req: Request) => Promise<Response>).call(web, req);
    if (streams.has(id)) for (const listener of [...listeners]) listener();
    return res;
  };
  watched.set(transport, {
    get open() {
      return streams.has(id);
    },
    onOpen(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  });
  return true;
}

/** The watch of a transport watched above; undefined for any other (stdio, in-memory: what is sent is delivered). */
export function standaloneListenerOf(transport: Transport | undefined): StandaloneListener | undefined {
  return transport ? watched.get(transport) : undefined;
}
