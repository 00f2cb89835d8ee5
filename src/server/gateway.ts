/**
 * createGateway(config, deps): the composition root. Wires the registry,
 * session manager and faces, and serves them over HTTP (listen) or stdio
 * (serveStdio). close() drains everything: sessions, upstream connections,
 * child processes (each stdio upstream's whole process group) and timers;
 * destroy() SIGKILLs those groups at once, for a forced exit.
 */
import type http from "node:http";
import { createRequire } from "node:module";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { systemClock, ulidGenerator, type Clock, type IdGenerator } from "../clock.js";
import type { GatewayConfig } from "../config/schema.js";
import { createMetaServer } from "../faces/meta/server.js";
import { createTransparentServer } from "../faces/transparent/server.js";
import { McpEndpoint } from "../http/mcp-endpoint.js";
import { createHttpServer, listen } from "../http/server.js";
import { silentLogger, type Logger } from "../logging.js";
import { SessionManager } from "../session/session-manager.js";
import type { Session } from "../session/session.js";
import { MemoryTaskRecordStore, type TaskRecordStore } from "../store/task-store.js";
import { ChildProcessLimiter, ProcessGroups } from "../upstream/children.js";
import { ServerRegistry } from "../upstream/registry.js";
import { createTransportFactory, type TransportFactory } from "../upstream/transports.js";
import type { GatewayContext } from "./context.js";

/** A path segment's text, or "" for malformed percent-encoding (no server has that name: 404). */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}

const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };

export type StdioFace = { kind: "meta" } | { kind: "all" } | { kind: "server"; server: string };

export interface GatewayDeps {
  clock?: Clock;
  newId?: IdGenerator;
  logger?: Logger;
  transportFactory?: TransportFactory;
  taskStore?: TaskRecordStore;
}

export interface Gateway {
  readonly context: GatewayContext;
  /** Serves HTTP; resolves with the MCP URL once listening. */
  listen(): Promise<{ url: string; port: number }>;
  /** Serves one session over stdin/stdout with the chosen face. */
  serveStdio(options?: { face?: StdioFace; stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream }): Promise<Session>;
  close(): Promise<void>;
  /**
   * Kills now, synchronously: SIGKILL to every stdio upstream's process group
   * this gateway started (its transports; an injected transportFactory is on
   * its own). Nothing is drained; for a forced exit and `process.on('exit')`.
   */
  destroy(): void;
}

export function createGateway(config: GatewayConfig, deps: GatewayDeps = {}): Gateway {
  const settings = config.gateway;
  const clock = deps.clock ?? systemClock;
  const newId = deps.newId ?? ulidGenerator(clock);
  const logger = deps.logger ?? silentLogger;
  const registry = new ServerRegistry();
  for (const [name, serverConfig] of Object.entries(config.mcpServers)) {
    registry.add({ name, config: serverConfig, addedAt: clock.now(), addedBy: "config" });
  }
  const groups = new ProcessGroups();
  const sessions = new SessionManager({
    registry,
    settings,
    clock,
    newId,
    logger,
    transportFactory: deps.transportFactory ?? createTransportFactory({ killGraceMs: settings.upstream.killGraceMs, groups }),
    taskStore: deps.taskStore ?? new MemoryTaskRecordStore(),
    clientInfo: { name: "emceepee", version: pkg.version },
    children: new ChildProcessLimiter(settings.upstream.maxChildProcesses),
  });
  const context: GatewayContext = { registry, sessions, settings, clock, newId, logger, version: pkg.version };
  const meta = new McpEndpoint(context, { face: (session) => createMetaServer({ session, gateway: context }), connectAll: true, attachable: true });
  const separator = settings.transparent.separator;
  const all = new McpEndpoint(context, {
    face: (session, init) => createTransparentServer({ session, gateway: context, target: { kind: "all", separator }, init }),
    connectAll: false,
  });
  const perServer = new Map<string, McpEndpoint>();
  const serverEndpoint = (name: string): McpEndpoint | undefined => {
    if (!registry.get(name)) return perServer.get(name);
    let endpoint = perServer.get(name);
    if (!endpoint) {
      endpoint = new McpEndpoint(context, {
        face: (session, init) => createTransparentServer({ session, gateway: context, target: { kind: "server", server: name }, init }),
        connectAll: false,
      });
      perServer.set(name, endpoint);
    }
    return endpoint;
  };
  const endpoints = () => [meta, all, ...perServer.values()];
  sessions.onDestroyed = (id) => endpoints().forEach((e) => e.release(id));
  const routes = {
    describe: "/mcp (meta-tools), /all/mcp (all upstreams, prefixed), /servers/<name>/mcp (one upstream)",
    endpoint(path: string): McpEndpoint | undefined {
      if (path === "/mcp") return meta;
      if (path === "/all/mcp") return all;
      const m = /^\/servers\/([^/]+)\/mcp$/.exec(path);
      return m ? serverEndpoint(decodePathSegment(m[1]!)) : undefined;
    },
  };
  let httpServer: http.Server | undefined;
  let stdioClose: (() => Promise<void>) | undefined;
  let closing: Promise<void> | undefined;
  sessions.start();

  return {
    context,
    async listen() {
      httpServer = createHttpServer(settings, { ...routes, get: { "/healthz": () => ({ status: "ok", sessions: sessions.size }) } }, logger);
      const address = await listen(httpServer, settings.host, settings.port);
      const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
      return { url: `http://${host}:${address.port}/mcp`, port: address.port };
    },
    async serveStdio({ face = { kind: "meta" } as StdioFace, stdin = process.stdin, stdout = process.stdout } = {}) {
      const session = sessions.create({ connect: face.kind === "meta" });
      const server =
        face.kind === "meta"
          ? createMetaServer({ session, gateway: context })
          : await createTransparentServer({
              session,
              gateway: context,
              target: face.kind === "server" ? { kind: "server", server: face.server } : { kind: "all", separator },
            });
      const transport = new StdioServerTransport(stdin as never, stdout as never);
      await server.connect(transport);
      stdioClose = () => server.close();
      return session;
    },
    close() {
      closing ??= (async () => {
        // Seed 003 "Log Events": registry_shutdown_start / registry_shutdown_complete.
        logger.info({ serverCount: registry.names().length, sessionCount: sessions.size }, "registry_shutdown_start");
        if (httpServer) {
          const server = httpServer;
          await new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          });
        }
        await Promise.allSettled(endpoints().map((e) => e.close()));
        await stdioClose?.().catch(() => undefined);
        await sessions.close();
        // Groups whose leader crashed are still being reaped in the background: wait for them too.
        await groups.terminateAll();
        logger.info({}, "registry_shutdown_complete");
        logger.info("gateway_closed");
      })();
      return closing;
    },
    destroy() {
      groups.killAll();
    },
  };
}
