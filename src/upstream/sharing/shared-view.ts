/**
 * SharedUpstreamView: one session's view of a shared connection
 * (shared.ts, docs/adr/0010) — its own request surface (every request it
 * sends carries an origin the connection maps back to this session), its own
 * tool cache, logging level and subscriptions (counted by the connection).
 * Closing it detaches the session; the connection stays for the others.
 * It knows the connection only through SharedSide (shared.ts implements it),
 * so the import goes one way: shared.ts → shared-view.ts.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { AnySchema, SchemaOutput } from "@modelcontextprotocol/sdk/server/zod-compat.js";
import type {
  ClientCapabilities,
  ClientRequest,
  EmptyResult,
  Implementation,
  ListToolsRequest,
  ListToolsResult,
  LoggingLevel,
  RequestMeta,
  ServerCapabilities,
} from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { RequestAttribution } from "../../mcp/request-attribution.js";
import type { RawCalls } from "../raw-calls.js";
import type { UpstreamHandlers } from "../client-handlers.js";
import type { UpstreamConnection } from "../connection.js";
import { UpstreamHandle, type ConnectionStatus } from "../handle.js";
import { CallOrigin } from "../origin.js";
import type { ParamsOf, SendOptions } from "../requests.js";
import type { ConnectionPersistence } from "../session-continuation.js";

/** What one session attaches with. */
export interface SharedAttachment {
  /** How the session answers and records what the upstream sends (its routing). */
  handlers: UpstreamHandlers;
  /** The session's level and subscriptions, kept for a restart; set again when it attaches. */
  persistence?: ConnectionPersistence | undefined;
}

/** What a view needs of the shared connection it belongs to (SharedUpstream, shared.ts). */
export interface SharedSide {
  readonly name: string;
  /** The current connection, in whatever state. */
  readonly connection: UpstreamConnection | undefined;
  /** Why the last connection failed or dropped, while a new one is connecting. */
  readonly lastFailure: string | undefined;
  /** The live connection, connecting once for every caller. */
  connect(): Promise<unknown>;
  /** One session leaves: its subscriptions and level stop counting. */
  detach(view: SharedUpstreamView): Promise<void>;
  /** A call of `view` is about to be sent with `origin`. */
  own(origin: CallOrigin, view: SharedUpstreamView): void;
  /** The first tools/list page, fetched once for all sessions. */
  firstToolsPage(fetch: () => Promise<ListToolsResult>): Promise<ListToolsResult>;
  subscribe(view: SharedUpstreamView, uri: string, _meta?: RequestMeta): Promise<void>;
  unsubscribe(view: SharedUpstreamView, uri: string, _meta?: RequestMeta): Promise<void>;
  /** Sets the upstream to the most verbose level any attached session asked for. */
  applyLevel(): Promise<void>;
  /** EMCP_UPSTREAM_UNAVAILABLE with the connection's last error. */
  unavailable(): Error;
}

/** One session's view of a shared connection: its own request surface, tool cache, level and subscriptions. */
export class SharedUpstreamView extends UpstreamHandle {
  readonly shared = true;
  readonly continuedSession = false;
  /** The level this session asked for (undefined: it never set one, and gets what the upstream sends). */
  level: LoggingLevel | undefined;
  private readonly subscriptions = new Set<string>();
  private detached = false;
  private restored = false;

  constructor(
    private readonly upstream: SharedSide,
    private readonly attachment: SharedAttachment,
    requestTimeoutMs: number,
  ) {
    super(requestTimeoutMs);
  }

  get name(): string {
    return this.upstream.name;
  }

  get handlers(): UpstreamHandlers {
    return this.attachment.handlers;
  }

  get status(): ConnectionStatus {
    return this.detached ? "closed" : (this.upstream.connection?.status ?? "idle");
  }

  get lastError(): string | undefined {
    const conn = this.upstream.connection;
    if (conn?.status === "connected") return undefined;
    return conn?.lastError ?? this.upstream.lastFailure;
  }

  override get stderrLines(): readonly string[] {
    return this.upstream.connection?.stderrLines ?? [];
  }

  get connectedAt(): number | undefined {
    return this.upstream.connection?.connectedAt;
  }

  get serverInfo(): Implementation | undefined {
    return this.upstream.connection?.serverInfo;
  }

  override get capabilities(): ServerCapabilities | undefined {
    return this.upstream.connection?.capabilities;
  }

  get instructions(): string | undefined {
    return this.upstream.connection?.instructions;
  }

  get pid(): number | null {
    return this.upstream.connection?.pid ?? null;
  }

  get upstreamSessionId(): string | undefined {
    return this.upstream.connection?.upstreamSessionId;
  }

  get declaredCapabilities(): ClientCapabilities | undefined {
    return this.upstream.connection?.declaredCapabilities;
  }

  /** The shared connection keeps its receiver tasks (shared.ts). */
  get receiverTasks(): undefined {
    return undefined;
  }

  /** Joins the shared connection (connecting it if needed); a resumed session's level and subscriptions are set again once. */
  async connect(): Promise<void> {
    if (this.detached) throw new GatewayError(ErrorCodes.CLOSED, "this session's view of the shared upstream is closed");
    await this.upstream.connect();
    if (this.restored) return;
    this.restored = true;
    const persistence = this.attachment.persistence;
    const level = persistence?.logLevel();
    if (level !== undefined) await this.setLoggingLevel(level).catch(() => undefined);
    for (const uri of persistence?.subscriptions() ?? []) await this.subscribeResource(uri).catch(() => undefined);
  }

  /** Detaches this session (its subscriptions and level stop counting); the connection stays for the others. */
  async close(): Promise<void> {
    if (this.detached) return;
    this.detached = true;
    await this.settleCancels();
    await this.upstream.detach(this);
  }

  /** Every call through a view has an origin, so the shared connection knows whose it is. */
  protected override request<M extends ClientRequest["method"], S extends AnySchema>(
    method: M,
    params: ParamsOf<M>,
    resultSchema: S,
    o: SendOptions = {},
  ): Promise<SchemaOutput<S>> {
    const origin = o.origin ?? new CallOrigin();
    this.upstream.own(origin, this);
    return super.request(method, params, resultSchema, { ...o, origin });
  }

  /** The first page (no cursor, no _meta) comes from the connection's one fetch for all sessions. */
  override async listToolsPage(params?: ListToolsRequest["params"]): Promise<ListToolsResult> {
    if (params?.cursor !== undefined || params?._meta !== undefined) return super.listToolsPage(params);
    return this.upstream.firstToolsPage(() => super.listToolsPage(params));
  }

  override async subscribeResource(uri: string, _meta?: RequestMeta): Promise<EmptyResult> {
    this.assertConnected();
    if (!this.subscriptions.has(uri)) {
      await this.upstream.subscribe(this, uri, _meta);
      this.subscriptions.add(uri);
      this.attachment.persistence?.subscriptionChanged(uri, true);
    }
    return {};
  }

  override async unsubscribeResource(uri: string, _meta?: RequestMeta): Promise<EmptyResult> {
    this.assertConnected();
    if (this.subscriptions.delete(uri)) {
      await this.upstream.unsubscribe(this, uri, _meta);
      this.attachment.persistence?.subscriptionChanged(uri, false);
    }
    return {};
  }

  override async setLoggingLevel(level: LoggingLevel): Promise<EmptyResult> {
    this.assertConnected();
    const before = this.level;
    this.level = level;
    try {
      await this.upstream.applyLevel();
    } catch (err) {
      this.level = before;
      throw err;
    }
    this.attachment.persistence?.loggingLevelSet(level);
    return {};
  }

  /** The upstream's tool list changed: drop this view's cache. */
  toolsListChanged(): void {
    this.toolsChanged();
  }

  protected override connectedClient(): Client | undefined {
    return this.detached ? undefined : this.upstream.connection?.viewAccess().client;
  }

  protected override attribution(): RequestAttribution<CallOrigin> | undefined {
    return this.upstream.connection?.viewAccess().attribution;
  }

  protected override rawCalls(): RawCalls | undefined {
    return this.detached ? undefined : this.upstream.connection?.viewAccess().raw;
  }

  protected override unavailable(): Error {
    return this.upstream.unavailable();
  }
}
