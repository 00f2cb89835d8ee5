/**
 * One Streamable HTTP MCP endpoint (e.g. /mcp): maps Mcp-Session-Id headers
 * to a transport + face server + gateway Session. initialize without a
 * session id creates all three; DELETE or idle expiry destroys them.
 * 400 for a missing session header, 404 for an unknown session.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { describeError, errorMessage } from "../errors.js";
import type { GatewayContext } from "../server/context.js";
import type { Session } from "../session/session.js";
import { BodyTooLargeError, readBody, sendJsonRpcError } from "./json-rpc.js";

export type FaceFactory = (session: Session) => McpServer;

interface Binding {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  session: Session;
}

export class McpEndpoint {
  private readonly bindings = new Map<string, Binding>();

  constructor(
    private readonly gateway: GatewayContext,
    private readonly face: FaceFactory,
  ) {}

  get sessionCount(): number {
    return this.bindings.size;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId !== undefined) {
      const binding = this.bindings.get(sessionId);
      if (!binding) {
        return sendJsonRpcError(res, 404, -32001, `Session not found: '${sessionId}' does not exist or has expired; send initialize without Mcp-Session-Id to start a new session`);
      }
      binding.session.touch();
      await binding.transport.handleRequest(req, res);
      return;
    }
    if (req.method !== "POST") {
      return sendJsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required (start a session with an initialize POST)");
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req, this.gateway.settings.http.maxBodyBytes));
    } catch (err) {
      if (err instanceof BodyTooLargeError) return sendJsonRpcError(res, 413, -32600, err.message);
      return sendJsonRpcError(res, 400, -32700, `Parse error: ${errorMessage(err)}`);
    }
    if (!isInitializeRequest(body)) {
      return sendJsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required; the first request of a session must be a single initialize request");
    }
    let session: Session;
    try {
      session = this.gateway.sessions.create(randomUUID());
    } catch (err) {
      return sendJsonRpcError(res, 503, -32000, describeError(err));
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => session.id,
      maxRequestBodySize: this.gateway.settings.http.maxBodyBytes,
      onsessioninitialized: (id) => {
        this.bindings.set(id, { transport, server, session });
      },
    });
    const server = this.face(session);
    transport.onclose = () => {
      if (this.bindings.delete(session.id)) void this.gateway.sessions.destroy(session.id, "client closed the session");
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    if (!this.bindings.has(session.id)) {
      // initialize was rejected by the transport: nothing to keep.
      await this.gateway.sessions.destroy(session.id, "initialize failed");
      await server.close().catch(() => undefined);
    }
  }

  /** The gateway destroyed a session (idle expiry, shutdown): close its transport. */
  release(sessionId: string): void {
    const binding = this.bindings.get(sessionId);
    if (!binding) return;
    this.bindings.delete(sessionId);
    void binding.server.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    const all = [...this.bindings.values()];
    this.bindings.clear();
    await Promise.allSettled(all.map((b) => b.server.close()));
  }
}
