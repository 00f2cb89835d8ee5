/**
 * One connection served over stdin/stdout with the chosen face (`emceepee stdio`);
 * it lives as long as stdin. Both protocol eras (docs/adr/0032-two-protocol-eras.md,
 * "The stdio face"): the connection is pinned to the era of its first request —
 * a 2025 `initialize` (or any request without the envelope) gives the 2025
 * session, unchanged; a request with the 2026-07-28 envelope makes every later
 * request a stateless one, answered by the same code as the HTTP endpoint's
 * modern path. `server/discover` is answered without pinning (a client may
 * probe, then initialize). A modern `subscriptions/listen` is the HTTP one
 * with the wire as its stream: the acknowledgement and notifications on
 * stdout, ended by the request's `notifications/cancelled` or the wire's end.
 * The 2025 face is built at the connection's first request, its `initialize`,
 * as over HTTP: its upstreams connect knowing the client's capabilities, so
 * they declare its roots (docs/adr/0064).
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { isInitializeRequest, type InitializeRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { createMetaServer } from "../faces/meta/server.js";
import { createTransparentServer } from "../faces/transparent/server.js";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../errors.js";
import { answerModern, type ModernEndpointOptions } from "../http/modern-endpoint.js";
import { listenRequestOf, serveListen, type ListenSink } from "../http/modern-subscriptions.js";
import type { FaceServer } from "../http/face-server.js";
import { MODERN_VERSIONS, PROTOCOL_VERSION_META_KEY, classifyModernMessage, hasEnvelopeClaim } from "../mcp/modern/envelope.js";
import type { Observability } from "../observability/observability.js";
import type { Session } from "../session/session.js";
import type { GatewayContext } from "../session/gateway-context.js";

export type StdioFace = { kind: "meta" } | { kind: "all" } | { kind: "server"; server: string } | { kind: "virtual"; name: string };

export interface StdioOptions {
  face?: StdioFace;
  stdin?: NodeJS.ReadableStream;
  stdout?: NodeJS.WritableStream;
}

type Era = "legacy" | "modern";
type Message = JSONRPCMessage & { id?: string | number; method?: string; params?: Record<string, unknown> };

/** What the wire's first request decides. */
interface EraHandlers {
  /** The first request of a 2025 connection (its initialize, usually): attach the 2025 server to the transport. */
  legacy(first: Message): Promise<void>;
  /** The 2025 face could not be built: answer `request` (held while it was being built) with this. */
  refused(request: Message & { id: string | number }, error: unknown): void;
  pinned(): void;
  message(message: Message): void;
}

/**
 * The stdio wire as the 2025 face's transport, with the era decided by the
 * first request: on a legacy connection messages reach the 2025 server, which
 * attaches at that request (held until it has); on a modern one they go to
 * `modern`. A 2025 face that cannot be built answers the held requests with
 * the reason and leaves the era open: the client may initialize again.
 */
class EraPinningTransport implements Transport {
  era: Era | undefined;
  onmessage?: Transport["onmessage"];
  onclose?: Transport["onclose"];
  onerror?: Transport["onerror"];
  #ended = false;
  #endedWaiters: Array<() => void> = [];
  /** Legacy messages that came while the 2025 face was being built. */
  #held: Message[] | undefined;

  constructor(
    private readonly wire: StdioServerTransport,
    private readonly handlers: EraHandlers,
  ) {}

  /** Opens the wire: messages are routed from here on. */
  async open(): Promise<void> {
    this.wire.onmessage = (message) => this.#route(message as Message);
    this.wire.onerror = (error) => this.onerror?.(error);
    this.wire.onclose = () => this.#end();
    await this.wire.start();
  }

  /** The 2025 server attaching (Server.connect): the wire is open already. */
  async start(): Promise<void> {}

  get isEnded(): boolean {
    return this.#ended;
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.wire.send(message);
  }

  /** The 2025 server closing (never attached on a modern connection). */
  async close(): Promise<void> {
    await this.wire.close();
  }

  /** Settles when the wire is gone (stdin ended, or the gateway closed it). */
  ended(): Promise<void> {
    return this.#ended ? Promise.resolve() : new Promise((resolve) => this.#endedWaiters.push(resolve));
  }

  async closeWire(): Promise<void> {
    await this.wire.close().catch(() => undefined);
    this.#end();
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    for (const resolve of this.#endedWaiters.splice(0)) resolve();
    if (this.era !== "modern") this.onclose?.();
  }

  #route(message: Message): void {
    if (this.era === "legacy") {
      if (this.#held) this.#held.push(message);
      else this.onmessage?.(message);
      return;
    }
    if (this.era === "modern") return this.handlers.message(message);
    if (message.method === undefined) return; // a response before any request: nothing asked for it
    // No envelope (initialize included): the 2025 session, unchanged, for the rest of the connection.
    if (!hasEnvelopeClaim(message)) {
      this.era = "legacy";
      this.#held = [message];
      this.handlers.legacy(message).then(
        () => {
          const held = this.#held ?? [];
          this.#held = undefined;
          if (!this.#ended) for (const m of held) this.onmessage?.(m); // else the face closed itself (attachLegacy)
        },
        (err: unknown) => {
          const held = this.#held ?? [];
          this.#held = undefined;
          this.era = undefined;
          for (const m of held) if (m.method !== undefined && m.id !== undefined) this.handlers.refused(m as Message & { id: string | number }, err);
        },
      );
      return;
    }
    // A refused envelope (malformed, an unsupported revision) and server/discover answer without pinning.
    const classified = classifyModernMessage(message);
    if (classified.kind !== "reject" && message.method !== "server/discover") {
      this.era = "modern";
      this.handlers.pinned();
    }
    this.handlers.message(message);
  }
}

export async function serveStdioSession(
  context: GatewayContext,
  observability: Observability,
  { face = { kind: "meta" }, stdin = process.stdin, stdout = process.stdout }: StdioOptions,
): Promise<{ session: Session; close(): Promise<void> }> {
  const { sessions, settings } = context;
  const build = (session: Session, init?: InitializeRequest["params"]): Promise<FaceServer> | FaceServer =>
    face.kind === "meta"
      ? createMetaServer({ session, gateway: context })
      : createTransparentServer({
          session,
          gateway: context,
          target: face.kind === "all" ? { kind: "all", separator: settings.transparent.separator } : face,
          ...(init ? { init } : {}),
        });
  // The 2025 session, made at once; dropped if the connection turns out modern. Its face and upstreams
  // wait for the client's first request (its capabilities). One session per process: never expired as one-shot.
  const session = sessions.create({ connect: false, oneShot: false, face });
  let server: FaceServer | undefined;
  const modernOptions: ModernEndpointOptions = {
    face: (requestSession, init) => {
      observability.faces.opened(requestSession.id, "stdio", "pipe");
      return build(requestSession, init);
    },
    kind: face,
  };
  /** Modern requests in flight, by id: a `notifications/cancelled` for one ends it as a closed HTTP request would. */
  const inFlight = new Map<string | number, () => void>();
  const wire = new StdioServerTransport(stdin as never, stdout as never);
  const transport: EraPinningTransport = new EraPinningTransport(wire, {
    legacy: (first) => attachLegacy(first),
    refused(request, err) {
      // The wire's end closed the session under the face (so its upstream's connect failed): say that, not the upstream's error.
      const reason = transport.isEnded
        ? new GatewayError(ErrorCodes.CLOSED, "the stdio connection closed (its stdin ended, or the gateway is closing) while its face was starting")
        : err;
      const { code, message, data } = toJsonRpcError(reason, context.logger);
      reply({ id: request.id, error: { code, message, ...(data !== undefined ? { data } : {}) } });
    },
    pinned() {
      // The 2025 session will never be used (its face was never built): it ends.
      void sessions.destroy(session.id, "stdio connection pinned to 2026-07-28").catch(() => undefined);
    },
    message(message) {
      void serveModern(message).catch((err: unknown) => context.logger.warn({ err, method: message.method }, "stdio_modern_request_failed"));
    },
  });
  // The wire's end ends every modern request in flight (one waiter for all: a per-request race on ended() would keep a reaction per request until then).
  let wireGone = false;
  void transport.ended().then(() => {
    wireGone = true;
    for (const end of inFlight.values()) end();
  });
  const reply = (message: Record<string, unknown>) => void transport.send({ jsonrpc: "2.0", ...message } as JSONRPCMessage).catch(() => undefined);

  /** The 2025 face for the connection's first request, knowing the client's capabilities when it is `initialize`. */
  async function attachLegacy(first: Message): Promise<void> {
    // Only a valid initialize tells upstreams anything; the SDK server answers an invalid one as it would have.
    const init = isInitializeRequest(first) ? first.params : undefined;
    if (init) session.clientInitializing(init.capabilities);
    if (face.kind === "meta" && settings.upstream.eagerConnect) session.connectAllInBackground();
    const built = await build(session, init);
    server = built;
    await built.connect(transport);
    observability.tapServer(transport, session, "pipe");
    if (transport.isEnded) await built.close().catch(() => undefined); // the wire ended while the face was built
  }

  async function serveModern(message: Message): Promise<void> {
    if (message.method === undefined) return; // a response: a modern client is never asked anything over the wire
    const id = message.id;
    if (message.method === "notifications/cancelled") inFlight.get((message.params as { requestId?: string | number } | undefined)?.requestId ?? "")?.();
    if (!hasEnvelopeClaim(message)) {
      if (id === undefined) return;
      return reply({ id, error: pinnedRefusal(message) });
    }
    if (id === undefined) return; // modern notifications are not served (as the HTTP path's 202)
    const classified = classifyModernMessage(message);
    if (classified.kind === "reject") {
      const { httpStatus: _status, ...error } = classified.error;
      return reply({ id, error });
    }
    if (classified.kind !== "request") return;
    const closed = new Promise<void>((resolve) => inFlight.set(id, resolve));
    if (wireGone) inFlight.get(id)?.();
    if (classified.method === "subscriptions/listen") return listenOnWire(classified, closed);
    try {
      await answerModern(context, modernOptions, classified, {
        principal: undefined,
        closed,
        send: (_status, answer) => reply(answer),
      });
    } finally {
      inFlight.delete(id);
    }
  }

  /** A listen lives past this call: its entry in `inFlight` goes when the listen ends (its cancellation, the wire's end, the host's end). */
  async function listenOnWire(request: Parameters<typeof listenRequestOf>[0], closed: Promise<void>): Promise<void> {
    let started = false;
    let finished = false;
    const done = () => {
      finished = true;
      inFlight.delete(request.id);
    };
    const sink: ListenSink = {
      get started() {
        return started;
      },
      get finished() {
        return finished || wireGone;
      },
      start: () => (started = true),
      write: (message) => reply(message),
      end: done, // the graceful end's result is the last message written
      onGone(gone) {
        let watching = true;
        void closed.then(() => {
          if (!watching) return;
          done();
          gone();
        });
        return () => (watching = false);
      },
    };
    try {
      await serveListen(context, modernOptions, listenRequestOf(request, undefined), sink);
      if (finished) inFlight.delete(request.id);
    } catch (err) {
      done();
      const { code, message, data } = toJsonRpcError(err, context.logger);
      reply({ id: request.id, error: { code, message, ...(data !== undefined ? { data } : {}) } });
    }
  }

  observability.faces.opened(session.id, "stdio", "pipe");
  await transport.open();
  return {
    session,
    async close() {
      if (transport.era === "legacy" && server) return server.close();
      // Not waiting for a face still being built (an /all face may wait long for its upstreams): it closes itself when done (attachLegacy).
      await transport.closeWire();
    },
  };
}

/** A request without the envelope on a connection pinned to 2026-07-28. */
function pinnedRefusal(message: Message): { code: number; message: string; data?: unknown } {
  const pinned = "this stdio connection speaks 2026-07-28 since its first request, so every request must carry";
  if (message.method === "initialize") {
    const requested = typeof message.params?.protocolVersion === "string" ? message.params.protocolVersion : undefined;
    return {
      code: -32022,
      message: `Unsupported protocol version: ${pinned} params._meta["${PROTOCOL_VERSION_META_KEY}"] and there is no initialize; start a new connection to use ${requested ?? "a 2025 revision"} through initialize`,
      data: { supported: [...MODERN_VERSIONS], ...(requested !== undefined ? { requested } : {}) },
    };
  }
  return {
    code: -32602,
    message: `Invalid params: ${pinned} the per-request envelope params._meta["${PROTOCOL_VERSION_META_KEY}"] (with clientCapabilities and clientInfo); send it, or start a new connection and initialize to use 2025-11-25`,
  };
}
