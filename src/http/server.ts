/**
 * The HTTP edge: guards first, then declarative routing to MCP endpoints.
 * No business logic lives here.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { GatewaySettings } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import { checkRequest } from "./guards.js";
import { sendErrorReply, sendJsonRpcError } from "./json-rpc.js";
import type { McpEndpoint } from "./mcp-endpoint.js";

export interface Routes {
  /** Maps a path to its MCP endpoint, e.g. "/mcp" to the meta face. */
  endpoint(path: string): McpEndpoint | undefined;
  /** Paths to list in 404 messages. */
  describe: string;
  /** Extra GET handlers, e.g. /healthz. */
  get?: Record<string, () => unknown>;
}

export function createHttpServer(settings: GatewaySettings, routes: Routes, logger: Logger): http.Server {
  const guard = { allowedHosts: settings.allowedHosts, allowedOrigins: settings.allowedOrigins, token: settings.token };
  return http.createServer((req, res) => {
    try {
      route(req, res);
    } catch (err) {
      // Nothing a request does may take the process down.
      logger.error({ err: errorMessage(err) }, "http_handler_failed");
      if (!res.headersSent) sendErrorReply(res, 500, err);
      else res.destroy();
    }
  });

  function route(req: http.IncomingMessage, res: http.ServerResponse): void {
    const failure = checkRequest(req, guard);
    if (failure) return sendJsonRpcError(res, failure.status, -32000, failure.message, failure.headers);
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const endpoint = routes.endpoint(path);
    if (endpoint) {
      endpoint.handle(req, res).catch((err: unknown) => {
        logger.error({ err: errorMessage(err), path }, "http_handler_failed");
        sendErrorReply(res, 500, err);
      });
      return;
    }
    const get = req.method === "GET" ? routes.get?.[path] : undefined;
    if (get) {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(get()));
      return;
    }
    sendJsonRpcError(res, 404, -32601, `Not found: ${req.method} ${path}. MCP endpoints: ${routes.describe}`);
  }
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
