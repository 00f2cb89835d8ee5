/**
 * The HTTP edge: probes, guards, then declarative routing to MCP endpoints.
 * No business logic lives here.
 *
 * Order: the liveness/readiness probes (GET/HEAD only) are answered before
 * the Host/Origin/token guards, because container probes send neither a
 * token nor the gateway's Host, and the probes reveal nothing but a status
 * word. Everything else passes the guards first; while the gateway shuts
 * down, MCP requests then get 503 (the listener stays open so /readyz can
 * say "not ready" until the last upstream is gone).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { GatewaySettings } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { Authenticator } from "../auth/authenticator.js";
import { serveMetadata } from "../auth/metadata.js";
import { withPrincipalLogFields } from "../auth/log-fields.js";
import { attachPrincipal, OPERATOR } from "../auth/principal.js";
import type { ResourceUrlOptions } from "../auth/resource-url.js";
import { systemClock, type Clock } from "../clock.js";
import { checkRequest, hostAllowed, isConsolePath, type GuardOptions } from "./guards.js";
import { sendErrorReply, sendJsonRpcError } from "./json-rpc.js";
import type { McpEndpoint } from "./mcp-endpoint.js";

export interface Routes {
  /** Maps a path to its MCP endpoint, e.g. "/mcp" to the meta face; with `req`, only one its principal may see (a runtime server's face). */
  endpoint(path: string, req?: http.IncomingMessage): McpEndpoint | undefined;
  /** Paths to list in 404 messages. */
  describe: string;
  /** A more precise 404 message for a path no endpoint serves (e.g. an unknown virtual server), if there is one. */
  notFound?: (path: string) => string | undefined;
  /** GET/HEAD probes answered before the guards (e.g. /healthz): a status code and a small JSON body that reveals nothing else. */
  probes?: Record<string, () => ProbeReply | Promise<ProbeReply>>;
  /**
   * Non-MCP handlers served after the guards (metrics, console), tried in
   * order: the first that returns true has answered the request.
   */
  pages?: readonly PageHandler[];
  /** The console's own credential under /console (its login cookie, src/console/cookies.ts), for the guards. */
  consoleCredential?: GuardOptions["consoleCredential"];
  /** While this returns a reason (e.g. shutting down), MCP requests are answered 503 with it. */
  unavailable?: () => string | undefined;
}

/** Answers `req` (and returns true) when `path` is its own; may answer asynchronously, handling its own errors. */
export type PageHandler = (req: http.IncomingMessage, res: http.ServerResponse, path: string) => boolean;

export interface ProbeReply {
  status: number;
  /** JSON (a status word for the probes; the Client ID Metadata Document, src/upstream/auth/setup.ts). */
  body: Record<string, unknown>;
}

/** What the HTTP edge takes besides settings and routes (tests inject them). */
export interface HttpServerOptions {
  clock?: Clock | undefined;
  /** For OAuth metadata, key sets and introspection. */
  fetch?: typeof fetch | undefined;
}

export function createHttpServer(settings: GatewaySettings, routes: Routes, logger: Logger, options: HttpServerOptions = {}): http.Server {
  const oauth = settings.auth.oauth.issuers.length > 0 ? settings.auth.oauth : undefined;
  const guard = {
    allowedHosts: settings.allowedHosts,
    allowedOrigins: settings.allowedOrigins,
    token: settings.token,
    oauth: oauth !== undefined,
    consoleCredential: routes.consoleCredential,
    consoleLogin: settings.console.enabled && settings.console.oidc.clientId !== undefined,
  };
  const isFace = (path: string): boolean => routes.endpoint(path) !== undefined;
  const urls: ResourceUrlOptions = {
    publicUrl: settings.http.publicUrl,
    trustForwardedHeaders: settings.http.trustForwardedHeaders,
    hostAllowed: (host) => hostAllowed(host, settings.allowedHosts),
    listenAddress: () => {
      const a = server.address();
      return a !== null && typeof a === "object" ? `${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}` : undefined;
    },
  };
  // Loaded only with OAuth: it brings jose (JWTs, key sets), about 60 ms of CPU at start otherwise (docs/adr/0039).
  const authenticator: Promise<Authenticator> | undefined =
    oauth &&
    import("../auth/authenticator.js").then(
      ({ Authenticator }) => new Authenticator({ token: settings.token, oauth, urls, isFace, clock: options.clock ?? systemClock, fetch: options.fetch }),
    );
  // A failed load is each request's 500 (below), never an unhandled rejection.
  authenticator?.catch(() => undefined);
  const server = http.createServer((req, res) => {
    try {
      route(req, res);
    } catch (err) {
      // Nothing a request does may take the process down.
      logger.error({ err: errorMessage(err) }, "http_handler_failed");
      if (!res.headersSent) sendErrorReply(res, 500, err);
      else res.destroy();
    }
  });
  // Longer than clients' and proxies' idle timeouts (undici 4 s, typical load balancers 60 s): the client closes an idle
  // connection first, so a request never lands on one the gateway is closing (ECONNRESET on a loaded machine).
  server.keepAliveTimeout = settings.http.keepAliveTimeoutMs;

  function route(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const probes = routes.probes;
    const probe = (req.method === "GET" || req.method === "HEAD") && probes && Object.hasOwn(probes, path) ? probes[path] : undefined;
    if (probe) {
      const answer = ({ status, body }: ProbeReply) => {
        res.writeHead(status, { "Content-Type": "application/json", "Cache-Control": "no-store" });
        res.end(req.method === "HEAD" ? undefined : JSON.stringify(body));
      };
      const reply = probe();
      if (!(reply instanceof Promise)) return answer(reply);
      // An asynchronous probe (/readyz asks the store) must not fail the request: a failure is a 503.
      reply.then(answer, (err: unknown) => {
        logger.error({ err: errorMessage(err), path }, "probe_failed");
        answer({ status: 503, body: { status: "probe_failed" } });
      });
      return;
    }
    const failure = checkRequest(req, guard);
    if (failure) return sendJsonRpcError(res, failure.status, -32000, failure.message, failure.headers);
    if (!authenticator || !oauth || isConsolePath(path)) {
      // The static token (if any) passed checkRequest: its one principal.
      if (settings.token !== undefined && !isConsolePath(path)) attachPrincipal(req, OPERATOR, settings.token);
      return dispatch(req, res, path);
    }
    if (serveMetadata(req, res, path, { oauth, urls, isFace })) return;
    authenticator
      .then((a) => a.authenticate(req, path))
      .then(
        (outcome) => {
          if (!("principal" in outcome)) return sendJsonRpcError(res, outcome.status, -32000, outcome.message, outcome.headers);
          attachPrincipal(req, outcome.principal, outcome.token);
          dispatch(req, res, path);
        },
        (err: unknown) => {
          logger.error({ err: errorMessage(err), path }, "http_handler_failed");
          if (!res.headersSent) sendErrorReply(res, 500, err);
        },
      );
  }

  /** After the guards (and, with OAuth, the principal): pages, then the MCP endpoints. */
  function dispatch(req: http.IncomingMessage, res: http.ServerResponse, path: string): void {
    if (routes.pages?.some((page) => page(req, res, path))) return;
    const endpoint = routes.endpoint(path, req);
    const unavailable = endpoint && routes.unavailable?.();
    if (unavailable) return sendJsonRpcError(res, 503, -32000, unavailable, { Connection: "close" });
    if (endpoint) {
      // Every line logged while the request is handled names its principal (ADR 0018, decision 12).
      void withPrincipalLogFields(req, settings.auth, () =>
        endpoint.handle(req, res).catch((err: unknown) => {
          logger.error({ err: errorMessage(err), path }, "http_handler_failed");
          sendErrorReply(res, 500, err);
        }),
      );
      return;
    }
    sendJsonRpcError(res, 404, -32601, routes.notFound?.(path) ?? `Not found: ${req.method} ${path}. MCP endpoints: ${routes.describe}`);
  }
  return server;
}

export function listen(server: http.Server, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}
