/**
 * A real MCP server for tests that need a remote (`url`) upstream and nothing
 * of server-everything but `echo`: the SDK's McpServer, stateless over
 * Streamable HTTP (a server and transport per POST, JSON answers); GET and
 * DELETE are 405, as the spec allows a stateless server. In the test process,
 * so no upstream process is spent on it (ADR 0059).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/** A node:http request handler serving `echo`, which answers `${replyPrefix}${message}`. */
export function statelessEchoHandler(name: string, replyPrefix: string): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const server = new McpServer({ name, version: "1.0.0" });
    server.registerTool("echo", { description: "echoes", inputSchema: { message: z.string() } }, ({ message }) => ({
      content: [{ type: "text", text: `${replyPrefix}${message}` }],
    }));
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    void server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  };
}
