/**
 * The 2026-07-28 era on the existing endpoints (issue 25, docs/adr/0032):
 * classification, the modern error ladder, server/discover and stateless
 * requests on the meta, /servers/<name> and /all faces, raw fetch against one
 * in-process gateway; and a 2025-11-25 SDK 1.32 client on the same URL.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import type { TestGateway } from "../helpers/gateway.js";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";

const MODERN = "2026-07-28";
const ENVELOPE = {
  "io.modelcontextprotocol/protocolVersion": MODERN,
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": { name: "era-test", version: "1" },
};

interface Answer {
  status: number;
  body: { id?: unknown; result?: Record<string, any>; error?: { code: number; message: string; data?: any } };
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Answer["body"]) : {} };
}

/** A well-formed modern request: envelope, version header, Mcp-Method (and Mcp-Name where the method names one). */
function modern(url: string, id: number, method: string, params: Record<string, unknown> = {}, extra: Record<string, string> = {}): Promise<Answer> {
  const name = (params.name ?? params.uri) as string | undefined;
  return post(
    url,
    { jsonrpc: "2.0", id, method, params: { ...params, _meta: { ...ENVELOPE, ...((params._meta as object | undefined) ?? {}) } } },
    { "MCP-Protocol-Version": MODERN, "Mcp-Method": method, ...(name !== undefined ? { "Mcp-Name": name } : {}), ...extra },
  );
}

describe("2026-07-28 on the existing endpoints", () => {
  let gw: TestGateway;
  let meta: string;
  let server: string;
  let all: string;
  before(async () => {
    gw = await startInProcessGateway();
    meta = gw.url;
    server = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    all = gw.url.replace(/\/mcp$/, "/all/mcp");
  });
  after(() => gw.close());

  it("server/discover answers per face with the face's capabilities and both eras' versions", async () => {
    for (const url of [meta, server, all]) {
      const { status, body } = await modern(url, 1, "server/discover");
      assert.equal(status, 200, JSON.stringify(body));
      assert.ok(body.result, JSON.stringify(body));
      assert.deepEqual(body.result.supportedVersions, ["2026-07-28", "2025-11-25"]);
      assert.ok(body.result.capabilities.tools, `${url}: tools capability`);
      assert.equal(body.result.resultType, "complete");
      assert.equal(typeof body.result.ttlMs, "number");
    }
    assert.equal(gw.gateway.context.sessions.size, 0, "no session is left behind");
  });

  it("stateless tools/list and tools/call on a server face reach the upstream, results normalised", async () => {
    const list = await modern(server, 2, "tools/list");
    assert.equal(list.status, 200, JSON.stringify(list.body));
    const names = (list.body.result?.tools as Array<{ name: string }>).map((t) => t.name);
    assert.ok(names.includes("echo"), names.join(","));
    assert.equal(list.body.result?.resultType, "complete");
    assert.equal(list.body.result?.cacheScope, "public");
    const call = await modern(server, 3, "tools/call", { name: "echo", arguments: { message: "modern hello" } });
    assert.equal(call.status, 200, JSON.stringify(call.body));
    assert.match(JSON.stringify(call.body.result?.content), /modern hello/);
    assert.equal(call.body.result?.resultType, "complete");
  });

  it("the meta face answers privately (it is per caller)", async () => {
    const list = await modern(meta, 4, "tools/list");
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.ok((list.body.result?.tools as unknown[]).length > 0);
    assert.equal(list.body.result?.cacheScope, "private");
  });

  it("resources and prompts on the /all face", async () => {
    const resources = await modern(all, 5, "resources/list");
    assert.equal(resources.status, 200, JSON.stringify(resources.body));
    assert.ok(Array.isArray(resources.body.result?.resources));
    const prompts = await modern(all, 6, "prompts/list");
    assert.equal(prompts.status, 200, JSON.stringify(prompts.body));
    assert.ok(Array.isArray(prompts.body.result?.prompts));
  });

  it("the error ladder: missing envelope, unsupported version, header mismatch, undeclared capability", async () => {
    // A modern header without the envelope: -32602 / 400.
    const missing = await post(
      server,
      { jsonrpc: "2.0", id: 10, method: "tools/list", params: {} },
      { "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list" },
    );
    assert.equal(missing.status, 400, JSON.stringify(missing.body));
    assert.equal(missing.body.error?.code, -32602);
    // A claim naming a revision nobody serves: -32022 / 400 with supported and requested.
    const unsupported = await post(
      server,
      { jsonrpc: "2.0", id: 11, method: "tools/list", params: { _meta: { ...ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01" } } },
      { "MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list" },
    );
    assert.equal(unsupported.status, 400, JSON.stringify(unsupported.body));
    assert.equal(unsupported.body.error?.code, -32022);
    assert.equal(unsupported.body.error?.data?.requested, "2099-01-01");
    assert.ok((unsupported.body.error?.data?.supported as string[]).includes(MODERN));
    // Mcp-Method disagreeing with the body: -32020 / 400.
    const mismatch = await modern(server, 12, "tools/list", {}, { "Mcp-Method": "prompts/list" });
    assert.equal(mismatch.status, 400, JSON.stringify(mismatch.body));
    assert.equal(mismatch.body.error?.code, -32020);
    const nameMismatch = await modern(server, 13, "tools/call", { name: "echo", arguments: { message: "x" } }, { "Mcp-Name": "add" });
    assert.equal(nameMismatch.body.error?.code, -32020, JSON.stringify(nameMismatch.body));
    // A task-augmented call without the tasks extension declared: -32021 / 400.
    const undeclared = await modern(server, 14, "tools/call", { name: "echo", arguments: { message: "x" }, task: { ttl: 60000 } });
    assert.equal(undeclared.status, 400, JSON.stringify(undeclared.body));
    assert.equal(undeclared.body.error?.code, -32021);
  });

  it("2025-only methods are -32601, GET and DELETE 405, a session id is ignored", async () => {
    for (const method of ["initialize", "ping", "logging/setLevel", "resources/subscribe"]) {
      const { body } = await modern(server, 20, method, method === "resources/subscribe" ? { uri: "demo://resource/static/document/architecture.md" } : {});
      assert.equal(body.error?.code, -32601, `${method}: ${JSON.stringify(body)}`);
    }
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(server, { method, headers: { "MCP-Protocol-Version": MODERN, Accept: "text/event-stream" } });
      await res.text();
      assert.equal(res.status, 405, method);
    }
    const withSession = await modern(server, 21, "tools/list", {}, { "Mcp-Session-Id": "not-a-session", "Last-Event-ID": "x" });
    assert.equal(withSession.status, 200, JSON.stringify(withSession.body));
  });

  it("an SDK v2 client pinned to 2026-07-28 discovers, lists and calls through a server face and the meta face", async () => {
    for (const url of [server, meta]) {
      const client = new ModernClient({ name: "modern", version: "1" }, { versionNegotiation: { mode: { pin: MODERN } } });
      await client.connect(new ModernTransport(new URL(url)));
      try {
        const { tools } = await client.listTools();
        assert.ok(tools.length > 0, url);
        if (url === server) {
          const result = await client.callTool({ name: "echo", arguments: { message: "pinned hello" } });
          assert.match(JSON.stringify(result.content), /pinned hello/);
        }
      } finally {
        await client.close();
      }
    }
    assert.equal(gw.gateway.context.sessions.size, 0, "no session is left behind");
  });

  it("the same URL still serves an SDK 1.32 client on 2025-11-25, sessionful", async () => {
    const client = new Client({ name: "legacy", version: "1" });
    const transport = new StreamableHTTPClientTransport(new URL(server));
    await client.connect(transport);
    try {
      assert.ok(transport.sessionId, "a 2025 session id");
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === "echo"));
      const result = await client.callTool({ name: "echo", arguments: { message: "legacy hello" } });
      assert.match(JSON.stringify(result.content), /legacy hello/);
      assert.equal((result as Record<string, unknown>).resultType, undefined, "no modern fields on the 2025 path");
    } finally {
      await client.close();
    }
  });
});

describe("2026-07-28 requests get the 2025 path's governance", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startInProcessGateway({
      gateway: {
        governance: {
          profile: "enforce",
          visibility: [{ server: "everything", tool: "echo", visible: false }],
          rules: [{ server: "everything", tool: "get-sum", action: "deny" }],
          virtualServers: [
            {
              name: "calc",
              tools: [
                { server: "everything", tool: "get-sum", as: "sum" },
                { server: "everything", tool: "get-env" },
              ],
            },
          ],
        },
      },
    });
  });
  after(() => gw.close());

  it("a hidden tool is absent and unknown, a denied call is refused, on a server face and a virtual face", async () => {
    const server = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    const list = await modern(server, 1, "tools/list");
    const names = (list.body.result?.tools as Array<{ name: string }>).map((t) => t.name);
    assert.ok(!names.includes("echo") && names.includes("get-sum"), names.join(","));
    const hidden = await modern(server, 2, "tools/call", { name: "echo", arguments: { message: "x" } });
    assert.match(JSON.stringify(hidden.body), /EMCP_UNKNOWN_TOOL/);
    const denied = await modern(server, 3, "tools/call", { name: "get-sum", arguments: { a: 1, b: 2 } });
    assert.equal(denied.body.error?.data?.code, "EMCP_POLICY_DENIED", JSON.stringify(denied.body));
    const virtual = gw.url.replace(/\/mcp$/, "/v/calc/mcp");
    const vlist = await modern(virtual, 4, "tools/list");
    assert.deepEqual((vlist.body.result?.tools as Array<{ name: string }>).map((t) => t.name).sort(), ["get-env", "sum"]);
  });
});

describe("2026-07-28 requests pass the same inbound auth", () => {
  const TOKEN = "era-static-token-0123456789abcdef";
  let gw: TestGateway;
  before(async () => {
    gw = await startInProcessGateway({ gateway: { token: TOKEN } });
  });
  after(() => gw.close());

  it("without the token 401 (with the challenge), with it answered", async () => {
    const server = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    const refused = await modern(server, 1, "tools/list");
    assert.equal(refused.status, 401, JSON.stringify(refused.body));
    const allowed = await modern(server, 2, "tools/list", {}, { Authorization: `Bearer ${TOKEN}` });
    assert.equal(allowed.status, 200, JSON.stringify(allowed.body));
    assert.ok((allowed.body.result?.tools as unknown[]).length > 0);
  });
});
