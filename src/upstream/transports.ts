/**
 * Transport factory: turns one server config into an SDK client transport.
 * Injectable (GatewayDeps.transportFactory) so tests can link in-memory peers.
 * stdio upstreams get our own GroupStdioClientTransport (each in its own
 * process group, ended as a whole: children.ts), not the SDK's. A Streamable
 * HTTP transport can continue a stored upstream session (`sessionId`, after a
 * gateway restart: ADR 0007) and end one (DELETE, when its session ends).
 * The stdio half lives in transports-stdio.ts, which `serve`'s early
 * processes load alone, without the remote transports (ADR 0066); the types
 * all transports share, in transport-types.ts.
 */
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { openStandaloneStream } from "../mcp/resume-session.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";
import { SseEventFramer } from "../mcp/sse-events.js";
import type { GatewayError } from "../errors.js";
import type { FetchLike } from "../mcp/sse-request-tap.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { isStdioConfig, remoteTransportOf, type RemoteServerConfig } from "../config/server-entry.js";
import { createStdioTransport } from "./transports-stdio.js";
import type { CreatedTransport, TransportFactory, TransportFactoryOptions } from "./transport-types.js";
import { errorResponseFor } from "../mcp/error-response.js";
import { isMediaType } from "../mcp/media-type.js";
import { messageTooLarge } from "./message-bound.js";
import { remoteFetch } from "./remote-fetch.js";
import { RuntimeUrlPolicy } from "./url-policy.js";
import { EraTransport } from "./modern/era-transport.js";
import { MrtrRequestTap } from "./modern/mrtr-tap.js";
import { EraVerdicts } from "./modern/probe.js";

/**
 * Bound on the `server/discover` probe of a Streamable HTTP upstream (then it is spoken to as 2025 era). The connect
 * timeout ends it sooner: an upstream that answers nothing gets one request, not a probe and then an initialize.
 */
const ERA_PROBE_TIMEOUT_MS = 300_000;
/** Bound on `input_required` rounds of one request to a 2026-07-28 upstream (bridge 2). */
const MAX_INPUT_ROUNDS = 8;

/** The transports the gateway uses for real upstreams. */
export function createTransportFactory(options: TransportFactoryOptions): TransportFactory {
  const policy = new RuntimeUrlPolicy(options.runtimeUrls ?? DEFAULT_SETTINGS.servers.runtimeUrls);
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_SETTINGS.upstream.maxMessageBytes;
  // Which era each Streamable HTTP endpoint speaks, probed once (src/upstream/modern/probe.ts).
  const verdicts = new EraVerdicts();
  return (name, config, transportOptions = {}) => {
    if (isStdioConfig(config)) return createStdioTransport(name, config, { killGraceMs: options.killGraceMs, maxMessageBytes, groups: options.groups });
    const plain = remoteFetch({ server: name, runtime: transportOptions.runtime ? policy : undefined });
    const fetch = transportOptions.authFetch ? transportOptions.authFetch(plain) : plain;
    return remoteTransport(config, transportOptions.sessionId, fetch, { name, maxMessageBytes }, verdicts);
  };
}

/** With the configured defaults and no group registry (tests wrap it to record what was created). */
export const defaultTransportFactory: TransportFactory = createTransportFactory({
  killGraceMs: DEFAULT_SETTINGS.upstream.killGraceMs,
});

function remoteTransport(
  config: RemoteServerConfig,
  sessionId: string | undefined,
  fetch: FetchLike,
  bound: { name: string; maxMessageBytes: number },
  verdicts: EraVerdicts,
): CreatedTransport {
  const url = new URL(config.url);
  const requestInit: RequestInit = config.headers ? { headers: config.headers } : {};
  if (remoteTransportOf(config) === "sse") {
    // The legacy transport's EventSource reads its one stream itself: its events are framed here, with the bound.
    const bounded = boundedSseFetch(fetch, bound.maxMessageBytes, () => {
      const error = messageTooLarge(bound.name, bound.maxMessageBytes);
      transport.endOversized(error);
      return error;
    });
    const eventSourceInit = sseInit(config.headers, bounded);
    const transport = new BoundedSseClientTransport(url, { requestInit, fetch: bounded, ...(eventSourceInit ? { eventSourceInit } : {}) });
    return { transport };
  }
  // Over the bound, the request whose answer it was fails with EMCP_RESPONSE_TOO_LARGE (design LM-6).
  const requestStreams = new MrtrRequestTap(fetch, {
    maxBytes: bound.maxMessageBytes,
    oversized: (owner) => {
      const error = messageTooLarge(bound.name, bound.maxMessageBytes);
      if (owner !== undefined) transport.onmessage?.(errorResponseFor(owner, error));
      else transport.onerror?.(error);
      return error;
    },
  });
  const legacy = new StreamableHTTPClientTransport(url, { requestInit, fetch: requestStreams.fetch, ...(sessionId !== undefined ? { sessionId } : {}) });
  // Either era: the probe at initialize decides (src/upstream/modern/era-transport.ts); a continued session is 2025 era.
  const transport = new EraTransport({
    name: bound.name,
    url,
    legacy,
    fetch: requestStreams.fetch,
    tap: requestStreams,
    verdicts,
    headers: config.headers,
    continuing: sessionId !== undefined,
    probeTimeoutMs: ERA_PROBE_TIMEOUT_MS,
    maxInputRounds: MAX_INPUT_ROUNDS,
  });
  return {
    transport,
    requestStreams,
    sessionId: () => transport.sessionId,
    protocolVersion: () => (transport.era === "modern" ? undefined : legacy.protocolVersion),
    continueSession: (protocolVersion) => legacy.setProtocolVersion(protocolVersion),
    openStandaloneStream: (onError) => openStandaloneStream(legacy, onError),
    terminateSession: () => (transport.era === "modern" ? Promise.resolve() : legacy.terminateSession()),
  };
}

/** EventSource does not take headers directly; pass them through its fetch. */
function sseInit(headers: Record<string, string> | undefined, fetch: FetchLike) {
  if (!headers) return undefined;
  return {
    fetch: (input: string | URL, init?: RequestInit) =>
      fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...headers } }),
  };
}

/**
 * The legacy HTTP+SSE transport, bounded (design LM-6): every answer comes on
 * its one GET stream, so an oversized event there cannot be skipped without
 * losing the stream's place. The connection ends instead: the requests still
 * waiting fail with EMCP_RESPONSE_TOO_LARGE (which one the event answered is
 * not known), and the upstream is reconnected as after any drop.
 */
export class BoundedSseClientTransport extends SSEClientTransport {
  /** Ids of our requests not yet answered. */
  private readonly outstanding = new Set<RequestId>();

  constructor(...args: ConstructorParameters<typeof SSEClientTransport>) {
    super(...args);
    let handler: Transport["onmessage"];
    Object.defineProperty(this, "onmessage", {
      configurable: true,
      get: () => handler,
      set: (next: Transport["onmessage"]) => {
        handler =
          next &&
          ((message, extra) => {
            if (!("method" in message) && "id" in message && message.id !== undefined) this.outstanding.delete(message.id);
            next(message, extra);
          });
      },
    });
  }

  override send(message: JSONRPCMessage): Promise<void> {
    if ("method" in message && "id" in message) {
      this.outstanding.add(message.id);
      if (this.outstanding.size > MAX_OUTSTANDING) this.outstanding.delete(this.outstanding.values().next().value!);
    }
    return super.send(message);
  }

  override async close(): Promise<void> {
    this.outstanding.clear();
    await super.close();
  }

  /** An event over the bound arrived: every waiting request fails with `error`, and the connection ends. */
  endOversized(error: GatewayError): void {
    const waiting = [...this.outstanding];
    this.outstanding.clear();
    for (const id of waiting) this.onmessage?.(errorResponseFor(id, error));
    this.onerror?.(error);
    void this.close();
  }
}

/** Ids remembered per legacy SSE connection at most (the oldest are forgotten). */
const MAX_OUTSTANDING = 10_000;

/**
 * `fetch` whose `text/event-stream` bodies pass through the SSE event framer
 * with the bound: an event over `maxBytes` is never held; the body errors with
 * what `oversized()` returns and nothing more is read.
 */
export function boundedSseFetch(fetch: FetchLike, maxBytes: number, oversized: () => Error): FetchLike {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (!response.body || !isMediaType(response.headers.get("content-type"), "text/event-stream")) return response;
    let framer: SseEventFramer;
    const bounded = new TransformStream<Uint8Array, Uint8Array>({
      start: (controller) => {
        framer = new SseEventFramer(maxBytes, {
          event: (pieces) => {
            for (const piece of pieces) controller.enqueue(piece);
          },
          oversized: () => {
            controller.error(oversized());
            return false;
          },
          skipped: () => undefined,
        });
      },
      transform: (chunk) => framer.feed(chunk),
      flush: (controller) => {
        for (const piece of framer.rest()) controller.enqueue(piece);
      },
    });
    return new Response(response.body.pipeThrough(bounded), { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
