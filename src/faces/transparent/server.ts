/**
 * The transparent face: a low-level MCP Server per downstream session that
 * serves the upstreams' own tools, resources, prompts and completions —
 * verbatim for /servers/<name>/mcp, prefixed and aggregated for /all/mcp —
 * over the same Session (connections, pending queue) as the meta-tools face.
 * Capabilities are derived from the connected upstreams, so the client is only
 * offered what can be honoured.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  RootsListChangedNotificationSchema,
  type ClientCapabilities,
  type Implementation,
  type InitializeRequest,
  type ServerCapabilities,
} from "@modelcontextprotocol/sdk/types.js";
import type { GatewayContext } from "../../session/gateway-context.js";
import { withVisibleRequests } from "../../session/bridge.js";
import type { Session } from "../../session/session.js";
import { acceptCancelOfRequestZero } from "../../mcp/cancel-request-zero.js";
import { jsonSchemaValidator } from "../../mcp/json-schema-validator.js";
import type { UpstreamHandle } from "../../upstream/handle.js";
import type { KnownServer } from "../../upstream/known-servers.js";
import { isStdioConfig } from "../../config/server-entry.js";
import { AggregateConnector } from "./aggregate.js";
import { createBridge, DownstreamRoutes } from "./bridge.js";
import { Catalog, type FaceTarget } from "./catalog.js";
import { faceTools } from "./curated.js";
import { registerHandlers } from "./handlers.js";
import { TASKS_CAPABILITY } from "./tasks.js";

export interface TransparentFaceOptions {
  session: Session;
  gateway: GatewayContext;
  target: FaceTarget;
  /** The client's initialize params when known in advance (HTTP). */
  init?: InitializeRequest["params"] | undefined;
}

export async function createTransparentServer(o: TransparentFaceOptions): Promise<Server> {
  const { session, gateway, target } = o;
  const catalog = new Catalog(
    target,
    () => gateway.registry.names(session),
    () => (target.kind === "virtual" ? [...new Set(gateway.curation?.virtualServer(target.name)?.tools.map((t) => t.server))] : []),
  );
  // A missing upstream that joins before the face's server exists has no client to tell yet.
  let announceJoin = (_server: string): void => undefined;
  const aggregate = new AggregateConnector({
    connect: (name) => session.connection(name),
    live: (name) => session.liveConnections().find((c) => c.name === name),
    clock: gateway.clock,
    boundMs: gateway.settings.transparent.aggregateWaitMs,
    backoff: gateway.settings.upstream.reconnect,
    logger: session.logger,
    joined: (name) => announceJoin(name),
  });
  // A server face whose upstream answered before (with this config) answers from that, connecting on first use (docs/adr/0034).
  // The upstreams connected below may ask at once (roots/list on `initialized`): they wait for this face's bridge (docs/adr/0060).
  session.expectBridge();
  // One that a first session is connecting now is waited for: sessions opened together at a cold start answer from
  // that session's answer, not a process each (KnownServers.answerFor). A claim (`done`) goes straight into the try below.
  const upstream = await knownUpstream(session, gateway, target);
  const known = upstream?.info;
  // /all/mcp and /v/<name>/mcp answer initialize with the gateway's own capabilities: nothing to wait for (the first list
  // reaches the upstreams within the bound, TF-10).
  const lazyAggregate = target.kind !== "server" && gateway.settings.transparent.lazyInitialize;
  let connections: UpstreamHandle[] = [];
  if (!known && !lazyAggregate) {
    try {
      connections = await connectAll(session, catalog, aggregate);
    } catch (err) {
      session.bridge = undefined; // no face, no bridge: nothing waits for one
      throw err;
    } finally {
      upstream?.done?.(); // learned (the connect taught KnownServers) or failed: the sessions waiting for it go on
    }
  }
  const capabilities = deriveCapabilities(known ? [known] : connections, target);
  const single = target.kind === "server" ? (connections[0] ?? known) : undefined;
  const virtual = target.kind === "virtual" ? gateway.curation?.virtualServer(target.name) : undefined;
  const info: Implementation =
    single?.serverInfo ??
    (target.kind === "virtual"
      ? { name: target.name, title: virtual?.title ?? `${target.name} (emceepee virtual server)`, version: gateway.version }
      : { name: "emceepee", title: "emceepee (all upstreams)", version: gateway.version });
  const instructions = single ? single.instructions : target.kind === "virtual" ? virtual?.instructions : allInstructions(catalog);
  const server = new Server(info, { capabilities, jsonSchemaValidator, ...(instructions ? { instructions } : {}) });
  acceptCancelOfRequestZero(server); // a client may number a call 0 (SDK 1.32 drops its cancel)
  const routes = new DownstreamRoutes(gateway.clock, session.logger);
  const joined = registerHandlers({ server, session, catalog, capabilities, routes, gateway, aggregate });
  announceJoin = (name) => {
    joined(name);
    listsChanged(server, capabilities);
  };
  // A reload that changes what this client sees (visibility, curation, a virtual server's tools) sends list_changed (docs/adr/0024).
  const unwatch = capabilities.tools
    ? gateway.toolViews?.watch({
        fingerprint: () => toolView(catalog, gateway, session),
        changed: () => void server.sendToolListChanged().catch(() => undefined),
      })
    : undefined;
  server.setNotificationHandler(RootsListChangedNotificationSchema, async () => {
    for (const c of session.liveConnections()) await c.sendRootsListChanged().catch(() => undefined);
  });
  // Upstreams may ask for roots/elicitation before this client has sent `initialized` (they initialized
  // with the gateway earlier). When the client's capabilities are known up front (HTTP), the bridge is
  // installed now and such requests wait for the client to initialize (for a bounded time, see
  // ClientRouting.initializedBridgeFor in src/session/routing.ts) instead of answering "no roots" or queueing what the client could take.
  let markInitialized!: () => void;
  const initialized = new Promise<void>((resolve) => (markInitialized = resolve));
  const install = (caps: ClientCapabilities) => {
    // Listed read-only (the web console) while the client holds its elicitations and sampling requests.
    session.bridge = withVisibleRequests(
      createBridge(
        server,
        caps,
        catalog,
        routes,
        gateway.settings.pendingRequests.timeoutMs,
        initialized,
        gateway.clock,
        gateway.settings.http.standaloneStreamWaitMs,
      ),
      session.pending,
    );
  };
  if (o.init) install(o.init.capabilities);
  server.oninitialized = () => {
    if (!o.init) install(server.getClientCapabilities() ?? {});
    markInitialized();
    // A client with roots is connected now, without waiting: upstreams ask for roots right after initializing (docs/adr/0034).
    if ((known || lazyAggregate) && (o.init?.capabilities ?? server.getClientCapabilities())?.roots) {
      if (target.kind === "server")
        session.connection(target.server).catch(() => undefined); // a failure is the first request's to report
      else void aggregate.reach(catalog.servers()); // missing ones are the next list's to report
    }
  };
  server.onclose = () => {
    unwatch?.();
    aggregate.close();
    session.bridge = undefined;
    routes.close("the client's session on this face closed");
  };
  return server;
}

/** Single face: its upstream must connect (the face *is* that upstream). All face: whatever connects within the bound (TF-10). */
async function connectAll(session: Session, catalog: Catalog, aggregate: AggregateConnector): Promise<UpstreamHandle[]> {
  if (catalog.target.kind === "server") return [await session.connection(catalog.target.server)];
  return (await aggregate.reach(catalog.servers())).connected.map((c) => c.conn);
}

/** A missing upstream joined the aggregate: every list the face offers may have changed. */
function listsChanged(server: Server, caps: ServerCapabilities): void {
  const sends = [
    caps.tools && server.sendToolListChanged(),
    caps.resources && server.sendResourceListChanged(),
    caps.prompts && server.sendPromptListChanged(),
  ];
  // Before the client's transport is connected there is no one to tell (it has not listed yet).
  for (const sent of sends) if (sent) sent.catch(() => undefined);
}

/**
 * The aggregate offers everything it can serve, whichever upstreams answered by `initialize`
 * (TF-10): an upstream that connects later (a slow start, servers added at runtime) is reachable
 * in the same session, and until one has them the lists are empty. `subscribe` too: a
 * subscription goes to the resource's owner, whose own error answers if it has none.
 */
const ALL_FACE_CAPABILITIES: ServerCapabilities = {
  tools: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  prompts: { listChanged: true },
  logging: {},
  completions: {},
};

/**
 * A virtual server offers tools only: its chosen tools from several upstreams, with tasks (docs/adr/0024).
 * Resources, prompts and completions stay on /servers/<name>/mcp and /all/mcp.
 */
const VIRTUAL_FACE_CAPABILITIES: ServerCapabilities = { tools: { listChanged: true } };

/** What the client sees now from the connections it has (nothing is connected for this): the reload's before/after (tool-views.ts). */
async function toolView(catalog: Catalog, gateway: GatewayContext, session: Session): Promise<string> {
  const live = session.liveConnections().filter((c) => catalog.servers().includes(c.name));
  const rows = await Promise.all(live.map(async (c) => (await c.cachedTools()).map((item) => ({ server: c.name, item }))));
  return JSON.stringify(faceTools({ catalog, gateway }, session.principal, rows.flat()).map((t) => t.tool));
}

/**
 * What the upstream of a /servers/<name>/mcp face answered when last connected, or answers to a connect under way,
 * if initialize may answer from it (KnownServers.answerFor; undefined: initialize connects, as before).
 */
async function knownUpstream(
  session: Session,
  gateway: GatewayContext,
  target: FaceTarget,
): Promise<{ info?: KnownServer | undefined; done?: () => void } | undefined> {
  if (target.kind !== "server" || !gateway.settings.transparent.lazyInitialize) return undefined;
  const entry = gateway.registry.get(target.server);
  // Not a server of this session's, or one whose connection needs the person's consent: initialize connects, as before.
  if (!entry || !gateway.registry.names(session).includes(target.server)) return undefined;
  if (!isStdioConfig(entry.config) && entry.config.auth !== undefined) return undefined;
  return gateway.knownServers?.answerFor(target.server, entry.config);
}

function deriveCapabilities(connections: ReadonlyArray<Pick<UpstreamHandle, "capabilities">>, target: FaceTarget): ServerCapabilities {
  if (target.kind === "all") return { ...structuredClone(ALL_FACE_CAPABILITIES), tasks: TASKS_CAPABILITY };
  if (target.kind === "virtual") return { ...structuredClone(VIRTUAL_FACE_CAPABILITIES), tasks: TASKS_CAPABILITY };
  const caps: ServerCapabilities = {};
  for (const c of connections) {
    const up = c.capabilities ?? {};
    if (up.logging) caps.logging = {};
    if (up.completions) caps.completions = {};
    // Keep the upstream's own flags verbatim where they exist.
    for (const key of ["tools", "resources", "prompts"] as const) if (up[key]) caps[key] = { ...up[key] };
  }
  // Every tool can run as a task here, whatever the upstream supports (see tasks.ts).
  if (caps.tools) caps.tasks = TASKS_CAPABILITY;
  return caps;
}

function allInstructions(catalog: Catalog): string {
  const sep = catalog.target.kind === "all" ? catalog.target.separator : "";
  return `emceepee aggregates these MCP servers: ${catalog.servers().join(", ")}. Tool and prompt names are '<server>${sep}<name>'.`;
}
