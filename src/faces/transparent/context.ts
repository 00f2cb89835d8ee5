/**
 * What the transparent face's request handlers share (handlers.ts, tasks.ts):
 * the per-session HandlerContext and the registration wrapper that keeps
 * upstream JSON-RPC errors verbatim. Its own module so neither handler file
 * imports the other.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { McpError, type ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { GatewayContext } from "../../server/context.js";
import type { Session } from "../../session/session.js";
import type { InflightRequests } from "./bridge.js";
import type { Catalog } from "./catalog.js";

export interface HandlerContext {
  server: Server;
  session: Session;
  catalog: Catalog;
  capabilities: ServerCapabilities;
  inflight: InflightRequests;
  gateway: GatewayContext;
}

/**
 * Registers handlers whose upstream JSON-RPC errors reach the client as the
 * upstream sent them. The SDK's client prefixes "MCP error <code>: " to an
 * error's message and its server sends the message as is, so without this
 * every gateway hop would add one more prefix.
 */
export function verbatimErrors(server: Server): Pick<Server, "setRequestHandler"> {
  const setRequestHandler: Server["setRequestHandler"] = (schema, handler) =>
    server.setRequestHandler(schema, async (request, extra) => {
      try {
        return await handler(request, extra);
      } catch (err) {
        if (!(err instanceof McpError)) throw err;
        const error = new McpError(err.code, "", err.data);
        error.message = err.message.replace(/^MCP error -?\d+: /, "");
        throw error;
      }
    });
  return { setRequestHandler };
}
