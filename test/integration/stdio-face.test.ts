/**
 * `emceepee stdio` as a real child process: the meta face and the
 * transparent face over stdio return what server-everything returns directly,
 * and an upstream's requests at `initialized` (roots, elicitation, sampling) reach the stdio client.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { PassThrough } from "node:stream";
import { ROOT, everythingStdio, fixtureArgs, type TestGateway } from "../helpers/gateway.js";
import { inProcess, inProcessRootsOnce, inProcessTransportFactory, startInProcessGateway } from "../helpers/in-process.js";
import { parseConfig } from "../../src/config/load.js";
import { createGateway, type Gateway } from "../../src/server/gateway.js";
import type { StdioFace } from "../../src/server/stdio.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { CLI_ARGS, GATEWAY_UPSTREAM_CAPABILITIES, pollFor } from "../helpers/core-extra.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";
import { brief, spawnStdioWire, wireOver, type WireMessage } from "../helpers/stdio-wire.js";

const clients: Client[] = [];
const gateways: Gateway[] = [];
const httpGateways: TestGateway[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled([...gateways, ...httpGateways].map((g) => g.close()));
});

async function spawnClient(args: string[], handlers?: (client: Client) => void, roots = false): Promise<Client> {
  const capabilities = { elicitation: { form: {}, url: {} }, sampling: {}, ...(roots ? { roots: { listChanged: true } } : {}) };
  const client = new Client({ name: "stdio-test", version: "1.0.0" }, { capabilities });
  handlers?.(client);
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [...CLI_ARGS, ...args],
      cwd: ROOT,
      stderr: "ignore",
    }),
  );
  clients.push(client);
  return client;
}

const initializeParams = (capabilities: Record<string, unknown>) => ({
  protocolVersion: "2025-11-25",
  capabilities,
  clientInfo: { name: "stdio-test", version: "1" },
});

const CALLS = [
  { name: "echo", arguments: { message: "over stdio" } },
  { name: "get-sum", arguments: { a: 20, b: 22 } },
  { name: "get-tiny-image", arguments: {} },
];

test("meta face over stdio: execute_tool returns exactly the direct result", async () => {
  const direct = await spawnDirect();
  const meta = await spawnClient(["stdio"]);
  const tools = (await meta.listTools()).tools.map((t) => t.name);
  assert.ok(tools.includes("execute_tool") && tools.includes("await_activity"));
  await meta.callTool({ name: "list_servers", arguments: {} }); // delivers pending events
  await waitForConnection(meta);
  for (const c of CALLS) {
    const expected = await direct.callTool(c);
    const got = (await meta.callTool({ name: "execute_tool", arguments: { server: "everything", tool: c.name, args: c.arguments } })) as CallToolResult;
    assert.deepEqual(withoutEnvelope(got), expected, `execute_tool ${c.name}`);
  }
});

test("transparent face over stdio (--face server:everything): same tools and results as direct", async () => {
  const direct = await spawnDirect();
  const face = await spawnClient(["stdio", "--face", "server:everything"]);
  assert.deepEqual(face.getServerVersion(), direct.getServerVersion());
  const [got, expected] = await Promise.all([face.listTools(), direct.listTools()]);
  assert.deepEqual(
    got.tools.map((t) => t.name),
    expected.tools.map((t) => t.name),
  );
  // Every tool can run as a task through the gateway, so it shows taskSupport "optional" (docs/adr/0002).
  const directSum = expected.tools.find((t) => t.name === "get-sum")!;
  assert.deepEqual(
    got.tools.find((t) => t.name === "get-sum"),
    { ...directSum, execution: { ...directSum.execution, taskSupport: "optional" } },
  );
  for (const c of CALLS) assert.deepEqual(await face.callTool(c), await direct.callTool(c), c.name);
});

for (const face of ["all", "server:r"]) {
  test(`transparent face over stdio (--face ${face}): the roots, elicitation and sampling request the upstream sends at initialized reach the client (ADR 0060 §1, ADR 0064)`, async () => {
    // roots-once asks all three the moment it gets the gateway's `initialized`, before the face's bridge exists: they wait
    // for it (session.expectBridge()) instead of going to the meta face's queue, which a stdio transparent client never reads.
    // Its roots ask needs the client's roots declared to it: the face and its upstream wait for the client's initialize.
    const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-stdio-face-"));
    const config = path.join(dir, "config.json");
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: {
          r: { command: process.execPath, args: fixtureArgs("roots-once-server"), env: { ROOTS_ASKS: "roots,elicit,sample", ROOTS_TIMEOUT_MS: "60000" } },
        },
        gateway: { upstream: { warmPool: 0 } },
      }),
    );
    const client = await spawnClient(
      ["stdio", "--face", face, "--config", config, "--store", "memory"],
      (c) => {
        c.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [{ uri: "file:///a", name: "a" }] }));
        c.setRequestHandler(ElicitRequestSchema, () => ({ action: "accept", content: { name: "Ada" } }));
        c.setRequestHandler(CreateMessageRequestSchema, () => ({ model: "test", role: "assistant", content: { type: "text", text: "hello" } }));
      },
      true,
    );
    const names = (await client.listTools()).tools.map((t) => t.name);
    const text = async (suffix: string) => {
      const name = names.find((n) => n.endsWith(suffix));
      assert.ok(name, `a tool ending in ${suffix}: ${names.join(", ")}`);
      const r = (await client.callTool({ name, arguments: {} }, undefined, { timeout: 120_000 })) as CallToolResult;
      return r.content[0]?.type === "text" ? r.content[0].text : "";
    };
    assert.equal(await text("roots"), JSON.stringify(["file:///a"]));
    assert.equal(await text("elicited"), JSON.stringify({ action: "accept", content: { name: "Ada" } }));
    assert.equal(await text("sampled"), JSON.stringify({ type: "text", text: "hello" }));
  });
}

test("transparent face over stdio whose upstream cannot start: initialize gets the reason, the process stays, and a later initialize starts the upstream again", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-stdio-face-"));
  const config = path.join(dir, "config.json");
  // Each start of `gone` leaves a line in `starts`, then it exits before answering.
  const starts = path.join(dir, "starts");
  const gone = { command: process.execPath, args: ["-e", `require("node:fs").appendFileSync(${JSON.stringify(starts)}, "x\\n"); process.exit(1)`] };
  writeFileSync(config, JSON.stringify({ mcpServers: { gone }, gateway: { upstream: { warmPool: 0 } } }));
  const startCount = () => (existsSync(starts) ? readFileSync(starts, "utf8").split("\n").filter(Boolean).length : 0);
  const wire = spawnStdioWire(["--face", "server:gone", "--config", config, "--store", "memory"]);
  try {
    for (const id of [1, 2]) {
      const reply = await wire.request(id, "initialize", initializeParams({ roots: {} }));
      assert.ok(reply.error, `initialize ${id} is refused: ${brief(reply)}`);
      assert.match(reply.error.message, /EMCP_UPSTREAM_UNAVAILABLE: upstream 'gone'/, `initialize ${id} names the server: ${reply.error.message}`);
      assert.equal(startCount(), id, `initialize ${id} started the upstream afresh`);
    }
    assert.equal(await wire.end(), 0, "stdin's end ends the gateway cleanly");
  } finally {
    await wire.stop();
  }
});

test("transparent face over stdio whose upstream never answers: stdin's end during initialize ends the process, without waiting for the connect", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-stdio-face-"));
  const config = path.join(dir, "config.json");
  const marker = newMarker();
  const silent = { command: process.execPath, args: ["-e", "setInterval(() => {}, 1e9)", marker] };
  writeFileSync(config, JSON.stringify({ mcpServers: { silent }, gateway: { upstream: { warmPool: 0, connectTimeoutMs: 600_000 } } }));
  const wire = spawnStdioWire(["--face", "server:silent", "--config", config, "--store", "memory"]);
  try {
    wire.send(1, "initialize", initializeParams({}));
    // The face is being built: its upstream's process has started and waits for an answer it never gets.
    await pollFor(async () => (processesWith(marker).length > 0 ? true : undefined), "the upstream's process", 120_000);
    wire.child.stdin.end();
    // Bounded far below connectTimeoutMs (600 s): the end does not wait for the face.
    const code = await Promise.race([wire.exited, new Promise<"still running">((resolve) => setTimeout(() => resolve("still running"), 120_000).unref())]);
    assert.equal(code, 0, wire.log().split("\n").slice(-5).join("\n"));
    assert.deepEqual(await waitForNoProcesses(marker), [], "the upstream's process ended with the gateway");
  } finally {
    // The upstream runs in its own process group: a failed case ends it too, not only the gateway.
    await wire.stop();
    for (const pid of processesWith(marker)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
  }
});

/** `serveStdio` on in-memory streams, the gateway and its upstreams in this process; `factory` links the upstreams. The client answers roots/list with file:///a. */
async function stdioInProcess(mcpServers: Record<string, unknown>, face: StdioFace, factory: TransportFactory = inProcessTransportFactory()) {
  const gateway = createGateway(parseConfig({ mcpServers, gateway: { logLevel: "silent", upstream: { warmPool: 0 } } }), { transportFactory: factory });
  gateways.push(gateway);
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  await gateway.serveStdio({ face, stdin, stdout });
  const answer = (request: WireMessage) => (request.method === "roots/list" ? { roots: [{ uri: "file:///a", name: "a" }] } : undefined);
  return { gateway, ...wireOver(stdin, stdout, { answer }) };
}

test("over stdio (in process), an initialize the SDK refuses tells the upstreams nothing: the refusal is the SDK server's, not an upstream's", async () => {
  const { request } = await stdioInProcess({ r: inProcessRootsOnce(["roots"], 60_000) }, { kind: "server", server: "r" });
  const reply = await request(1, "initialize", initializeParams({ roots: "yes" }));
  assert.ok(reply.error, JSON.stringify(reply));
  assert.doesNotMatch(reply.error.message, /EMCP_UPSTREAM/, reply.error.message);
  assert.match(reply.error.message, /capabilities[\s\S]*expected object/, reply.error.message);
});

test("over stdio (in process), the connection closing while its face starts: the held initialize is told so, not that the upstream failed", async () => {
  let asked!: () => void;
  const connecting = new Promise<void>((resolve) => (asked = resolve));
  const linked = inProcessTransportFactory();
  const factory: TransportFactory = (name, config, options) => {
    const created = linked(name, config, options);
    // An upstream that answers nothing, not even initialize.
    created.transport.send = async () => asked();
    return created;
  };
  const { gateway, request } = await stdioInProcess({ held: inProcess("slow") }, { kind: "server", server: "held" }, factory);
  const reply = request(1, "initialize", initializeParams({}));
  await connecting;
  await gateway.close();
  const answered = await reply;
  assert.match(answered.error?.message ?? "", /^EMCP_CLOSED: the stdio connection closed .* while its face was starting/, JSON.stringify(answered));
});

test("the meta face does not tell its upstreams the client has roots (it cannot pass their roots/list on): over stdio and over HTTP", async () => {
  const servers = { r: inProcessRootsOnce(["roots"], 60_000) };
  const viaMeta = { name: "execute_tool", arguments: { server: "r", tool: "roots", args: {} } };
  const overStdio = await stdioInProcess(servers, { kind: "meta" });
  await overStdio.request(1, "initialize", initializeParams({ roots: { listChanged: true } }));
  overStdio.notify("notifications/initialized");
  const stdioResult = await overStdio.request(2, "tools/call", viaMeta);
  assert.match(JSON.stringify(stdioResult.result), /not asked/, JSON.stringify(stdioResult));
  const gw = await startInProcessGateway({ mcpServers: servers, gateway: { upstream: { warmPool: 0 } } });
  httpGateways.push(gw);
  const client = new Client({ name: "stdio-face-test", version: "1.0.0" }, { capabilities: { roots: { listChanged: true } } });
  client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [{ uri: "file:///a", name: "a" }] }));
  await client.connect(new StreamableHTTPClientTransport(new URL(gw.url)));
  clients.push(client);
  assert.match(JSON.stringify(await client.callTool(viaMeta)), /not asked/);
});

/** Drops the session envelope blocks (events / pending actions) the meta face may append. */
function withoutEnvelope(r: CallToolResult): CallToolResult {
  const content = r.content.filter((c) => !(c.type === "text" && /^\{"(events_since_last_response|pending_client_action)":/.test(c.text)));
  return { ...r, content };
}

async function spawnDirect(): Promise<Client> {
  const { command, args } = everythingStdio();
  const client = new Client({ name: "direct", version: "1.0.0" }, { capabilities: GATEWAY_UPSTREAM_CAPABILITIES });
  await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  clients.push(client);
  return client;
}

/** Uses `everything` (upstreams connect on first use) until list_servers shows it connected. */
async function waitForConnection(meta: Client): Promise<void> {
  for (let i = 0; i < 300; i++) {
    await meta.callTool({ name: "list_tools", arguments: { server: "everything", limit: 1 } });
    const r = (await meta.callTool({ name: "list_servers", arguments: {} })) as CallToolResult;
    const text = r.content[0]?.type === "text" ? r.content[0].text : "";
    if (text.includes('"status":"connected"')) return;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error("everything never connected");
}
