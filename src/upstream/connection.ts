/**
 * UpstreamConnection: one MCP client connection to one upstream server — its
 * lifecycle, its continuation across restarts and its liveness checks. See
 * docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  ErrorCode,
  type Tool,
  type ClientCapabilities,
  type Implementation,
  type LoggingLevel,
  type ServerCapabilities,
} from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../logging.js";
import { systemClock, type Clock, type TimerHandle } from "../clock.js";
import { isStdioConfig, type ServerConfig } from "../config/server-entry.js";
import type { ChildProcessLimiter } from "./children.js";
import { ErrorCodes, GatewayError, errorMessage, isUpstreamAnswer, mcpErrorCode } from "../errors.js";
import { installOrderedProgress } from "../mcp/ordered-progress.js";
import { isStandaloneStreamError } from "../mcp/standalone-stream.js";
import { RequestAttribution } from "../mcp/request-attribution.js";
import { RawCalls } from "./raw-calls.js";
import { newUpstreamClient, type UpstreamHandlers } from "./client-handlers.js";
import type { CallOrigin } from "./origin.js";
import { UpstreamHandle, type ConnectionStatus } from "./handle.js";
import {
  continueSession,
  restore,
  sessionGone,
  snapshot,
  terminateSession,
  type CloseMode,
  type ConnectionPersistence,
  type UpstreamSessionSnapshot,
} from "./session-continuation.js";
import type { CreatedTransport, TransportFactory } from "./transport-types.js";
import { excerptOf } from "./remote-fetch.js";
import type { ReceiverTaskStore } from "./receiver-tasks.js";
import type { ClientTaskStore } from "./client-handlers.js";

export interface UpstreamConnectionOptions {
  name: string;
  config: ServerConfig;
  handlers: UpstreamHandlers;
  transportFactory: TransportFactory;
  clientInfo: Implementation;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  logger: Logger;
  /** Declare `roots` to the upstream (only when the downstream client has roots). */
  roots?: ClientCapabilities["roots"] | undefined;
  /** Serves the upstream's task-augmented sampling/elicitation requests (design TK-17). */
  receiverTasks?: ReceiverTaskStore | undefined;
  /** The task store the SDK client is made with, when not receiverTasks (a warm connection's: the taking session's, docs/adr/0044). */
  clientTaskStore?: ClientTaskStore | undefined;
  /** Caps stdio children gateway-wide. */
  children?: ChildProcessLimiter | undefined;
  /** Upstream session, logging level and subscriptions kept by the owner (see the header). */
  persistence?: ConnectionPersistence | undefined;
  /** Remote upstreams: while requests are in flight, ping this often (gateway.upstream.livenessPingMs). @default 0 (off) */
  livenessPingMs?: number | undefined;
  /** Bound on each ping that checks a remote upstream (gateway.upstream.pingTimeoutMs; requestTimeoutMs if shorter). @default 10000 */
  pingTimeoutMs?: number | undefined;
  /** @default systemClock */
  clock?: Clock | undefined;
  /** A server added at runtime: its transport applies gateway.servers.runtimeUrls and follows no redirect (docs/adr/0015). */
  runtime?: boolean | undefined;
  /** The config each transport is made with, read when connecting (a person's secrets: upstream/auth/secrets.ts); `config` stays what is shown. */
  resolveConfig?: ((config: ServerConfig) => Promise<ServerConfig>) | undefined;
  /** Called once when this connection is done for good: closed, lost, or its connect failed (a new one replaces it). */
  onEnded?: (() => void) | undefined;
}

const STDERR_TAIL_LINES = 20;
/** How long a failed connect waits for the process's stderr to end, so the reason can quote it. */
const STDERR_SETTLE_MS = 1_000;

/** Characters of a failure's own message kept in `lastError` (the stderr tail is added after). */
const FAILURE_CHARS = 500;
/** Bound on each ping that checks a remote upstream, unless pingTimeoutMs says otherwise (or the request timeout is shorter). */
const PROBE_TIMEOUT_MS = 10_000;
/** Tool lists a connection made ahead fetches at most while the upstream says its list changed. */
const PREFETCH_TRIES = 3;
/** Unanswered pings in a row, with nothing else heard from the upstream, that make a drop. */
const UNANSWERED_PINGS = 2;

export class UpstreamConnection extends UpstreamHandle {
  readonly name: string;
  status: ConnectionStatus = "idle";
  lastError: string | undefined;
  connectedAt: number | undefined;
  readonly shared = false;
  private client: Client | undefined;
  private created: CreatedTransport | undefined;
  private readonly stderrTail: string[] = [];
  private closing = false;
  private releaseChild: (() => void) | undefined;
  private declared: ClientCapabilities | undefined;
  private calls: RequestAttribution<CallOrigin> | undefined;
  /** The raw-send seam of the connected transport (raw-calls.ts, docs/adr/0037 §2). */
  private raw: RawCalls | undefined;
  /** A continued upstream session: the SDK client did not initialize it, so what it negotiated comes from here. */
  private continued: UpstreamSessionSnapshot | undefined;
  /** The ping checking the connection after a transport error, while in flight. */
  private probe: Promise<void> | undefined;
  /** The liveness ping's next check (remote upstreams with livenessPingMs). */
  private liveness: TimerHandle | undefined;
  /** Why a remote upstream was found gone (its transport does not close by itself). */
  private lostReason: string | undefined;
  /** Messages received from the upstream (any kind): one that arrives while a ping waits shows it alive. */
  private heard = 0;
  /** onEnded was called. */
  private ended = false;
  /** Connected ahead of any session (the warm pool, docs/adr/0044): its connect, which the taking session's connect() waits for. */
  private ahead: Promise<void> | undefined;
  /** tools/list_changed notifications received (connectAhead fetches the list again after one). */
  private toolListChanges = 0;
  /** Called by the taking session's connect(): what the upstream sent before goes to the session from then on. */
  private taken: (() => void) | undefined;

  /** Options (a warm connection's handlers, logger, persistence and receiver tasks become the taking session's: adopt()). */
  constructor(private options: UpstreamConnectionOptions) {
    super(options.requestTimeoutMs);
    this.name = options.name;
  }

  get serverInfo(): Implementation | undefined {
    return this.client?.getServerVersion() ?? this.continued?.serverInfo;
  }

  override get capabilities(): ServerCapabilities | undefined {
    return this.client?.getServerCapabilities() ?? this.continued?.capabilities;
  }

  get instructions(): string | undefined {
    return this.client?.getInstructions() ?? this.continued?.instructions;
  }

  /** Whether this connection continued a stored upstream session rather than initializing one. */
  get continuedSession(): boolean {
    return this.continued !== undefined;
  }

  /** The capabilities the gateway declared to this upstream (set by connect()). */
  get declaredCapabilities(): ClientCapabilities | undefined {
    return this.declared;
  }

  /** The receiver tasks that live and die with this connection (its owner closes them). */
  get receiverTasks(): ReceiverTaskStore | undefined {
    return this.options.receiverTasks;
  }

  /** The upstream's own MCP session id (streamable HTTP only). */
  get upstreamSessionId(): string | undefined {
    return this.created?.sessionId?.();
  }

  get pid(): number | null {
    return this.created?.pid?.() ?? null;
  }

  override get stderrLines(): readonly string[] {
    return [...this.stderrTail];
  }

  async connect(): Promise<void> {
    if (this.taken) return this.connectTaken(this.taken);
    try {
      await this.open();
    } catch (err) {
      // A connection whose connect failed is not used again (the owner makes a new one).
      if (this.status !== "connected") this.end();
      throw err;
    }
  }

  /**
   * Connects before any session asks (the warm pool, docs/adr/0044): initialize, then the tool list, fetched
   * again while a tools/list_changed came during the fetch (a server registers tools once initialized: the list
   * a session's first call finds is the one after that), at most PREFETCH_TRIES times. A failed list is not the
   * connection's failure: the session lists again. A session takes the connection with adopt().
   */
  connectAhead(): Promise<void> {
    const connected = this.connect();
    // A session that takes the connection waits for the connect only, not for the list: a server that needs a
    // client's answer to list its tools gets the taking session's answer instead of stalling its first call.
    this.ahead = connected;
    connected.catch(() => undefined);
    const ready = connected.then(async () => {
      let tools: Tool[] | undefined;
      for (let i = 0; i < PREFETCH_TRIES; i++) {
        const changes = this.toolListChanges;
        tools = await this.cachedTools().catch(() => undefined);
        if (tools === undefined || this.toolListChanges === changes) break;
      }
      this.options.logger.info({ server: this.name, tools: tools?.length }, "warm_connection_ready");
    });
    ready.catch(() => undefined);
    return ready;
  }

  /**
   * A session takes this connection made ahead: its logger, persistence and receiver tasks from now on, and the child
   * slot its process holds (`releaseChild`); `taken` runs when the session's connect() finds it connected. The handlers
   * stay the ones it was made with (the warm connection's): they pass to the session's in `taken`, after what waited, so
   * a stderr line or a close between the take and the connect is kept in order, not sent ahead of it.
   */
  adopt(parts: Pick<UpstreamConnectionOptions, "logger" | "persistence" | "receiverTasks">, releaseChild: () => void, taken: () => void): void {
    this.options = { ...this.options, ...parts };
    this.releaseChild = releaseChild;
    this.taken = taken;
  }

  /** The taking session's connect(): waits for the connect made ahead (if still running), then sets again what the session keeps. */
  private async connectTaken(taken: () => void): Promise<void> {
    this.taken = undefined;
    try {
      await this.ahead;
    } catch (err) {
      throw err instanceof GatewayError ? err : this.unavailable(err);
    }
    if (this.status !== "connected") throw this.unavailable();
    taken();
    this.options.logger.info({ server: this.name, serverInfo: this.serverInfo, warm: true }, "upstream_connected");
    await restore(this.options, this);
  }

  private async open(): Promise<void> {
    const { name, config, logger, persistence } = this.options;
    this.status = "connecting";
    if (isStdioConfig(config) && this.options.children) {
      try {
        this.releaseChild = await this.options.children.reserve(name);
      } catch (err) {
        this.fail(errorMessage(err));
        throw err;
      }
      // Closed while a slot was freed for it (at the cap): nothing is started.
      if (this.closing) {
        this.releaseChild();
        throw this.unavailable(new Error("closed while waiting for a child-process slot"));
      }
    }
    const resume = persistence?.resume();
    await this.attach(resume?.sessionId);
    const continued = resume !== undefined && this.created?.sessionId?.() === resume.sessionId && (await this.continueSession(resume));
    if (resume !== undefined && !continued) await this.attach(undefined);
    const client = this.client!;
    if (!installOrderedProgress(client, this.created!.transport)) logger.warn({ server: name }, "sdk_ordered_progress_unavailable");
    // Raw calls' progress is taken off before the SDK client's progress dispatch sees it; counted as heard like the rest.
    this.raw?.takeProgress();
    this.countMessages(this.created!.transport);
    this.status = "connected";
    this.connectedAt = (this.options.clock ?? systemClock).now();
    this.lastError = undefined;
    this.watchLiveness(client);
    logger.info({ server: name, serverInfo: this.serverInfo, ...(continued ? { continuedSession: true } : {}) }, "upstream_connected");
    const sessionId = this.created?.sessionId?.();
    if (sessionId !== undefined) persistence?.sessionOpened(continued ? resume : snapshot(name, sessionId, client, this.created));
    // A continued upstream session still has them; a new one (a new process, a new session) needs them again.
    if (!continued) await restore(this.options, this);
  }

  /**
   * Creates the transport (continuing upstream session `sessionId` when
   * given) and an SDK client over it, and connects them (initialize, unless
   * the transport continues a session). Failures leave the connection in
   * `error` and throw EMCP_UPSTREAM_UNAVAILABLE.
   */
  private async attach(sessionId: string | undefined): Promise<void> {
    const { name, config, logger } = this.options;
    const client = this.newClient();
    let created: CreatedTransport;
    try {
      const options = { ...(sessionId !== undefined ? { sessionId } : {}), ...(this.options.runtime ? { runtime: true } : {}) };
      const resolved = this.options.resolveConfig ? await this.options.resolveConfig(config) : config;
      created = this.options.transportFactory(name, resolved, Object.keys(options).length > 0 ? options : undefined);
    } catch (err) {
      this.fail(`cannot create transport: ${errorMessage(err)}`);
      this.releaseChild?.();
      throw this.unavailable(err);
    }
    this.created = created;
    // Before connect: the attribution wraps transport.send, so every request the SDK sends is seen.
    const calls = new RequestAttribution<CallOrigin>(created.requestStreams);
    calls.install(created.transport);
    this.calls = calls;
    // Before connect too: raw calls' answers are taken off right above the client, under the observability tap.
    const raw = new RawCalls(created.transport, this.options.clock ?? systemClock);
    raw.install();
    this.raw = raw;
    created.stderr?.on("data", (chunk: Buffer) => this.captureStderr(chunk));
    client.onclose = () => this.handleClose();
    client.onerror = (err) => {
      logger.debug({ server: name, err: errorMessage(err) }, "upstream_transport_error");
      this.transportError(client, err);
    };
    this.client = client;
    try {
      await client.connect(created.transport, { timeout: this.options.connectTimeoutMs });
    } catch (err) {
      // A process that exits at start often fails the first write (EPIPE) before its stderr is read: wait (briefly) for
      // its last words, so the reason says why it exited ("missing API key"), not only that the pipe broke.
      await this.stderrEnded(created.stderr, STDERR_SETTLE_MS);
      this.fail(this.describeFailure(errorMessage(err)));
      this.closing = true;
      await this.closeClient(client);
      throw this.unavailable(err);
    }
  }

  /** Continues stored upstream session `resume` (see session-continuation.ts); false: it is gone upstream and this client is discarded. */
  private async continueSession(resume: UpstreamSessionSnapshot): Promise<boolean> {
    const client = this.client!;
    const continued = await continueSession(this.options, client, this.created!, resume, async (err) => {
      this.fail(this.describeFailure(errorMessage(err)));
      this.closing = true;
      await this.closeClient(client);
      throw this.unavailable(err);
    });
    if (continued) this.continued = resume;
    return continued;
  }

  /** An SDK client with this connection's capabilities and server→client handlers (client-handlers.ts). */
  private newClient(): Client {
    const { client, declared } = newUpstreamClient({
      clientInfo: this.options.clientInfo,
      handlers: this.options.handlers,
      roots: this.options.roots,
      receiverTasks: this.options.clientTaskStore ?? this.options.receiverTasks,
      attribution: () => this.calls,
      toolsChanged: () => {
        this.toolListChanges++;
        this.toolsChanged();
      },
    });
    this.declared = declared;
    return client;
  }

  /**
   * Waits for upstream task cancels still in flight (each bounded by its
   * timeout); with "end", ends the upstream session (HTTP DELETE, bounded);
   * then closes.
   */
  async close(mode: CloseMode = "end"): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.stopLiveness();
    if (this.status === "connected") {
      await this.settleCancels();
      if (mode === "end") await terminateSession(this.options, this.created);
    }
    this.status = "closed";
    if (this.client) await this.closeClient(this.client);
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.options.onEnded?.();
  }

  /** Closes the SDK client and waits until the stdio child's whole process group is gone. */
  private async closeClient(client: Client): Promise<void> {
    await client.close().catch(() => undefined);
    await this.created?.terminate?.().catch(() => undefined);
    this.releaseChild?.();
  }

  private handleClose(): void {
    // A close while connecting is reported by connect() itself, not as a disconnect.
    if (this.closing || this.status !== "connected") return;
    this.closing = true;
    this.stopLiveness();
    const reason = this.describeFailure(this.lostReason ?? "connection closed");
    this.fail(reason);
    this.status = "disconnected";
    // The child's group is being reaped (stdio-transport.ts); its slot frees once the group is gone.
    const release = () => this.releaseChild?.();
    if (this.created?.terminate) void this.created.terminate().then(release, release);
    else release();
    this.options.logger.warn({ server: this.name, reason }, "upstream_disconnected");
    this.end();
    this.options.handlers.onDisconnect(reason);
  }

  /**
   * A remote upstream's transport reported an error while connected: an
   * upstream that no longer knows the session is gone at once; anything else
   * (a stream cut, a refused request) is checked with a ping, and a failed
   * ping means it is gone. Stdio drops are seen by the transport closing.
   */
  private transportError(client: Client, err: unknown): void {
    if (isStdioConfig(this.options.config) || this.client !== client || this.closing || this.status !== "connected") return;
    const gone = sessionGone(err);
    // A 404 on the optional standalone GET stream is often "no GET route here" (servers that
    // serve POST only, e.g. the conformance suite's): checked with a ping, which 404s if the session is gone.
    if (gone !== undefined && !isStandaloneStreamError(err)) {
      this.lose(client, `the upstream no longer knows its MCP session (HTTP ${gone}): it restarted or ended the session`);
      return;
    }
    this.check(client, errorMessage(err));
  }

  /** Counts every message the transport delivers from the upstream (call after installOrderedProgress, which also wraps onmessage). */
  private countMessages(transport: CreatedTransport["transport"]): void {
    const dispatch = transport.onmessage;
    if (!dispatch) return;
    transport.onmessage = (message, extra) => {
      this.heard++;
      dispatch(message, extra);
    };
  }

  /** Checks the upstream with pings (one check at a time); `what` says what made us check. */
  private check(client: Client, what: string): void {
    if (this.probe) return;
    this.probe = this.probeUpstream(client, what).finally(() => (this.probe = undefined));
  }

  /**
   * Pings until the upstream shows it is alive — an answer (even an error),
   * or any message from it while a ping waited — or is found gone: a ping
   * refused at the connection or a forgotten session at once, unanswered
   * pings only after UNANSWERED_PINGS in a row with nothing heard.
   */
  private async probeUpstream(client: Client, what: string): Promise<void> {
    const timeout = Math.min(this.options.pingTimeoutMs ?? PROBE_TIMEOUT_MS, this.options.requestTimeoutMs);
    for (let unanswered = 0; ;) {
      const heard = this.heard;
      try {
        await client.ping({ timeout });
        this.options.logger.debug({ server: this.name, err: what }, "upstream_probe_ok");
        return;
      } catch (pingErr) {
        const status = sessionGone(pingErr);
        if (status !== undefined) {
          this.lose(client, `the upstream no longer knows its MCP session (HTTP ${status}): it restarted or ended the session`);
          return;
        }
        if (isUpstreamAnswer(pingErr)) return; // it answered (an error): alive
        if (mcpErrorCode(pingErr) !== ErrorCode.RequestTimeout) {
          this.lose(client, `the connection was lost (${what}; a ping to check it failed: ${errorMessage(pingErr)})`);
          return;
        }
        const heardMeanwhile = this.heard !== heard;
        this.options.logger.info({ server: this.name, err: what, timeoutMs: timeout, heardMeanwhile }, "upstream_ping_unanswered");
        if (heardMeanwhile) return; // busy, not gone
        if (++unanswered >= UNANSWERED_PINGS) {
          this.lose(client, `the connection was lost (${what}; a ping to check it failed: ${unanswered} in a row went unanswered: ${errorMessage(pingErr)})`);
          return;
        }
        if (this.client !== client || this.closing || this.status !== "connected") return;
      }
    }
  }

  /**
   * A remote upstream that stops answering without an error (a stopped
   * process, a silent network) is seen only by asking: while requests are in
   * flight it is pinged every `livenessPingMs`.
   */
  private watchLiveness(client: Client): void {
    const ms = this.options.livenessPingMs ?? 0;
    if (ms === 0 || isStdioConfig(this.options.config)) return;
    const clock = this.options.clock ?? systemClock;
    const tick = () => {
      this.liveness = undefined;
      if (this.client !== client || this.closing || this.status !== "connected") return;
      if (!this.idleSince(this.requestCount)) this.check(client, "requests were in flight");
      this.liveness = clock.setTimeout(tick, ms);
    };
    this.liveness = clock.setTimeout(tick, ms);
  }

  private stopLiveness(): void {
    (this.options.clock ?? systemClock).clearTimeout(this.liveness);
    this.liveness = undefined;
  }

  /** Drops a live connection as if it were lost (the owner reconnects on next use, with the config resolved again): a person's secret changed. */
  renew(reason: string): void {
    if (this.client) this.lose(this.client, reason);
  }

  /** The remote upstream is gone: closing the client fails what is in flight (ConnectionClosed) and handleClose reports the drop with `reason`. */
  private lose(client: Client, reason: string): void {
    if (this.client !== client || this.closing || this.status !== "connected") return;
    this.lostReason = reason;
    void client.close().catch(() => undefined);
  }

  /** A request that failed because the connection was lost says so (EMCP_UPSTREAM_UNAVAILABLE), not how the SDK saw it. */
  protected override async requestFailed(err: unknown): Promise<unknown> {
    // A request that failed on a transport error waits for the ping that checks the connection; an answer, a timeout or a cancel does not.
    if (this.lostReason === undefined && this.probe && transportFailure(err)) await this.probe;
    if (this.lostReason === undefined) return err;
    const code = mcpErrorCode(err);
    if (code !== undefined && code !== ErrorCode.ConnectionClosed) return err;
    return new GatewayError(
      ErrorCodes.UPSTREAM_UNAVAILABLE,
      `upstream '${this.name}' was lost while this request ran: ${this.lostReason}. Its state is unknown — it may or may not have completed upstream; the gateway reconnects in the background (list_servers shows when it is back).`,
      { details: { server: this.name }, cause: err },
    );
  }

  private fail(reason: string): void {
    this.status = "error";
    this.lastError = reason;
  }

  private describeFailure(base: string): string {
    // One line, bounded: what an upstream answered must not fill the error (e.g. a schema dump of a non-MCP reply; docs/adr/0015).
    base = excerptOf(base, false, FAILURE_CHARS);
    const tail = this.stderrTail.slice(-3).join(" | ");
    return tail ? `${base} (stderr: ${tail})` : base;
  }

  /** `cause`: the failure that made it unavailable, when there is one. */
  protected override unavailable(cause?: unknown): GatewayError {
    // The caller's own authorization is missing or failed (src/upstream/auth/): that, with its URL, is what they must see.
    if (cause instanceof GatewayError && AUTH_CODES.has(cause.code)) return cause;
    return new GatewayError(
      ErrorCodes.UPSTREAM_UNAVAILABLE,
      `upstream '${this.name}' is unavailable: ${this.lastError ?? "not connected"}. Check its config with list_servers; it is retried on next use.`,
      { details: { server: this.name }, ...(cause === undefined ? {} : { cause }) },
    );
  }

  /** Resolves when `stderr` has ended (the process closed it), or after `ms`; no timer or listener is left behind. */
  private stderrEnded(stderr: NodeJS.ReadableStream | null | undefined, ms: number): Promise<void> {
    const stream = stderr as (NodeJS.ReadableStream & { readableEnded?: boolean }) | null | undefined;
    if (!stream || stream.readableEnded === true) return Promise.resolve();
    const clock = this.options.clock ?? systemClock;
    return new Promise((resolve) => {
      const done = () => {
        clock.clearTimeout(timer);
        stream.removeListener("end", done);
        stream.removeListener("close", done);
        resolve();
      };
      const timer = clock.setTimeout(done, ms);
      stream.once("end", done);
      stream.once("close", done);
    });
  }

  private captureStderr(chunk: Buffer): void {
    for (const line of chunk.toString("utf8").split(/\r?\n/)) {
      if (!line.trim()) continue;
      this.stderrTail.push(line.slice(0, 500));
      if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
      this.options.handlers.onStderr(line);
    }
  }

  protected override connectedClient(): Client | undefined {
    return this.status === "connected" ? this.client : undefined;
  }

  protected override rawCalls(): RawCalls | undefined {
    return this.connectedClient() ? this.raw : undefined;
  }

  protected override attribution(): RequestAttribution<CallOrigin> | undefined {
    return this.calls;
  }

  /**
   * For the sessions' views of a shared connection (shared.ts): they send
   * through this connection's client and attribution with their own request
   * surface. Nothing else may use these.
   */
  viewAccess(): { client: Client | undefined; attribution: RequestAttribution<CallOrigin> | undefined; raw: RawCalls | undefined } {
    return { client: this.connectedClient(), attribution: this.calls, raw: this.rawCalls() };
  }

  protected override subscriptionChanged(uri: string, subscribed: boolean): void {
    this.options.persistence?.subscriptionChanged(uri, subscribed);
  }

  protected override loggingLevelSet(level: LoggingLevel): void {
    this.options.persistence?.loggingLevelSet(level);
  }
}

/** Whether a request's failure came from the connection (the SDK's ConnectionClosed, or the transport's own error), not an answer, a timeout or a cancel. */
function transportFailure(err: unknown): boolean {
  if (isUpstreamAnswer(err)) return false;
  const code = mcpErrorCode(err);
  if (code !== undefined) return code === ErrorCode.ConnectionClosed;
  return err instanceof Error && !(err instanceof GatewayError) && err.name !== "AbortError";
}

/** Failures of the caller's upstream authorization, passed through as they are. */
const AUTH_CODES: ReadonlySet<string> = new Set([ErrorCodes.CONSENT_REQUIRED, ErrorCodes.UPSTREAM_AUTH_FAILED, ErrorCodes.VAULT_UNAVAILABLE]);
