/**
 * Canaries for the SDK workarounds in src/mcp/: each checks that the SDK
 * still has the (mostly private) member a workaround touches, and, with the
 * SDK's own InMemoryTransport and real Client/Server classes, that the
 * workaround still does its job. When one fails after an SDK upgrade, the
 * message names the member and the file to revisit.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";
import {
  McpError,
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  ElicitResultSchema,
  EmptyResultSchema,
  LATEST_PROTOCOL_VERSION,
  ListToolsResultSchema,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { installOrderedProgress } from "../../src/mcp/ordered-progress.js";
import { RequestAttribution } from "../../src/mcp/request-attribution.js";
import { openStandaloneStream, primeServerTransport } from "../../src/mcp/resume-session.js";
import { onResponseSent } from "../../src/mcp/response-sent.js";
import { SseRequestTap } from "../../src/mcp/sse-request-tap.js";
import { releaseTaskProgressHandler } from "../../src/mcp/task-progress.js";
import { wrapToolErrors } from "../../src/mcp/tool-errors.js";
import { answerToolsList, toolList, type ToolRegistration } from "../../src/mcp/tool-list.js";
import { tapTransport } from "../../src/mcp/transport-tap.js";
import { sdkLeavesCallUnchecked } from "../../src/mcp/tool-call-checks.js";
import { errorResponseFor } from "../../src/mcp/error-response.js";
import { upstreamCallError } from "../../src/errors.js";
import { messageTooLarge } from "../../src/upstream/message-bound.js";

function hasMethod(proto: object, member: string): boolean {
  return typeof (proto as Record<string, unknown>)[member] === "function";
}

/** Lets queued microtasks and one macrotask run (the SDK dispatches notifications in microtasks). */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

type Send = (message: JSONRPCMessage) => void;

/**
 * A hand-written MCP server on the far end of an InMemoryTransport, so a test
 * controls exactly which messages arrive and in which tick. It answers
 * initialize itself; other requests go to `onRequest`.
 */
async function rawPeer(
  onRequest: (req: { id: RequestId; method: string; params?: any }, send: Send) => void,
): Promise<{ client: Client; transport: InMemoryTransport; send: Send }> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const send: Send = (message) => void serverSide.send(message);
  serverSide.onmessage = (message: any) => {
    if (message.id === undefined || message.method === undefined) return; // notifications, responses
    if (message.method === "initialize") {
      send({
        jsonrpc: "2.0",
        id: message.id,
        result: {
          protocolVersion: LATEST_PROTOCOL_VERSION,
          capabilities: { tools: {}, tasks: { requests: { tools: { call: {} } } } },
          serverInfo: { name: "raw-peer", version: "1.0.0" },
        },
      });
      return;
    }
    onRequest(message, send);
  };
  await serverSide.start();
  const client = new Client({ name: "canary", version: "1.0.0" });
  await client.connect(clientSide);
  return { client, transport: clientSide, send };
}

const progress = (token: unknown, n: number): JSONRPCMessage => ({
  jsonrpc: "2.0",
  method: "notifications/progress",
  params: { progressToken: token as string, progress: n, total: 2 },
});

/** A peer whose tools/call sends two progress notifications and its response in the same tick. */
function progressThenResult(): Parameters<typeof rawPeer>[0] {
  return (req, send) => {
    const token = req.params?._meta?.progressToken;
    send(progress(token, 1));
    send(progress(token, 2));
    send({ jsonrpc: "2.0", id: req.id, result: { content: [{ type: "text", text: "done" }] } });
  };
}

/** An McpServer with one `echo` tool, its tool errors decorated by `decorate` (src/mcp/tool-errors.ts), and a client linked to it. */
async function decoratedEcho(decorate: Parameters<typeof wrapToolErrors>[1]) {
  const server = new McpServer({ name: "canary", version: "1.0.0" });
  server.registerTool("echo", { inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: "text", text }] }));
  wrapToolErrors(server, decorate);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "canary", version: "1.0.0" });
  await client.connect(clientSide);
  return { server, client };
}

describe("SDK members the workarounds in src/mcp/ touch", () => {
  test("Protocol._onprogress (src/mcp/ordered-progress.ts, typescript-sdk#2580)", () => {
    assert.ok(
      hasMethod(Client.prototype, "_onprogress"),
      "@modelcontextprotocol/sdk: Protocol._onprogress is gone; src/mcp/ordered-progress.ts cannot dispatch progress in order — check whether typescript-sdk#2580 is fixed and remove or adapt the workaround",
    );
  });

  test("Protocol._cleanupTaskProgressHandler (src/mcp/task-progress.ts)", () => {
    assert.ok(
      hasMethod(Client.prototype, "_cleanupTaskProgressHandler"),
      "@modelcontextprotocol/sdk: Protocol._cleanupTaskProgressHandler is gone; src/mcp/task-progress.ts can no longer stop progress of ended upstream tasks",
    );
  });

  test("McpServer.createToolError (src/mcp/tool-errors.ts)", () => {
    assert.ok(
      hasMethod(McpServer.prototype, "createToolError"),
      "@modelcontextprotocol/sdk: McpServer.createToolError is gone; src/mcp/tool-errors.ts cannot add the session envelope to tool errors the SDK answers itself",
    );
  });

  test("StreamableHTTPClientTransport._startOrAuthSse (src/mcp/resume-session.ts: the standalone stream of a continued session)", () => {
    assert.ok(
      hasMethod(StreamableHTTPClientTransport.prototype, "_startOrAuthSse"),
      "StreamableHTTPClientTransport._startOrAuthSse is gone: revisit openStandaloneStream in src/mcp/resume-session.ts",
    );
  });

  test("Client.getToolOutputValidator and isToolTaskRequired (src/mcp/tool-call-checks.ts: which calls may go raw)", async () => {
    const server = new McpServer({ name: "canary", version: "1" });
    server.registerTool("plain", { description: "no output schema" }, async () => ({ content: [] }));
    server.registerTool("typed", { description: "an output schema", outputSchema: { n: z.number() } }, async () => ({
      content: [],
      structuredContent: { n: 1 },
    }));
    const [a, b] = InMemoryTransport.createLinkedPair();
    const client = new Client({ name: "canary", version: "1" });
    await Promise.all([server.connect(b), client.connect(a)]);
    await client.listTools();
    assert.equal(
      sdkLeavesCallUnchecked(client, "plain"),
      true,
      "@modelcontextprotocol/sdk: Client.getToolOutputValidator or isToolTaskRequired changed; src/mcp/tool-call-checks.ts no longer sees which calls the SDK checks (raw forwarding is off)",
    );
    assert.equal(sdkLeavesCallUnchecked(client, "typed"), false, "a tool with an output schema must keep the SDK's check");
    await client.close();
  });

  test("StreamableHTTPServerTransport.send (src/mcp/response-sent.ts)", () => {
    assert.ok(
      hasMethod(StreamableHTTPServerTransport.prototype, "send"),
      "@modelcontextprotocol/sdk: StreamableHTTPServerTransport.send is gone; src/mcp/response-sent.ts cannot see responses leave (request ids would stay in flight)",
    );
  });
});

describe("the workarounds still work against the real SDK (InMemoryTransport)", () => {
  test("ordered progress: a last progress notification sent in the same tick as the response arrives", async () => {
    const { client, transport } = await rawPeer(progressThenResult());
    assert.equal(
      installOrderedProgress(client, transport),
      true,
      "installOrderedProgress found nothing to hook (Protocol._onprogress or transport.onmessage missing)",
    );
    const seen: number[] = [];
    const result = await client.callTool({ name: "slow" }, CallToolResultSchema, { onprogress: (p) => seen.push(p.progress) });
    assert.deepEqual((result as CallToolResult).content, [{ type: "text", text: "done" }]);
    assert.deepEqual(seen, [1, 2], "progress notifications were dropped or reordered despite src/mcp/ordered-progress.ts");
    await client.close();
  });

  test("typescript-sdk#2580 is still open: without the workaround those notifications are lost", async () => {
    const { client } = await rawPeer(progressThenResult());
    const errors: string[] = [];
    client.onerror = (err) => errors.push(err.message);
    const seen: number[] = [];
    await client.callTool({ name: "slow" }, CallToolResultSchema, { onprogress: (p) => seen.push(p.progress) });
    await turn();
    assert.ok(
      seen.length < 2,
      "the SDK now delivers progress sent in the same tick as the response by itself (typescript-sdk#2580 fixed?): src/mcp/ordered-progress.ts can go",
    );
    assert.ok(errors.some((m) => m.includes("unknown token")));
    await client.close();
  });

  test("task progress release: progress for an ended task no longer reaches the request's callback", async () => {
    let token: unknown;
    const { client, send } = await rawPeer((req, reply) => {
      token = req.params?._meta?.progressToken;
      const now = new Date().toISOString();
      reply({ jsonrpc: "2.0", id: req.id, result: { task: { taskId: "t1", status: "working", ttl: 60_000, createdAt: now, lastUpdatedAt: now } } });
    });
    const errors: string[] = [];
    client.onerror = (err) => errors.push(err.message);
    const seen: number[] = [];
    const created = await client.request({ method: "tools/call", params: { name: "long" } }, CreateTaskResultSchema, {
      task: { ttl: 60_000 },
      onprogress: (p) => seen.push(p.progress),
    });
    assert.equal(created.task.taskId, "t1");
    send(progress(token, 1));
    await turn();
    assert.deepEqual(seen, [1], "the SDK no longer keeps a task-augmented request's progress handler after CreateTaskResult");
    releaseTaskProgressHandler(client, "t1");
    send(progress(token, 2));
    await turn();
    assert.deepEqual(seen, [1], "progress still arrives after releaseTaskProgressHandler (src/mcp/task-progress.ts no longer works)");
    assert.ok(errors.some((m) => m.includes("unknown token")));
    await client.close();
  });

  test("wrapToolErrors: a tool error the SDK answers itself (bad arguments) passes through the decorator", async () => {
    const { server, client } = await decoratedEcho((result) => ({ ...result, content: [...result.content, { type: "text", text: "decorated" }] }));
    const bad = (await client.callTool({ name: "echo", arguments: { text: 42 } })) as CallToolResult;
    assert.equal(bad.isError, true);
    assert.deepEqual(
      bad.content.at(-1),
      { type: "text", text: "decorated" },
      "McpServer answered a bad call without createToolError: src/mcp/tool-errors.ts missed it",
    );
    const good = (await client.callTool({ name: "echo", arguments: { text: "hi" } })) as CallToolResult;
    assert.deepEqual(good.content, [{ type: "text", text: "hi" }], "a successful call must not be decorated");
    await client.close();
    await server.close();
  });

  test("wrapToolErrors: an async decorator's result is what the client gets (McpServer awaits createToolError's value)", async () => {
    const { server, client } = await decoratedEcho(async (result) => {
      await new Promise((r) => setImmediate(r));
      return { ...result, content: [...result.content, { type: "text", text: "decorated later" }] };
    });
    const bad = (await client.callTool({ name: "echo", arguments: { text: 42 } })) as CallToolResult;
    assert.equal(bad.isError, true);
    assert.deepEqual(
      bad.content.at(-1),
      { type: "text", text: "decorated later" },
      "McpServer no longer awaits createToolError's value: the meta face's envelope (an async read of the event store) would be lost from SDK-made tool errors (src/mcp/tool-errors.ts)",
    );
    await client.close();
    await server.close();
  });

  test("toolList / answerToolsList (src/mcp/tool-list.ts): McpServer's own tools/list, byte for byte; the replaced handler answers, also after a later registerTool", async () => {
    const tools: ToolRegistration[] = [
      { name: "plain", inputSchema: z.strictObject({}) },
      {
        name: "rich",
        title: "Rich",
        description: "every kind of field",
        inputSchema: z.strictObject({
          text: z.string().min(1).describe("some text"),
          n: z.number().int().max(10).optional(),
          mode: z.enum(["a", "b"]).default("a"),
          tags: z.array(z.string()).optional(),
          env: z.record(z.string(), z.string()).optional(),
          either: z.union([z.string(), z.object({ x: z.boolean() })]).optional(),
        }),
        outputSchema: z.looseObject({ ok: z.boolean(), items: z.array(z.looseObject({ id: z.string() })) }),
        annotations: { readOnlyHint: true },
      },
    ];
    const listed = async (server: McpServer): Promise<string> => {
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await server.connect(serverSide);
      const client = new Client({ name: "canary", version: "1.0.0" });
      await client.connect(clientSide);
      const result = await client.request({ method: "tools/list", params: {} }, z.unknown()); // as it came, not re-parsed
      await client.close();
      return JSON.stringify(result);
    };
    const register = (server: McpServer) => {
      for (const { name, ...config } of tools) server.registerTool(name, config, () => ({ content: [] }));
    };
    const sdk = new McpServer({ name: "canary", version: "1.0.0" });
    register(sdk);
    const expected = await listed(sdk);
    assert.equal(
      JSON.stringify(toolList(tools)),
      expected,
      "McpServer's tools/list changed its mapping (keys, order, execution, JSON Schema options): update toolList in src/mcp/tool-list.ts",
    );
    const answered = new McpServer({ name: "canary", version: "1.0.0" });
    register(answered);
    answerToolsList(answered, { tools: [{ name: "cached", inputSchema: { type: "object" } }] });
    answered.registerTool("later", { inputSchema: {} }, () => ({ content: [] }));
    assert.equal(
      await listed(answered),
      JSON.stringify({ tools: [{ name: "cached", inputSchema: { type: "object" } }] }),
      "McpServer no longer answers tools/list through the handler Server.setRequestHandler replaced (src/mcp/tool-list.ts)",
    );
  });

  test("onResponseSent: every response a Server sends (results and errors) is seen, with its id", async () => {
    const server = new Server({ name: "canary", version: "1.0.0" }, { capabilities: {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const ids: RequestId[] = [];
    onResponseSent(serverSide, (id) => ids.push(id));
    await server.connect(serverSide);
    const client = new Client({ name: "canary", version: "1.0.0" });
    await client.connect(clientSide);
    await client.request({ method: "ping" }, EmptyResultSchema);
    await assert.rejects(client.request({ method: "tools/list" }, ListToolsResultSchema), /Method not found/);
    assert.equal(ids.length, 3, `expected the initialize, ping and tools/list responses, saw ids ${JSON.stringify(ids)}`);
    assert.equal(new Set(ids).size, 3);
    await client.close();
    await server.close();
  });
});

describe("transport taps (src/mcp/transport-tap.ts: observability)", () => {
  test("tapped before connect (an upstream client's transport): Protocol.connect sets onmessage and onclose before start(), and sends through transport.send", async () => {
    const server = new Server({ name: "canary", version: "1.0.0" }, { capabilities: {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const seen: string[] = [];
    let closed = 0;
    tapTransport(clientSide, {
      received: (message, deliver) => {
        seen.push(`in:${"method" in message ? message.method : "response"}`);
        deliver();
      },
      sending: (message) => {
        seen.push(`out:${"method" in message ? message.method : "response"}`);
        return message;
      },
      closed: () => closed++,
    });
    const client = new Client({ name: "canary", version: "1.0.0" });
    await client.connect(clientSide);
    await client.request({ method: "ping" }, EmptyResultSchema);
    assert.deepEqual(seen, ["out:initialize", "in:response", "out:notifications/initialized", "out:ping", "in:response"]);
    await client.close();
    // (InMemoryTransport reports its close twice: once itself, once through its peer; taps are idempotent.)
    assert.ok(closed >= 1, "onclose was wrapped: the tap heard the close");
    await server.close();
  });

  test("tapped after connect (a face's server transport): every request arrives through onmessage and every response leaves through send", async () => {
    const server = new Server({ name: "canary", version: "1.0.0" }, { capabilities: {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const seen: string[] = [];
    tapTransport(serverSide, {
      received: (message, deliver) => {
        seen.push(`in:${"method" in message ? message.method : "response"}`);
        deliver();
      },
      sending: (message) => {
        seen.push(`out:${"result" in message ? "result" : "error" in message ? "error" : "other"}`);
        return message;
      },
      closed: () => undefined,
    });
    const client = new Client({ name: "canary", version: "1.0.0" });
    await client.connect(clientSide);
    await assert.rejects(client.request({ method: "tools/list" }, ListToolsResultSchema), /Method not found/);
    assert.deepEqual(seen, ["in:initialize", "out:result", "in:notifications/initialized", "in:tools/list", "out:error"]);
    await client.close();
    await server.close();
  });
});

describe("attribution (src/mcp/request-attribution.ts, src/mcp/sse-request-tap.ts)", () => {
  /**
   * A raw peer as above, but the client's transport gets the attribution
   * before it connects (as UpstreamConnection does). `onRequest` may send the
   * client requests of its own while a call is in flight.
   */
  async function attributedPeer(onRequest: (req: { id: RequestId; method: string; params?: any }, send: Send) => void) {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const send: Send = (message) => void serverSide.send(message);
    const received: Array<{ method: string; params?: unknown }> = [];
    serverSide.onmessage = (message: any) => {
      if (message.method === undefined || message.id === undefined) return;
      if (message.method === "initialize") {
        send({
          jsonrpc: "2.0",
          id: message.id,
          result: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: { tools: {} }, serverInfo: { name: "raw-peer", version: "1.0.0" } },
        });
        return;
      }
      received.push({ method: message.method, params: message.params });
      onRequest(message, send);
    };
    await serverSide.start();
    const attribution = new RequestAttribution<string>();
    attribution.install(clientSide);
    const client = new Client({ name: "canary", version: "1.0.0" }, { capabilities: { elicitation: {} } });
    const attributed: Array<string | undefined> = [];
    client.setRequestHandler(ElicitRequestSchema, (_req, extra) => {
      attributed.push(attribution.attribute(extra.requestId));
      return { action: "decline" };
    });
    await client.connect(clientSide);
    return { client, attribution, received, attributed };
  }

  /** Each tools/call asks the client one elicitation (ids from 1000), then answers once it is answered. */
  function elicitThenAnswer(): Parameters<typeof attributedPeer>[0] {
    let next = 1000;
    const waiting = new Map<RequestId, RequestId>();
    return (req, send) => {
      if (req.method === "tools/call") {
        const id = next++;
        waiting.set(id, req.id);
        send({ jsonrpc: "2.0", id, method: "elicitation/create", params: { message: "?", requestedSchema: { type: "object", properties: {} } } });
      }
      if (req.method === "tools/list") send({ jsonrpc: "2.0", id: req.id, result: { tools: [] } });
    };
  }

  test("the per-call token (onresumptiontoken) reaches transport.send with the message, through callTool, listTools and request; nothing extra goes on the wire", async () => {
    const { client, attribution, received } = await attributedPeer((req, send) => send({ jsonrpc: "2.0", id: req.id, result: { tools: [], content: [] } }));
    for (const run of [
      (o: object) => client.callTool({ name: "x" }, CallToolResultSchema, o),
      (o: object) => client.listTools(undefined, o),
      (o: object) => client.request({ method: "tools/list" }, ListToolsResultSchema, o),
    ]) {
      const call = attribution.begin("origin");
      const pending = run(call.options);
      await turn();
      assert.equal(
        attribution.inFlight,
        1,
        "transport.send no longer receives RequestOptions.onresumptiontoken with the request: src/mcp/request-attribution.ts cannot learn the SDK's request ids",
      );
      await pending;
      call.end();
      assert.equal(attribution.inFlight, 0);
    }
    assert.deepEqual(received, [
      { method: "tools/call", params: { name: "x" } },
      { method: "tools/list", params: undefined },
      { method: "tools/list", params: undefined },
    ]);
    await client.close();
  });

  test("single-call rule: a server→client request during the only call in flight is that call's; with two in flight, unknown", async () => {
    const { client, attribution, attributed } = await attributedPeer(elicitThenAnswer());
    const first = attribution.begin("first");
    void client.callTool({ name: "a" }, CallToolResultSchema, { ...first.options, timeout: 60_000 }).catch(() => undefined);
    await eventuallyTrue(() => attributed.length === 1);
    assert.deepEqual(attributed, ["first"]);
    const second = attribution.begin("second");
    void client.callTool({ name: "b" }, CallToolResultSchema, { ...second.options, timeout: 60_000 }).catch(() => undefined);
    await eventuallyTrue(() => attributed.length === 2);
    assert.deepEqual(attributed, ["first", undefined], "two calls in flight on one stream: nobody can tell which one asked");
    first.end();
    second.end();
    await client.close();
  });

  test("stream rule (Streamable HTTP): a request on a POST's stream is that call's, one on the standalone GET stream is unknown", async () => {
    const server = new McpServer({ name: "canary-http", version: "1.0.0" }, { capabilities: { tools: {} } });
    const schema = { type: "object" as const, properties: {} };
    server.registerTool("related", {}, async (extra) => {
      await extra.sendRequest({ method: "elicitation/create", params: { message: "related", requestedSchema: schema } }, ElicitResultSchema);
      return { content: [] };
    });
    server.registerTool("unrelated", {}, async () => {
      // Without relatedRequestId the SDK server sends it on the standalone GET stream.
      await server.server.elicitInput({ message: "unrelated", requestedSchema: schema });
      return { content: [] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => "canary-session" });
    await server.connect(transport);
    const http = createServer((req, res) => void transport.handleRequest(req, res));
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const { port } = http.address() as AddressInfo;
    let standaloneOpen = false;
    const tap = new SseRequestTap(async (url, init) => {
      const res = await fetch(url, init);
      if (init?.method === "GET" && res.ok) standaloneOpen = true;
      return res;
    });
    const clientTransport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { fetch: tap.fetch });
    const attribution = new RequestAttribution<string>(tap);
    attribution.install(clientTransport);
    const client = new Client({ name: "canary", version: "1.0.0" }, { capabilities: { elicitation: {} } });
    const seen: Array<[string, string | undefined]> = [];
    client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
      seen.push([req.params.message, attribution.attribute(extra.requestId)]);
      return { action: "decline" };
    });
    try {
      await client.connect(clientTransport);
      await eventuallyTrue(() => standaloneOpen);
      for (const name of ["related", "unrelated"]) {
        const call = attribution.begin(`call ${name}`);
        await client.callTool({ name }, CallToolResultSchema, { ...call.options, timeout: 10_000 });
        call.end();
      }
      assert.deepEqual(
        seen,
        [
          ["related", "call related"],
          ["unrelated", undefined],
        ],
        "StreamableHTTPClientTransport no longer calls the given fetch for POSTs with the message as body, or no longer reads its SSE responses through it: src/mcp/sse-request-tap.ts cannot place server→client requests",
      );
    } finally {
      await client.close();
      await server.close();
      await new Promise((resolve) => http.close(resolve));
    }
  });
});

describe("delivered error responses (src/mcp/error-response.ts: gateway.upstream.maxMessageBytes)", () => {
  test("a delivered error response fails its request with an McpError whose data is the very object given, which maps back to the gateway error", async () => {
    const error = messageTooLarge("canary", 1024);
    const { client, transport } = await rawPeer((req) => transport.onmessage?.(errorResponseFor(req.id, error)));
    try {
      await assert.rejects(client.callTool({ name: "anything", arguments: {} }), (err: unknown) => {
        assert.ok(err instanceof McpError, "Protocol._onresponse no longer rejects with an McpError");
        assert.equal(upstreamCallError("canary", "anything", err), error, "Protocol._onresponse copies error.data: errors.ts cannot tell a delivered error");
        return true;
      });
    } finally {
      await client.close();
    }
  });
});

describe("session resumption (src/mcp/resume-session.ts)", () => {
  test("a primed transport serves a client that continues its session without initialize; unsolicited messages reach it once its standalone stream is open", async () => {
    const stored = { protocolVersion: "2025-06-18", capabilities: { roots: { listChanged: true } }, clientInfo: { name: "resumed-client", version: "7.0.0" } };
    const server = new McpServer({ name: "canary", version: "1.0.0" }, { capabilities: { logging: {} } });
    let initialized = 0;
    server.server.oninitialized = () => initialized++;
    server.registerTool("ping-me", {}, async () => {
      // Unrelated to the request: the SDK server sends it on the standalone GET stream only.
      await server.server.notification({ method: "notifications/message", params: { level: "info", data: "standalone" } });
      return { content: [{ type: "text", text: "pong" }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => "stored-session" });
    await server.connect(transport);
    const http = createServer((req, res) => void transport.handleRequest(req, res));
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const url = new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`);
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(body),
      });
    const client = new Client({ name: "canary", version: "1.0.0" });
    try {
      // Without priming, the transport refuses the session's requests.
      const refused = await post(
        { jsonrpc: "2.0", id: 1, method: "tools/list" },
        { "mcp-session-id": "stored-session", "mcp-protocol-version": stored.protocolVersion },
      );
      assert.equal(refused.status, 400, "an SDK transport that was never initialized no longer refuses requests: is priming still needed?");
      await refused.body?.cancel();

      await primeServerTransport(transport, stored);
      assert.equal(transport.sessionId, "stored-session", "the primed transport must use the id its sessionIdGenerator returns");
      assert.deepEqual(server.server.getClientCapabilities(), stored.capabilities, "the replayed initialize must give the server the stored capabilities");
      assert.deepEqual(server.server.getClientVersion(), stored.clientInfo);
      assert.equal(initialized, 1, "the replayed notifications/initialized must reach the server's oninitialized");
      const again = await post({ jsonrpc: "2.0", id: 2, method: "initialize", params: stored });
      assert.equal(again.status, 400, "a primed transport must count as initialized (a second initialize is refused)");
      await again.body?.cancel();

      // The client side: a transport created with the stored id skips initialize.
      const clientTransport = new StreamableHTTPClientTransport(url, { sessionId: "stored-session" });
      const messages: string[] = [];
      client.fallbackNotificationHandler = async (n) => void messages.push(String((n.params as { data?: unknown } | undefined)?.data));
      await client.connect(clientTransport);
      clientTransport.setProtocolVersion(stored.protocolVersion);
      assert.equal(
        client.getServerCapabilities(),
        undefined,
        "Client.connect initialized a transport that has a sessionId: continuing a session needs no workaround for capabilities any more",
      );
      const opened: unknown[] = [];
      assert.equal(
        openStandaloneStream(clientTransport, (err) => opened.push(err)),
        true,
      );
      // Until the GET stream is up, an unsolicited message is dropped: call until one arrives.
      const end = Date.now() + 30_000;
      while (!messages.includes("standalone")) {
        if (Date.now() > end) assert.fail(`no message on the standalone stream (errors: ${JSON.stringify(opened.map(String))})`);
        const result = await client.callTool({ name: "ping-me" }, CallToolResultSchema, { timeout: 30_000 });
        assert.deepEqual(result.content, [{ type: "text", text: "pong" }]);
        await turn();
      }
      assert.deepEqual(opened, []);
    } finally {
      await client.close();
      await server.close();
      await new Promise((resolve) => http.close(resolve));
    }
  });
});

async function eventuallyTrue(probe: () => boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await turn();
  }
}
