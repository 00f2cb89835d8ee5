/**
 * Transparent-face forwarding that server-everything cannot trigger on its
 * own: the aggregate's list_changed when servers come and go, a client's
 * cancellation reaching the upstream as notifications/cancelled — and the
 * server-everything tools the other transparent tests do not call. The first
 * two and the never-initialized case run their upstreams in this process
 * (test/helpers/in-process.ts); the comparison with a direct server-everything
 * uses the real one over stdio.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { block, call, connectClient, everythingStdio, startGateway, type TestGateway } from "../helpers/gateway.js";
import { connectDirectEverything, pollFor } from "../helpers/core-extra.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { inProcess, inProcessTransportFactory, startInProcessGateway } from "../helpers/in-process.js";

const gateways: TestGateway[] = [];
const clients: Client[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
});

async function face(gw: TestGateway, path: string): Promise<Client> {
  const client = new Client({ name: "face-client", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, path))));
  clients.push(client);
  return client;
}

test("/all/mcp: adding and removing a server sends tools/list_changed, and the list follows", async () => {
  const gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything") }, gateway: { servers: { allowRuntimeStdio: true } } });
  gateways.push(gw);
  const all = await face(gw, "/all/mcp");
  let changes = 0;
  all.setNotificationHandler(ToolListChangedNotificationSchema, async () => void changes++);
  assert.ok((await all.listTools()).tools.every((t) => t.name.startsWith("everything__")));

  const admin = await connectClient(gw.url);
  clients.push(admin);
  const added = await call(admin, "add_server", { name: "slow", ...inProcess("slow") });
  assert.notEqual(added.isError, true, JSON.stringify(added.content));
  await pollFor(async () => (changes >= 1 ? true : undefined), "tools/list_changed after add_server");
  assert.ok(
    (await all.listTools()).tools.some((t) => t.name === "slow__slow"),
    "the new server's tools are listed",
  );

  const before = changes;
  await call(admin, "remove_server", { name: "slow" });
  await pollFor(async () => (changes > before ? true : undefined), "tools/list_changed after remove_server");
  assert.ok(!(await all.listTools()).tools.some((t) => t.name.startsWith("slow__")));
});

test("a client's cancellation of a tools/call reaches the upstream as notifications/cancelled", async () => {
  const sent: Array<{ method?: string; id?: unknown; params?: Record<string, unknown> }> = [];
  const linked = inProcessTransportFactory();
  const recording: TransportFactory = (name, config) => {
    const created = linked(name, config);
    const send = created.transport.send.bind(created.transport);
    created.transport.send = (message, options) => {
      sent.push(message as (typeof sent)[number]);
      return send(message, options);
    };
    return created;
  };
  const gw = await startGateway({ mcpServers: { slow: inProcess("slow") } }, { transportFactory: recording });
  gateways.push(gw);
  const client = await face(gw, "/servers/slow/mcp");
  const abort = new AbortController();
  const pending = client.callTool({ name: "slow", arguments: { ms: 60_000 } }, undefined, { signal: abort.signal });
  const upstreamCall = await pollFor(async () => sent.find((m) => m.method === "tools/call"), "the upstream tools/call");
  abort.abort("changed my mind");
  await assert.rejects(pending);
  const cancelled = await pollFor(async () => sent.find((m) => m.method === "notifications/cancelled"), "notifications/cancelled upstream");
  assert.equal(cancelled.params?.requestId, upstreamCall.id, "the cancel names the upstream request");
  // The face still serves after the cancel.
  assert.ok((await client.listTools()).tools.some((t) => t.name === "slow"));
});

test("the server-everything tools not exercised elsewhere (env, resource links and references, gzip) equal direct", async () => {
  // No warm pool: its spare would be a second process that this one session never takes (docs/adr/0056).
  const gw = await startGateway({ mcpServers: { everything: everythingStdio() }, gateway: { upstream: { warmPool: 0 } } });
  gateways.push(gw);
  const client = await face(gw, "/servers/everything/mcp");
  const direct = await connectDirectEverything();
  clients.push(direct);
  const calls = [
    { name: "get-env", arguments: {} },
    { name: "get-resource-links", arguments: { count: 5 } },
    { name: "get-resource-reference", arguments: {} },
    { name: "get-resource-reference", arguments: { resourceType: "Blob", resourceId: 2 } },
    { name: "gzip-file-as-resource", arguments: { name: "hello.gz", data: "data:text/plain;base64,aGVsbG8gd29ybGQ=", outputType: "resource" } },
  ];
  // server-everything's dynamic resources say when they were made ("created at 3:08:40 PM"), in text and inside base64
  // blobs: the two calls may fall in different seconds (a full run at load 25 saw 11:26:34 against 11:26:35 in a blob).
  const at = /created at [0-9:]+(\u202f|\s)?([AP]M)?/g;
  const stableBlob = (blob: string): string => {
    const decoded = Buffer.from(blob, "base64").toString("utf8");
    return decoded.includes("created at ") ? `base64 of: ${decoded.replace(at, "created at <time>")}` : blob;
  };
  const stable = (r: unknown): unknown =>
    JSON.parse(JSON.stringify(r), (key, value: unknown) =>
      typeof value !== "string" ? value : key === "blob" ? stableBlob(value) : value.replace(at, "created at <time>"),
    );
  for (const c of calls) assert.deepEqual(stable(await client.callTool(c)), stable(await direct.callTool(c)), `${c.name} ${JSON.stringify(c.arguments)}`);
  // Every tool the upstream lists is listed by the face (execution aside: see docs/adr/0002).
  const strip = (tools: Array<{ name: string }>) => tools.map((t) => t.name).sort();
  assert.deepEqual(strip((await client.listTools()).tools), strip((await direct.listTools()).tools));
});

test(
  "a client that never sends initialized does not hold an upstream's elicitation: after a bounded wait it is queued and can be answered",
  { timeout: 60_000 },
  async () => {
    const gw = await startInProcessGateway();
    gateways.push(gw);
    const url = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const init = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: { elicitation: { form: {} } }, clientInfo: { name: "never-initialized", version: "1" } },
      }),
    });
    const sessionId = init.headers.get("mcp-session-id")!;
    await init.text();
    const pendingCall = fetch(url, {
      method: "POST",
      headers: { ...headers, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "trigger-elicitation-request", arguments: {} } }),
    }).then((r) => r.text());
    const meta = new Client({ name: "attached", version: "1.0.0" });
    await meta.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}?session=${sessionId}`)));
    clients.push(meta);
    const queued = await pollFor(
      async () => block<Array<{ requestId: string }>>(await call(meta, "get_elicitations"), "elicitations")?.[0],
      "the elicitation in the pending queue",
      30_000,
      250,
    );
    const answered = await call(meta, "respond_to_elicitation", { request_id: queued.requestId, action: "accept", content: { name: "Queued" } });
    assert.notEqual(answered.isError, true, JSON.stringify(answered.content));
    assert.match(await pendingCall, /Queued/, "the upstream call completed with the queued answer");
  },
);
