/**
 * The MCP endpoints over HTTP and the routes to them: /mcp (meta-tools),
 * /all/mcp (every upstream, prefixed), /servers/<name>/mcp (one upstream,
 * made on first request for a registered name) and /v/<name>/mcp (a virtual
 * server of gateway.governance.virtualServers, docs/adr/0024). Each endpoint opens its face
 * per session and taps it for observability; with replicas (ADR 0013) each
 * routes the sessions this process does not hold.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { principalOf } from "../auth/principal.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { createMetaServer } from "../faces/meta/server.js";
import { createTransparentServer } from "../faces/transparent/server.js";
import { McpEndpoint, type SessionRouter } from "../http/mcp-endpoint.js";
import type { Routes } from "../http/server.js";
import type { Observability } from "../observability/observability.js";
import type { Session } from "../session/session.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { visibleTo } from "../upstream/registry.js";

export interface Endpoints {
  /** For createHttpServer: which endpoint a path is. */
  readonly routes: Pick<Routes, "describe" | "endpoint" | "notFound">;
  /** Forgets a destroyed session in every endpoint. */
  release(sessionId: string): void;
  close(): Promise<void>;
}

export function createEndpoints(context: GatewayContext, observability: Observability, router: SessionRouter | undefined): Endpoints {
  const { registry, settings } = context;
  const tap = (transport: Transport, session: Session, protocolVersion?: string) => observability.tapServer(transport, session, "tcp", protocolVersion);
  const meta = new McpEndpoint(context, {
    face: (session) => {
      observability.faces.opened(session.id, "meta", "tcp");
      return createMetaServer({ session, gateway: context });
    },
    tap,
    router,
    // Lazy by default: listing servers must not spawn them; a session connects a server on first use.
    connectAll: settings.upstream.eagerConnect,
    attachable: true,
    kind: { kind: "meta" },
  });
  const separator = settings.transparent.separator;
  const all = new McpEndpoint(context, {
    face: (session, init) => {
      observability.faces.opened(session.id, "all", "tcp");
      return createTransparentServer({ session, gateway: context, target: { kind: "all", separator }, init });
    },
    tap,
    router,
    connectAll: false,
    kind: { kind: "all" },
  });
  const perServer = new Map<string, McpEndpoint>();
  const serverEndpoint = (name: string): McpEndpoint | undefined => {
    if (!registry.get(name)) return perServer.get(name);
    let endpoint = perServer.get(name);
    if (!endpoint) {
      endpoint = new McpEndpoint(context, {
        face: (session, init) => {
          observability.faces.opened(session.id, "server", "tcp");
          return createTransparentServer({ session, gateway: context, target: { kind: "server", server: name }, init }).catch((err: unknown) => {
            throw singleFaceUnavailable(name, session, err);
          });
        },
        tap,
        router,
        connectAll: false,
        kind: { kind: "server", server: name },
      });
      perServer.set(name, endpoint);
    }
    return endpoint;
  };
  const perVirtual = new Map<string, McpEndpoint>();
  /** Only while the config (as last reloaded) declares it: a removed virtual server's requests get the 404 of an unknown one. */
  const virtualEndpoint = (name: string): McpEndpoint | undefined => {
    if (!context.curation?.virtualServer(name)) return undefined;
    let endpoint = perVirtual.get(name);
    if (!endpoint) {
      endpoint = new McpEndpoint(context, {
        face: (session, init) => {
          observability.faces.opened(session.id, "virtual", "tcp");
          return createTransparentServer({ session, gateway: context, target: { kind: "virtual", name }, init });
        },
        tap,
        router,
        connectAll: false,
        kind: { kind: "virtual", name },
      });
      perVirtual.set(name, endpoint);
    }
    return endpoint;
  };
  const endpoints = () => [meta, all, ...perServer.values(), ...perVirtual.values()];
  return {
    routes: {
      describe: "/mcp (meta-tools), /all/mcp (all upstreams, prefixed), /servers/<name>/mcp (one upstream), /v/<name>/mcp (a virtual server)",
      notFound(path) {
        const v = /^\/v\/([^/]+)\/mcp$/.exec(path);
        if (!v) return undefined;
        const known = context.curation?.virtualServerNames() ?? [];
        return `no virtual server named '${decodePathSegment(v[1]!)}' (gateway.governance.virtualServers has ${known.length ? known.join(", ") : "none"}); use /v/<name>/mcp with one of those, or /servers/<name>/mcp for one upstream`;
      },
      endpoint(path, req) {
        if (path === "/mcp") return meta;
        if (path === "/all/mcp") return all;
        const v = /^\/v\/([^/]+)\/mcp$/.exec(path);
        if (v) return virtualEndpoint(decodePathSegment(v[1]!));
        const m = /^\/servers\/([^/]+)\/mcp$/.exec(path);
        if (!m) return undefined;
        const name = decodePathSegment(m[1]!);
        // Another principal's runtime server has no face for this caller: the 404 of an unknown name (docs/adr/0015).
        const entry = registry.get(name);
        if (req && entry && !visibleTo(entry, { principal: principalOf(req) })) return undefined;
        return serverEndpoint(name);
      },
    },
    release: (sessionId) => endpoints().forEach((e) => e.release(sessionId)),
    close: async () => {
      await Promise.allSettled(endpoints().map((e) => e.close()));
    },
  };
}

/** A path segment's text, or "" for malformed percent-encoding (no server has that name: 404). */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}

/**
 * `/servers/<name>/mcp` is that one upstream: without it no session can start
 * (502). Its message must not point to meta-face tools this face lacks, so it
 * says why the upstream failed and where the operator looks instead.
 */
function singleFaceUnavailable(name: string, session: Session, err: unknown): unknown {
  if (!(err instanceof GatewayError) || err.code !== ErrorCodes.UPSTREAM_UNAVAILABLE) return err;
  const why = session.view(name).lastError ?? errorMessage(err.cause ?? err);
  return new GatewayError(
    ErrorCodes.UPSTREAM_UNAVAILABLE,
    `upstream '${name}' is unavailable: ${why}. This endpoint serves only '${name}', so no session can start until it is reachable; the next initialize tries again. See the gateway's log (upstream_check_failed), or run \`emceepee check --config <file> --connect\`.`,
    { details: { server: name }, cause: err },
  );
}
