/**
 * What the transparent face's request handlers share (handlers.ts, tasks.ts):
 * the per-session HandlerContext and the registration wrapper that is the
 * face's error boundary. Its own module so neither handler file imports the
 * other.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { toJsonRpcError } from "../../errors.js";
import type { GatewayContext } from "../../session/gateway-context.js";
import type { Session } from "../../session/session.js";
import type { AggregateConnector } from "./aggregate.js";
import type { DownstreamRoutes } from "./bridge.js";
import type { Catalog } from "./catalog.js";

export interface HandlerContext {
  server: Server;
  session: Session;
  catalog: Catalog;
  capabilities: ServerCapabilities;
  /** This face's requests in flight and what waits for a task's tasks/result (bridge.ts). */
  routes: DownstreamRoutes;
  gateway: GatewayContext;
  /** Which upstreams the aggregate face lists now, without waiting for a hung one (aggregate.ts). */
  aggregate: AggregateConnector;
}

/**
 * Registers handlers behind the face's one error boundary: whatever a handler
 * throws reaches the client through toJsonRpcError (an upstream's own
 * JSON-RPC error verbatim — without the "MCP error <code>: " prefix the SDK
 * client adds, which every gateway hop would otherwise repeat — and a
 * GatewayError with its EMCP_* code).
 */
export function verbatimErrors(server: Server): Pick<Server, "setRequestHandler"> {
  const setRequestHandler: Server["setRequestHandler"] = (schema, handler) =>
    server.setRequestHandler(schema, async (request, extra) => {
      try {
        return await handler(request, extra);
      } catch (err) {
        throw toJsonRpcError(err);
      }
    });
  return { setRequestHandler };
}
