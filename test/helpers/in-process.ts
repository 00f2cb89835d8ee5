/**
 * Upstreams in the test process (issue 21): a server entry `inProcess(name)`
 * is linked by the gateway's injectable transport factory
 * (GatewayDeps.transportFactory) to a fresh MCP server built here, over the
 * SDK's InMemoryTransport (each message copied through JSON): no spawn, no socket. For protocol-shape tests;
 * lifecycle tests (processes, stderr, crashes of a process) and the
 * byte-for-byte comparisons with a stdio server-everything keep real processes.
 *
 * Upstreams, one server per connection as a stdio process would be:
 *   "everything"  server-everything's own createServer() (its real code). Each
 *                 connection has its own session id: the package keeps roots,
 *                 subscriptions and simulated logging in module maps keyed by it.
 *   "slow"        test/fixtures/slow-server-tools.ts; `crash` drops the connection.
 *   "catalog"     test/fixtures/tool-catalog.ts, the catalog named by the next
 *                 argument (inProcessCatalog(name)): many tools, for tool search.
 *   "rug-pull"    test/fixtures/rug-pull-server.ts: a tool whose description changes after its first call.
 *   "task-server" test/fixtures/task-server-tools.ts, its own task store per connection (a process's
 *                 own, as over stdio); its block-loop tool would block the test process: not for that.
 *   "roots-once"  test/fixtures/roots-once-tools.ts: asks its client at once on `initialized`
 *                 (inProcessRootsOnce(): what it asks, how long it waits). Nothing in between: its
 *                 request reaches the gateway in the same turn as the `initialized` that caused it.
 * Any other entry goes to the real transports (defaultTransportFactory).
 *
 * startEverythingHttpInProcess(): server-everything over Streamable HTTP in this process, as its own
 * `streamableHttp` entry serves it (a session per initialize), for a `url` upstream of a gateway the test
 * runs as a process (docs/adr/0062).
 */
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { everythingServerEntry } from "../../src/config/demo.js";
import { isStdioConfig } from "../../src/config/server-entry.js";
import type { GatewayDeps } from "../../src/server/gateway.js";
import { defaultTransportFactory } from "../../src/upstream/transports.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { createSlowServer } from "../fixtures/slow-server-tools.js";
import { CATALOGS, createCatalogServer, isCatalogName, type CatalogName } from "../fixtures/tool-catalog.js";
import { createRugPullServer } from "../fixtures/rug-pull-server.js";
import { StuckPollStore, createTaskServer } from "../fixtures/task-server-tools.js";
import { createRootsOnceServer, type RootsOnceAsk } from "../fixtures/roots-once-tools.js";
import { startGateway, type TestGateway } from "./gateway.js";

/** The command of an in-process entry (never run: the factory below answers it). */
export const IN_PROCESS_COMMAND = "emceepee-test-in-process";

export type InProcessUpstream = "everything" | "slow" | "catalog" | "rug-pull" | "task-server" | "roots-once";

/** A server entry for `mcpServers` served in this process. */
export function inProcess(name: InProcessUpstream): { command: string; args: string[] } {
  return { command: IN_PROCESS_COMMAND, args: [name] };
}

/** A server entry for one of test/fixtures/tool-catalog.ts's catalogs, served in this process. */
export function inProcessCatalog(name: CatalogName): { command: string; args: string[] } {
  return { command: IN_PROCESS_COMMAND, args: ["catalog", name] };
}

/** roots-once (test/fixtures/roots-once-tools.ts) served in this process, asking `asks` on `initialized` and waiting `timeoutMs` for each answer. */
export function inProcessRootsOnce(asks: readonly RootsOnceAsk[], timeoutMs: number): { command: string; args: string[] } {
  return { command: IN_PROCESS_COMMAND, args: ["roots-once", String(timeoutMs), ...asks] };
}

/** The tool-search corpus: server-everything and each catalog of test/fixtures/tool-catalog.ts but `except`, all in this process. */
export function inProcessCatalogServers(except: readonly CatalogName[] = []): Record<string, { command: string; args: string[] }> {
  const servers: Record<string, { command: string; args: string[] }> = { everything: inProcess("everything") };
  for (const name of Object.keys(CATALOGS) as CatalogName[]) if (!except.includes(name)) servers[name] = inProcessCatalog(name);
  return servers;
}

interface Built {
  server: McpServer;
  cleanup?: () => void;
}

type ServerFactoryResponse = { server: McpServer; cleanup: (sessionId?: string) => void };
// server-everything ships no types and no exports map: its factory, from the file next to its entry point.
const everything = (await import(pathToFileURL(path.join(path.dirname(everythingServerEntry()), "server/index.js")).href)) as {
  createServer(): ServerFactoryResponse;
};

let connections = 0;

const BUILDERS: Record<InProcessUpstream, (drop: () => void, sessionId: string, args: readonly string[]) => Built> = {
  everything: (_drop, sessionId) => {
    const { server, cleanup } = everything.createServer();
    return { server, cleanup: () => cleanup(sessionId) };
  },
  slow: (drop) => ({ server: createSlowServer({ crash: drop }) }),
  catalog: (_drop, _sessionId, [name = ""]) => {
    if (!isCatalogName(name)) throw new Error(`no tool catalog named ${name} (test/fixtures/tool-catalog.ts)`);
    return { server: createCatalogServer(name) };
  },
  "rug-pull": () => createRugPullServer(),
  "roots-once": (_drop, _sessionId, [timeoutMs = "1000", ...asks]) => ({
    // No asks named: the fixture's default (roots), as its stdio entry asks.
    server: createRootsOnceServer({ timeoutMs: Number(timeoutMs), ...(asks.length ? { asks: asks as RootsOnceAsk[] } : {}) }),
  }),
  "task-server": () => {
    const store = new StuckPollStore();
    // The store's TTL timers (up to 2 min) would outlive the connection and hold the test process open.
    return { server: createTaskServer(store), cleanup: () => store.cleanup() };
  },
};

/** The gateway's transport factory with the in-process upstreams; everything else goes to `real`. */
export function inProcessTransportFactory(real: TransportFactory = defaultTransportFactory): TransportFactory {
  return (name, config, options) => {
    if (!isStdioConfig(config) || config.command !== IN_PROCESS_COMMAND) return real(name, config, options);
    const kind = config.args?.[0] as InProcessUpstream | undefined;
    const build = kind !== undefined ? BUILDERS[kind] : undefined;
    if (!build) throw new Error(`no in-process upstream named ${String(kind)} (test/helpers/in-process.ts has: ${Object.keys(BUILDERS).join(", ")})`);
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    for (const side of [clientSide, serverSide]) wire(side);
    serverSide.sessionId = `in-process-${++connections}`;
    const built = build(() => void serverSide.close(), serverSide.sessionId, config.args?.slice(1) ?? []);
    built.server.server.onclose = () => built.cleanup?.();
    // Messages sent before the server's start() are queued by InMemoryTransport.
    built.server.connect(serverSide).catch((err: unknown) => clientSide.onerror?.(err instanceof Error ? err : new Error(String(err))));
    return { transport: clientSide };
  };
}

/** inProcessTransportFactory(), pushing each message the gateway sends an upstream onto `sent` (the upstreams' side of the pipe). */
export function recordingTransportFactory(sent: unknown[]): TransportFactory {
  const linked = inProcessTransportFactory();
  return (name, config, options) => {
    const created = linked(name, config, options);
    const send = created.transport.send.bind(created.transport);
    created.transport.send = (message, o) => {
      sent.push(message);
      return send(message, o);
    };
    return created;
  };
}

/** Each message crosses as JSON, as on a real transport (no object shared between the two ends). */
function wire(transport: InMemoryTransport): void {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => send(JSON.parse(JSON.stringify(message)) as typeof message, options);
}

/** startGateway (test/helpers/gateway.ts) with the in-process upstreams linked in; `deps.transportFactory` serves the other entries. */
export function startInProcessGateway(raw: Parameters<typeof startGateway>[0] = {}, deps: GatewayDeps = {}): Promise<TestGateway> {
  return startGateway(
    { mcpServers: { everything: inProcess("everything") }, ...raw },
    { ...deps, transportFactory: inProcessTransportFactory(deps.transportFactory) },
  );
}

/** An upstream served over HTTP in this process. */
export interface InProcessHttpServer {
  /** http://127.0.0.1:PORT/mcp */
  url: string;
  close(): Promise<void>;
}

/**
 * server-everything over Streamable HTTP in this process: what its `streamableHttp` entry does (node_modules/
 * @modelcontextprotocol/server-everything/dist/transports/streamableHttp.js: a createServer() and a transport with
 * an event store per session, made at an initialize without a session id; 400 for an unknown one), on node:http
 * instead of express, without the process (issue 21, docs/adr/0062). Its sessions, and their tasks, outlive the
 * gateways that use it.
 */
export async function startEverythingHttpInProcess(): Promise<InProcessHttpServer> {
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; close: () => Promise<void> }>();
  const badSession = (res: http.ServerResponse) =>
    res
      .writeHead(400, { "content-type": "application/json" })
      .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: No valid session ID provided" }, id: null }));
  const server = http.createServer((req, res) => {
    void (async () => {
      if (new URL(req.url ?? "/", "http://x").pathname !== "/mcp") return void res.writeHead(404).end();
      const sessionId = req.headers["mcp-session-id"];
      const known = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
      if (known) return known.transport.handleRequest(req, res);
      if (sessionId !== undefined || req.method !== "POST") return badSession(res);
      const { server: mcp, cleanup } = everything.createServer();
      const events: Array<{ id: string; streamId: string; message: unknown }> = [];
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: {
          storeEvent: async (streamId, message) => {
            const id = randomUUID();
            events.push({ id, streamId, message });
            return id;
          },
          // As the SDK's InMemoryEventStore (server-everything's): the events of the resumed stream after
          // `lastEventId`, and that stream's id ('' for an unknown event).
          replayEventsAfter: async (lastEventId, { send }) => {
            const at = events.findIndex((e) => e.id === lastEventId);
            if (at === -1) return "";
            const streamId = events[at]!.streamId;
            for (const e of events.slice(at + 1)) if (e.streamId === streamId) await send(e.id, e.message as never);
            return streamId;
          },
        },
        onsessioninitialized: (id) => void sessions.set(id, { transport, close: () => mcp.close() }),
      });
      mcp.server.onclose = () => {
        const id = transport.sessionId;
        if (id && sessions.delete(id)) cleanup(id);
      };
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: async () => {
      await Promise.allSettled([...sessions.values()].map((s) => s.close()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
