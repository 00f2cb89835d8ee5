/**
 * A remote upstream that serves POST only and answers the optional
 * standalone GET stream with 404 (an express-style server with one POST
 * route; the conformance suite's auth scenario servers too): the session is
 * still valid for POSTs, so the gateway keeps the connection (a ping checks
 * it) instead of losing it as a forgotten session.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isStandaloneStreamError } from "../../src/mcp/standalone-stream.js";
import { block, call, connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { waitFor } from "../helpers/tasks.js";

let server: http.Server;
let gw: TestGateway;
const seen: string[] = [];

before(async () => {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  server = http.createServer((req, res) => {
    seen.push(req.method ?? "");
    if (req.method !== "POST") return void res.writeHead(404).end("Cannot GET /mcp");
    const id = req.headers["mcp-session-id"];
    let transport = typeof id === "string" ? transports.get(id) : undefined;
    if (!transport) {
      const t = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (sid) => void transports.set(sid, t) });
      const mcp = new McpServer({ name: "post-only", version: "1.0.0" });
      mcp.registerTool("echo", { description: "echo" }, () => ({ content: [{ type: "text", text: "echoed" }] }));
      void mcp.connect(t);
      transport = t;
    }
    void transport.handleRequest(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  gw = await startGateway({ mcpServers: { post: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp` } } });
});

after(async () => {
  await gw?.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

test("a 404 on the standalone GET stream does not lose the session: calls go on through the same connection", async () => {
  const client = await connectClient(gw.url);
  try {
    for (let i = 0; i < 3; i++) {
      const r = await call(client, "execute_tool", { server: "post", tool: "echo", args: {} });
      assert.ok(!r.isError, JSON.stringify(r.content));
      assert.match(JSON.stringify(r.content), /echoed/);
    }
    assert.ok(seen.includes("GET"), "the gateway tried the GET stream");
    const servers = block<Array<{ name: string; status: string }>>(await call(client, "list_servers"), "servers") ?? [];
    assert.equal(servers.find((s) => s.name === "post")?.status, "connected");
  } finally {
    await client.close();
  }
});

test("canary: the SDK's failure to open the standalone GET stream is a StreamableHTTPError with code 404 that isStandaloneStreamError knows", async () => {
  const errors: unknown[] = [];
  const client = new Client({ name: "canary", version: "1" });
  client.onerror = (err) => errors.push(err);
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`)));
  try {
    const err = await waitFor(() => errors.find((e) => e instanceof StreamableHTTPError), "the GET stream's error");
    assert.ok(err instanceof StreamableHTTPError);
    assert.equal(err.code, 404);
    assert.equal(isStandaloneStreamError(err), true, err.message);
    assert.equal(isStandaloneStreamError(new StreamableHTTPError(404, "Error POSTing to endpoint: gone")), false, "a POST's 404 is not it");
  } finally {
    await client.close();
  }
});
