/**
 * A server→client request that belongs to no call of the client's (an
 * upstream's roots/list right after `initialized`, as server-filesystem sends
 * it) over Streamable HTTP on the transparent faces (docs/adr/0047): it waits
 * for the client's standalone GET stream and is delivered there, once; a
 * client that never opens one gets the upstream a JSON-RPC error
 * (EMCP_CLIENT_UNREACHABLE) after gateway.http.standaloneStreamWaitMs, not the
 * upstream's own timeout; a session that ends while it waits leaves no timer.
 * The upstream is roots-once (test/fixtures/roots-once-tools.ts) in this
 * process, one connection per session: its request comes in the same turn as
 * `initialized`, before the face has installed the session's bridge, and waits
 * for it (docs/adr/0060); elicitation and sampling asked then reach the client
 * too, and over stdio (a real process) on /all/mcp, while another upstream is
 * still connecting, so does roots/list. Last, the canary of
 * src/mcp/standalone-listener.ts: the SDK transport still only stores what is
 * sent before the GET, and its members the seam uses are still there.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport, type EventStore } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  type CallToolResult,
  type JSONRPCMessage,
} from "@modelcontextprotocol/sdk/types.js";
import { fixtureArgs, startGateway, type TestGateway } from "../helpers/gateway.js";
import { firstText, pollFor } from "../helpers/core-extra.js";
import { logLines } from "../helpers/log-lines.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { inProcess, inProcessRootsOnce, inProcessTransportFactory, startInProcessGateway } from "../helpers/in-process.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { standaloneListenerOf, watchStandaloneStream } from "../../src/mcp/standalone-listener.js";

const gateways: TestGateway[] = [];
const clients: Client[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
});

/** roots-once in this process, one connection per session, waiting `rootsTimeoutMs` for its roots/list answer (it asks in the turn of `initialized`). */
function rootsOnce(rootsTimeoutMs: number) {
  return { ...inProcessRootsOnce(["roots"], rootsTimeoutMs), sharing: "session" };
}

/** roots-once over stdio, one process per session. */
function rootsOnceStdio(rootsTimeoutMs: number) {
  return { command: process.execPath, args: fixtureArgs("roots-once-server"), env: { ROOTS_TIMEOUT_MS: String(rootsTimeoutMs) }, sharing: "session" };
}

/** A fetch that never opens the standalone GET stream: a client that does not listen (the spec lets it). */
const fetchWithoutGet: FetchLike = (url, init) => (init?.method === "GET" ? Promise.resolve(new Response(null, { status: 405 })) : fetch(url, init));

/** A session on `url` declaring roots, answering roots/list with file:///a; `asked` counts the asks. */
async function rootsClient(url: string, fetchImpl?: FetchLike): Promise<{ client: Client; asked: () => number }> {
  let asked = 0;
  const client = new Client({ name: "standalone-request-test", version: "1.0.0" }, { capabilities: { roots: { listChanged: true } } });
  client.setRequestHandler(ListRootsRequestSchema, () => {
    asked++;
    return { roots: [{ uri: "file:///a", name: "a" }] };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), fetchImpl ? { fetch: fetchImpl } : {}));
  clients.push(client);
  return { client, asked: () => asked };
}

/** What roots-once got when it asked (its `roots` tool waits for the ask to settle). */
async function rootsSeen(client: Client, tool: string): Promise<string> {
  return firstText((await client.callTool({ name: tool, arguments: {} }, undefined, { timeout: 180_000 })) as CallToolResult);
}

describe("a server→client request with no call behind it, on the transparent faces", () => {
  test("sent right after initialized, before the client's GET stream: it waits for the stream and the client is asked once (/servers/<name>/mcp and /all/mcp)", async () => {
    // The upstream waits 30 s for its answer: without the wait the request is only stored, and it times out.
    const gw = await startInProcessGateway({ mcpServers: { r: rootsOnce(30_000) }, gateway: { upstream: { warmPool: 0 } } });
    gateways.push(gw);
    for (const face of ["/servers/r/mcp", "/all/mcp"]) {
      const { client, asked } = await rootsClient(gw.url.replace(/\/mcp$/, face));
      const tool = (await client.listTools()).tools.map((t) => t.name).find((n) => n.endsWith("roots"));
      assert.ok(tool, `${face} lists the roots tool`);
      assert.equal(await rootsSeen(client, tool), JSON.stringify(["file:///a"]), `${face}: the upstream got the client's roots`);
      assert.equal(asked(), 1, `${face}: the client was asked once`);
    }
  });

  test("a client that never opens its GET stream: the upstream gets EMCP_CLIENT_UNREACHABLE after standaloneStreamWaitMs, not its own timeout", async () => {
    const { logger, lines } = logLines("debug");
    // The upstream would wait 150 s; the gateway gives up after 1 s.
    const gw = await startInProcessGateway(
      { mcpServers: { r: rootsOnce(150_000) }, gateway: { upstream: { warmPool: 0 }, http: { standaloneStreamWaitMs: 1_000 } } },
      { logger },
    );
    gateways.push(gw);
    const { client, asked } = await rootsClient(gw.url.replace(/\/mcp$/, "/servers/r/mcp"), fetchWithoutGet);
    // The call below only once the roots/list waits for the GET stream: a request that comes while a call is in flight
    // rides that call's stream (one call on a stdio upstream), which a slow upstream start under load made happen.
    await pollFor(async () => (lines.some((l) => l.msg === "client_stream_wait") ? true : undefined), "the roots/list waiting for the GET stream", 120_000);
    const seen = await rootsSeen(client, "roots");
    assert.match(seen, /^failed: .*EMCP_CLIENT_UNREACHABLE: .*roots\/list.*standalone GET stream.*gateway\.http\.standaloneStreamWaitMs/, seen);
    assert.equal(asked(), 0);
    const missing = lines.filter((l) => l.msg === "client_stream_missing");
    assert.deepEqual(
      missing.map((l) => [l.method, l.waitedMs]),
      [["roots/list", 1_000]],
    );
  });

  test("the session ends while its request waits for the GET stream: the wait ends with it and leaves no timer", async () => {
    const { logger, lines } = logLines("debug");
    const clock = new ManualClock(Date.now());
    const gw = await startInProcessGateway({ mcpServers: { r: rootsOnce(150_000) }, gateway: { upstream: { warmPool: 0 } } }, { logger, clock });
    gateways.push(gw);
    const { client } = await rootsClient(gw.url.replace(/\/mcp$/, "/servers/r/mcp"), fetchWithoutGet);
    await pollFor(async () => (lines.some((l) => l.msg === "client_stream_wait") ? true : undefined), "the roots/list waiting for the GET stream", 120_000);
    await (client.transport as StreamableHTTPClientTransport).terminateSession();
    await pollFor(async () => (lines.some((l) => l.msg === "session_destroyed") ? true : undefined), "the session's end", 120_000);
    // Past the bound (10 s by default): a wait the session's end left behind would give up now and log it.
    clock.advance(60_000);
    assert.deepEqual(
      lines.filter((l) => l.msg === "client_stream_missing"),
      [],
    );
  });
});

describe("asked the instant the upstream gets `initialized`, before the face has installed its bridge (docs/adr/0060)", () => {
  test("in process, elicitation and sampling: the client is asked and its answers reach the upstream (not the pending queue)", async () => {
    const gw = await startInProcessGateway({
      mcpServers: { r: { ...inProcessRootsOnce(["elicit", "sample"], 60_000), sharing: "session" } },
      gateway: { upstream: { warmPool: 0 } },
    });
    gateways.push(gw);
    const client = new Client({ name: "standalone-request-test", version: "1.0.0" }, { capabilities: { elicitation: { form: {} }, sampling: {} } });
    const asked: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, (req) => {
      asked.push(`elicit: ${req.params.message}`);
      return { action: "accept", content: { name: "Ada" } };
    });
    client.setRequestHandler(CreateMessageRequestSchema, () => {
      asked.push("sample");
      return { model: "test", role: "assistant", content: { type: "text", text: "hello" } };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, "/servers/r/mcp"))));
    clients.push(client);
    assert.equal(await rootsSeen(client, "elicited"), JSON.stringify({ action: "accept", content: { name: "Ada" } }));
    assert.equal(await rootsSeen(client, "sampled"), JSON.stringify({ type: "text", text: "hello" }));
    assert.deepEqual(asked.sort(), ["elicit: asked at start", "sample"]);
  });

  test("over stdio on /all/mcp while another upstream is still connecting: the roots/list waits for the face, the client's roots arrive", async () => {
    // `late` answers nothing until roots-once (a real process) has asked; the aggregate face waits for it
    // (gateway.transparent.aggregateWaitMs), so the roots/list comes before the face has its bridge.
    // `late` is the slow fixture, which never asks for roots: server-everything asks 350 ms after its
    // `initialized`, a second ask the count below would see when the call takes that long (the CI on 3971a79).
    let asked!: () => void;
    const rootsAsked = new Promise<void>((resolve) => (asked = resolve));
    const linked = inProcessTransportFactory();
    const factory: TransportFactory = (name, config, options) => {
      const created = linked(name, config, options);
      if (name === "late") holdSends(created.transport, rootsAsked);
      if (name === "r") onIncoming(created.transport, (m) => (m as { method?: string }).method === "roots/list" && setImmediate(asked));
      return created;
    };
    const gw = await startGateway(
      {
        mcpServers: { r: rootsOnceStdio(60_000), late: inProcess("slow") },
        gateway: { upstream: { warmPool: 0 }, transparent: { aggregateWaitMs: 120_000 } },
      },
      { transportFactory: factory },
    );
    gateways.push(gw);
    const { client, asked: clientAsked } = await rootsClient(gw.url.replace(/\/mcp$/, "/all/mcp"));
    const tool = (await client.listTools()).tools.map((t) => t.name).find((n) => n.endsWith("roots"));
    assert.ok(tool, "/all/mcp lists the roots tool");
    assert.equal(await rootsSeen(client, tool), JSON.stringify(["file:///a"]));
    assert.equal(clientAsked(), 1);
  });
});

/** What `transport` sends waits for `gate` (an upstream that answers nothing, not even initialize, until then). */
function holdSends(transport: Transport, gate: Promise<void>): void {
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    await gate;
    return send(message, options);
  };
}

/** `seen` hears each message `transport` delivers, before whoever set its onmessage. */
function onIncoming(transport: Transport, seen: (message: JSONRPCMessage) => void): void {
  let handler: Transport["onmessage"];
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => handler,
    set: (fn: Transport["onmessage"]) => {
      handler = fn && ((message, extra) => (seen(message), fn(message, extra)));
    },
  });
}

describe("canary: src/mcp/standalone-listener.ts (SDK 1.32)", () => {
  test("the SDK transport only stores a request sent before the client's GET stream, and a GET without Last-Event-ID does not deliver it; the seam sees the GET", async () => {
    const stored: Array<{ streamId: string; message: JSONRPCMessage }> = [];
    const eventStore: EventStore = {
      storeEvent: (streamId, message) => Promise.resolve(String(stored.push({ streamId, message }))),
      replayEventsAfter: () => Promise.resolve(""),
    };
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => "canary", eventStore });
    assert.ok(
      watchStandaloneStream(transport),
      "the SDK transport's _webStandardTransport, _streamMapping, _standaloneSseStreamId or handleGetRequest is gone: revisit src/mcp/standalone-listener.ts",
    );
    const listener = standaloneListenerOf(transport);
    assert.ok(listener);
    let opened = 0;
    listener.onOpen(() => opened++);
    const server = new Server({ name: "canary", version: "1.0.0" }, { capabilities: {} });
    await server.connect(transport);
    const web = (transport as unknown as { _webStandardTransport: { handleRequest(req: Request): Promise<Response> } })._webStandardTransport;
    const headers = { accept: "application/json, text/event-stream", "content-type": "application/json" };
    const init = await web.handleRequest(
      new Request("http://canary/mcp", {
        method: "POST",
        headers,
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-11-25", capabilities: { roots: {} }, clientInfo: { name: "c", version: "1" } },
        }),
      }),
    );
    await init.body?.cancel();
    const session = { ...headers, "mcp-session-id": "canary", "mcp-protocol-version": "2025-11-25" };
    const initialized = await web.handleRequest(
      new Request("http://canary/mcp", { method: "POST", headers: session, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) }),
    );
    assert.equal(initialized.status, 202);
    const ask = server.listRoots().catch((err: unknown) => err);
    await pollFor(async () => (stored.some((s) => "method" in s.message && s.message.method === "roots/list") ? true : undefined), "the stored roots/list");
    assert.equal(listener.open, false);
    assert.equal(stored.find((s) => "method" in s.message && s.message.method === "roots/list")?.streamId, "_GET_stream");
    const get = await web.handleRequest(new Request("http://canary/mcp", { method: "GET", headers: { ...session, accept: "text/event-stream" } }));
    assert.equal(get.status, 200);
    assert.equal(listener.open, true);
    assert.equal(opened, 1);
    // Nothing is replayed on a GET without Last-Event-ID: the stream has no message queued once the GET is answered
    // (the SDK writes synchronously, if at all). If it ever does, the wait in the faces is no longer needed.
    const reader = get.body!.getReader();
    const first = await Promise.race([
      reader.read().then((r) => new TextDecoder().decode(r.value)),
      new Promise<string>((resolve) => setImmediate(() => resolve(""))),
    ]);
    assert.doesNotMatch(first, /roots\/list/);
    await server.close();
    await ask;
  });
});
