/**
 * Gateway core + meta-tools face, end to end over Streamable HTTP against the
 * real @modelcontextprotocol/server-everything (stdio and Streamable HTTP).
 * Where the config's server-everything is not what a suite tests (the runtime
 * suite's and the exit-at-start suite's), it is server-everything's own code in
 * process (test/helpers/in-process.ts). The stdio downstream transport is
 * covered in cli.test.ts.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  FIXTURES,
  block,
  call,
  connectClient,
  drainEvents,
  everythingStdio,
  startGateway,
  TEST_SHARING,
  waitConnected,
  type TestGateway,
} from "../helpers/gateway.js";
import {
  MCP_POST_HEADERS,
  assertSameAsDirect,
  connectDirectEverything,
  eventsOf,
  firstText,
  freePort,
  initializeBody,
  jsonRpcMessages,
  listServers,
  pollFor,
  processAlive,
  rawInitialize,
  rawRequest,
  startEverythingHttp,
  wire,
  type ChildServer,
  type EnvelopeEvent,
} from "../helpers/core-extra.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const CRASHY = path.join(FIXTURES, "crashy-server.mjs");
const crashyStdio = (mode = "exit-at-start") => ({ command: process.execPath, args: [CRASHY, mode] });
const SLOW = { timeout: 120_000 };
/**
 * The suites with a stdio server-everything (the comparison with direct, stderr, a session's process) or a crashing one
 * run without the warm pool: its spare is a process no test here takes, and a crashing server's spare is started again
 * about 1.7 times a second (docs/adr/0049 §5, 0056; the pool's own tests: warm-pool.test.ts).
 */
const STDIO_NO_WARM = { gateway: { upstream: { warmPool: 0 } } };
/**
 * Suites about per-session upstreams only, skipped whole in the shared pass (a skipped test would still run its
 * suite's before(): a gateway and an upstream for nothing). docs/adr/0010; test/integration/sharing.test.ts.
 */
const PER_SESSION_EVENTS = { skip: TEST_SHARING === "shared" && "a shared upstream's notifications and logs reach every session" };
const PER_SESSION_PROCESS = {
  skip: TEST_SHARING === "shared" && "a shared upstream's process outlives a session (sharing.test.ts: its life follows its config)",
};

function assertIsError(result: CallToolResult, startsWith?: string): string {
  const text = firstText(result);
  assert.equal(result.isError, true, `expected an isError result, got ${JSON.stringify(result.content)}`);
  if (startsWith !== undefined) assert.ok(text.startsWith(startsWith), `expected text starting with ${startsWith}, got: ${text}`);
  return text;
}

function assertOk(result: CallToolResult): void {
  assert.notEqual(result.isError, true, `unexpected isError result: ${JSON.stringify(result.content)}`);
}

/** echo on `server`, compared exactly (events drained first so no envelope is appended). */
async function assertEchoWorks(client: Client, server: string, message: string): Promise<void> {
  await drainEvents(client);
  const result = await call(client, "execute_tool", { server, tool: "echo", args: { message } });
  assert.deepEqual(result, { content: [{ type: "text", text: `Echo: ${message}` }] });
}

async function closeAll(...closers: Array<(() => Promise<unknown>) | undefined>): Promise<void> {
  for (const close of closers) await close?.().catch(() => undefined);
}

describe("meta-tools face over Streamable HTTP (server-everything from the config)", () => {
  let gw: TestGateway | undefined;
  let client!: Client;
  let direct: Client | undefined;

  before(async () => {
    gw = await startGateway(STDIO_NO_WARM);
    client = await connectClient(gw.url);
    direct = await connectDirectEverything();
    await waitConnected(client, "everything");
  });

  after(async () => {
    await closeAll(() => client.close(), direct && (() => direct!.close()), gw && (() => gw!.close()));
  });

  test("list_servers shows server-everything connected, with the serverInfo it reports", SLOW, async () => {
    const servers = await listServers(client);
    assert.deepEqual(
      servers.map((s) => s.name),
      ["everything"],
    );
    const row = servers[0]!;
    assert.equal(row.status, "connected");
    assert.equal(row.connected, true);
    assert.equal(row.transport, "stdio");
    assert.equal(row.last_error, undefined);
    assert.deepEqual(row.server_info, wire(direct!.getServerVersion()));
  });

  test("list_tools and execute_tool (echo, get-sum, get-tiny-image, get-structured-content) equal a direct SDK client's results", SLOW, async () => {
    await assertSameAsDirect(client, "everything", direct!);
  });

  test("list_tools without a server lists the tools of every server", SLOW, async () => {
    const rows = block<Array<{ server: string; tools?: Array<{ name: string }> }>>(await call(client, "list_tools", { limit: 500 }), "servers");
    assert.ok(rows);
    assert.deepEqual(
      rows.map((r) => r.server),
      ["everything"],
    );
    const names = rows[0]?.tools?.map((t) => t.name) ?? [];
    for (const name of ["echo", "get-sum", "get-tiny-image", "get-structured-content", "toggle-simulated-logging"]) {
      assert.ok(names.includes(name), `${name} missing from ${names.join(", ")}`);
    }
  });

  test("wrong argument types to a meta-tool give an isError result that names the field", SLOW, async () => {
    const badServer = assertIsError(await call(client, "execute_tool", { server: 42, tool: "echo" }));
    assert.match(badServer, /execute_tool/);
    assert.match(badServer, /server/);
    assert.match(badServer, /expected string/i);

    const badArgs = assertIsError(await call(client, "execute_tool", { server: "everything", tool: "echo", args: "message=hi" }));
    assert.match(badArgs, /args/);

    const badTimeout = assertIsError(await call(client, "execute_tool", { server: "everything", tool: "echo", timeout_ms: "soon" }));
    assert.match(badTimeout, /timeout_ms/);

    const missing = assertIsError(await call(client, "execute_tool", { server: "everything" }));
    assert.match(missing, /tool/);

    const unknownKey = assertIsError(await call(client, "list_servers", { verbose: true }));
    assert.match(unknownKey, /verbose/);

    // The gateway keeps serving.
    await assertEchoWorks(client, "everything", "still alive after bad input");
  });

  test("an unknown meta-tool name is rejected, naming the tool", SLOW, async () => {
    let text: string;
    try {
      const result = await call(client, "no_such_meta_tool", {});
      text = assertIsError(result);
    } catch (err) {
      assert.ok(err instanceof McpError, `unexpected error ${String(err)}`);
      text = err.message;
    }
    assert.match(text, /no_such_meta_tool/);
  });

  test("execute_tool on an unknown server gives EMCP_UNKNOWN_SERVER listing the known servers", SLOW, async () => {
    const text = assertIsError(await call(client, "execute_tool", { server: "nowhere", tool: "echo", args: { message: "x" } }), "EMCP_UNKNOWN_SERVER");
    assert.match(text, /'nowhere'/);
    assert.match(text, /everything/);
    const listText = assertIsError(await call(client, "list_tools", { server: "nowhere" }), "EMCP_UNKNOWN_SERVER");
    assert.match(listText, /'nowhere'/);
  });

  test("execute_tool with an unknown tool gives EMCP_UNKNOWN_TOOL naming server and tool", SLOW, async () => {
    const text = assertIsError(await call(client, "execute_tool", { server: "everything", tool: "no-such-tool", args: {} }), "EMCP_UNKNOWN_TOOL");
    assert.match(text, /'everything'/);
    assert.match(text, /'no-such-tool'/);
    await assertEchoWorks(client, "everything", "after unknown tool");
  });
});

describe("add_server / remove_server at runtime", () => {
  let gw: TestGateway | undefined;
  let a!: Client;
  let b!: Client;
  let httpUpstream: ChildServer | undefined;

  before(async () => {
    // Runtime stdio servers are opt-in (docs/adr/0006; the defaults are tested in server-policy.test.ts).
    [gw, httpUpstream] = await Promise.all([startInProcessGateway({ gateway: { servers: { allowRuntimeStdio: true } } }), startEverythingHttp()]);
    a = await connectClient(gw.url, { name: "session-a" });
    b = await connectClient(gw.url, { name: "session-b" });
    await waitConnected(a, "everything");
    await waitConnected(b, "everything");
    await drainEvents(b);
  });

  after(async () => {
    await closeAll(
      () => a.close(),
      () => b.close(),
      gw && (() => gw!.close()),
      httpUpstream && (() => httpUpstream!.close()),
    );
  });

  async function addRemoveRoundTrip(name: string, config: Record<string, unknown>, transport: string, target: string): Promise<void> {
    const added = await call(a, "add_server", { name, ...config });
    assertOk(added);
    assert.match(firstText(added), new RegExp(`'${name}' added`));
    assert.equal(block(added, "added"), name);
    assert.equal(block(added, "status"), "connected");
    assert.ok((block<string[]>(added, "tool_names") ?? []).includes("echo"), "add_server reports the new server's tools");

    const row = (await listServers(a)).find((s) => s.name === name);
    assert.ok(row, `${name} missing from list_servers`);
    assert.equal(row.status, "connected");
    assert.equal(row.connected, true);
    assert.equal(row.transport, transport);
    assert.equal(row.target, target);
    assert.equal(row.server_info?.name, "mcp-servers/everything");

    await assertEchoWorks(a, name, `hello ${name}`);

    // The other session learns about it in its next response, and can use it too.
    const bEvents = eventsOf(await call(b, "list_servers"));
    const addedEvent = bEvents.find((e) => e.type === "server_added" && e.server === name);
    assert.ok(addedEvent, `session B got no server_added for ${name}: ${JSON.stringify(bEvents)}`);
    assert.equal(addedEvent.data.name, name);
    assert.ok((await listServers(b)).some((s) => s.name === name));
    // B connects on first use (its connect-time events go in that response), then calls it.
    assertOk(await call(b, "list_tools", { server: name }));
    await assertEchoWorks(b, name, `B uses ${name}`);

    const removed = await call(a, "remove_server", { name });
    assertOk(removed);
    assert.equal(block(removed, "removed"), name);

    assert.ok(!(await listServers(a)).some((s) => s.name === name), `${name} still in A's list_servers after remove_server`);
    const bAfter = await call(b, "list_servers");
    assert.ok(!(block<Array<{ name: string }>>(bAfter, "servers") ?? []).some((s) => s.name === name));
    assert.ok(
      eventsOf(bAfter).some((e) => e.type === "server_removed" && e.server === name),
      `session B got no server_removed for ${name}: ${JSON.stringify(eventsOf(bAfter))}`,
    );

    for (const client of [a, b]) {
      const text = assertIsError(await call(client, "execute_tool", { server: name, tool: "echo", args: { message: "gone" } }), "EMCP_UNKNOWN_SERVER");
      assert.match(text, new RegExp(`'${name}'`));
    }
  }

  test("a second server-everything over stdio: add, list, call, remove", SLOW, async () => {
    const { command, args } = everythingStdio();
    await addRemoveRoundTrip("second", { command, args }, "stdio", command);
  });

  test("server-everything over Streamable HTTP: add, list, call, remove", SLOW, async () => {
    await addRemoveRoundTrip("remote", { url: httpUpstream!.url }, "streamable-http", httpUpstream!.url);
  });

  test("add_server with an unreachable URL gives EMCP_UPSTREAM_UNAVAILABLE and keeps nothing", SLOW, async () => {
    const port = await freePort();
    const text = assertIsError(await call(a, "add_server", { name: "ghost", url: `http://127.0.0.1:${port}/mcp` }), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.match(text, /'ghost'/);
    assert.ok(!(await listServers(a)).some((s) => s.name === "ghost"), "an unreachable server must not be kept");
    assert.ok(!(await listServers(b)).some((s) => s.name === "ghost"));
    assertIsError(await call(a, "execute_tool", { server: "ghost", tool: "echo", args: { message: "x" } }), "EMCP_UNKNOWN_SERVER");
    // Nothing half-added: the name is free again.
    assertOk(await call(a, "add_server", { name: "ghost", url: httpUpstream!.url }));
    await assertEchoWorks(a, "ghost", "ghost is real now");
    assertOk(await call(a, "remove_server", { name: "ghost" }));
  });

  test("add_server of an upstream that exits at start reports its stderr, keeps nothing, and the gateway keeps serving", SLOW, async () => {
    const text = assertIsError(await call(a, "add_server", { name: "crashy", ...crashyStdio() }), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.match(text, /'crashy'/);
    assert.match(text, /missing API key/);
    assert.ok(!(await listServers(a)).some((s) => s.name === "crashy"));
    await assertEchoWorks(a, "everything", "the gateway survived a crashing upstream");
  });

  test("add_server of a config-file server's name with another config gives EMCP_FORBIDDEN and leaves it alone", SLOW, async () => {
    const { command, args } = everythingStdio();
    const text = assertIsError(await call(a, "add_server", { name: "everything", command, args, env: { OTHER: "1" } }), "EMCP_FORBIDDEN");
    assert.match(text, /'everything'/);
    await assertEchoWorks(a, "everything", "original still there");
  });

  test("add_server without command or url gives EMCP_BAD_ARGUMENTS", SLOW, async () => {
    const text = assertIsError(await call(a, "add_server", { name: "nothing" }), "EMCP_BAD_ARGUMENTS");
    assert.match(text, /command|url/);
    assert.ok(!(await listServers(a)).some((s) => s.name === "nothing"));
  });

  test("remove_server of an unknown server gives EMCP_UNKNOWN_SERVER", SLOW, async () => {
    assertIsError(await call(a, "remove_server", { name: "never-added" }), "EMCP_UNKNOWN_SERVER");
  });

  // Regression: a connection attempt that never succeeded used to be reported as a
  // `server_disconnected` event (UpstreamConnection.handleClose ran during connect()),
  // here about a server that add_server did not even keep.
  test("a failed add_server emits no events about the server it did not keep", SLOW, async () => {
    await drainEvents(a);
    const failed = await call(a, "add_server", { name: "crashy-again", ...crashyStdio() });
    assertIsError(failed, "EMCP_UPSTREAM_UNAVAILABLE");
    const events = [...eventsOf(failed), ...eventsOf(await call(a, "list_servers"))];
    const aboutIt = events.filter((e) => e.server === "crashy-again");
    assert.deepEqual(aboutIt, [], `events about a server that was never added: ${JSON.stringify(aboutIt)}`);
  });
});

describe("session isolation: notifications, logs and events stay in their session", PER_SESSION_EVENTS, () => {
  let gw: TestGateway | undefined;
  let a!: Client;
  let b!: Client;
  const seenA: EnvelopeEvent[] = [];
  const seenB: EnvelopeEvent[] = [];

  /** Calls a meta-tool and records the events its response delivered. */
  async function callA(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
    const r = await call(a, name, args);
    seenA.push(...eventsOf(r));
    return r;
  }
  async function callB(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
    const r = await call(b, name, args);
    seenB.push(...eventsOf(r));
    return r;
  }

  before(async () => {
    gw = await startGateway(STDIO_NO_WARM);
    a = await connectClient(gw.url, { name: "session-a" });
    b = await connectClient(gw.url, { name: "session-b" });
    await waitConnected(a, "everything");
    await waitConnected(b, "everything");
    // Let the connect-time notifications (tools/list_changed) arrive and be delivered.
    await callA("list_tools", { server: "everything" });
    await callB("list_tools", { server: "everything" });
  });

  after(async () => {
    await closeAll(
      () => a.close(),
      () => b.close(),
      gw && (() => gw!.close()),
    );
  });

  const isResourcesChanged = (n: { method?: string }) => n.method === "notifications/resources/list_changed";

  test("an upstream notification caused by session A reaches A only", SLOW, async () => {
    // gzip-file-as-resource registers a session resource: server-everything sends resources/list_changed.
    const made = await callA("execute_tool", {
      server: "everything",
      tool: "gzip-file-as-resource",
      args: { name: "isolation.txt.gz", data: "data:text/plain;base64,aXNvbGF0aW9u" },
    });
    assertOk(made);

    const aNotifications = await pollFor(async () => {
      const list = block<Array<{ server: string; method: string }>>(await callA("get_notifications"), "notifications") ?? [];
      return list.some(isResourcesChanged) ? list : undefined;
    }, "A's resources/list_changed notification");
    assert.ok(aNotifications.every((n) => n.server === "everything"));
    assert.ok(
      seenA.some((e) => e.type === "notification" && e.data.method === "notifications/resources/list_changed"),
      "A's responses deliver the notification as an event",
    );

    const bNotifications = block<Array<{ method: string }>>(await callB("get_notifications"), "notifications");
    assert.ok(Array.isArray(bNotifications));
    assert.ok(!bNotifications.some(isResourcesChanged), `B got A's notification: ${JSON.stringify(bNotifications)}`);
    await callB("list_servers");
    assert.ok(!seenB.some((e) => e.data.method === "notifications/resources/list_changed"), "B's responses carry A's notification event");
  });

  test("upstream log messages of session A reach A's get_logs only", SLOW, async () => {
    const simulated = (l: { logger?: string; data: unknown }) =>
      l.logger !== "stderr" && typeof l.data === "string" && /level message|level-message/.test(l.data);

    assertOk(await callA("execute_tool", { server: "everything", tool: "toggle-simulated-logging", args: {} }));
    try {
      const aLogs = await pollFor(async () => {
        const logs = block<Array<{ server: string; logger?: string; data: unknown }>>(await callA("get_logs"), "logs") ?? [];
        return logs.some(simulated) ? logs : undefined;
      }, "a simulated log message in A's get_logs");
      assert.ok(aLogs.every((l) => l.server === "everything"));
    } finally {
      // Turn it off again (server-everything logs every 5 s until told to stop).
      await callA("execute_tool", { server: "everything", tool: "toggle-simulated-logging", args: {} });
    }

    const bLogs = block<Array<{ logger?: string; data: unknown }>>(await callB("get_logs"), "logs");
    assert.ok(Array.isArray(bLogs));
    assert.deepEqual(bLogs.filter(simulated), [], "B got A's log messages");
    // B's buffer does work: it holds the stderr of B's own upstream process, once.
    const startLines = bLogs.filter((l) => l.logger === "stderr" && typeof l.data === "string" && l.data.includes("Starting default (STDIO) server"));
    assert.equal(startLines.length, 1, `B's logs: ${JSON.stringify(bLogs)}`);
  });

  test("no event delivered to A ever appears in B's responses", SLOW, async () => {
    await callA("list_servers");
    await callB("list_servers");
    assert.ok(seenA.length > 0, "A saw events (server_connected, notifications)");
    const aIds = new Set(seenA.map((e) => e.id));
    const leaked = seenB.filter((e) => aIds.has(e.id));
    assert.deepEqual(leaked, [], "events delivered in both sessions");
    // Exactly once: no event id repeats within a session either.
    assert.equal(new Set(seenA.map((e) => e.id)).size, seenA.length);
    assert.equal(new Set(seenB.map((e) => e.id)).size, seenB.length);
  });
});

describe("an upstream in the config that exits at start", () => {
  let gw: TestGateway | undefined;
  let client!: Client;

  before(async () => {
    // No warm pool: it would start the crashing server again and again while the suite runs (docs/adr/0049 §5, 0056).
    gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything"), crashy: crashyStdio() }, ...STDIO_NO_WARM });
    client = await connectClient(gw.url);
    await waitConnected(client, "everything");
  });

  after(async () => {
    await closeAll(() => client.close(), gw && (() => gw!.close()));
  });

  test("execute_tool on it gives EMCP_UPSTREAM_UNAVAILABLE with its stderr; the gateway keeps serving", SLOW, async () => {
    const text = assertIsError(await call(client, "execute_tool", { server: "crashy", tool: "anything", args: {} }), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.match(text, /'crashy'/);
    assert.match(text, /missing API key/);

    const crashy = (await listServers(client)).find((s) => s.name === "crashy");
    assert.ok(crashy);
    assert.equal(crashy.connected, false);
    assert.equal(crashy.status, "error");
    assert.match(crashy.last_error ?? "", /missing API key/);

    await assertEchoWorks(client, "everything", "everything still works");
  });

  test("list_tools over all servers keeps the failure per server", SLOW, async () => {
    const rows = block<Array<{ server: string; tools?: unknown[]; error?: string }>>(await call(client, "list_tools"), "servers");
    assert.ok(rows);
    const crashy = rows.find((r) => r.server === "crashy");
    const everything = rows.find((r) => r.server === "everything");
    assert.match(crashy?.error ?? "", /^EMCP_UPSTREAM_UNAVAILABLE/);
    assert.ok((everything?.tools?.length ?? 0) > 0);
  });
});

describe("raw HTTP on /mcp: malformed requests and session lifecycle", () => {
  let gw: TestGateway | undefined;
  let url!: string;

  before(async () => {
    gw = await startGateway({ mcpServers: {} });
    url = gw.url;
  });

  after(async () => {
    await closeAll(gw && (() => gw!.close()));
  });

  const toolsList = (id = 2) => JSON.stringify({ jsonrpc: "2.0", id, method: "tools/list", params: {} });
  const sessionHeaders = (sessionId: string) => ({ ...MCP_POST_HEADERS, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18" });

  test("an invalid JSON body gets HTTP 400 with JSON-RPC parse error -32700", SLOW, async () => {
    const before = gw!.gateway.context.sessions.size;
    const res = await rawRequest(url, { headers: { ...MCP_POST_HEADERS }, body: '{"jsonrpc": "2.0", "id": 1, "method": ' });
    assert.equal(res.status, 400);
    const [msg] = jsonRpcMessages(res);
    assert.equal(msg?.jsonrpc, "2.0");
    assert.equal(msg?.error?.code, -32700);
    assert.equal(msg?.id, null);
    assert.equal(gw!.gateway.context.sessions.size, before, "no session is created for a bad request");
  });

  test("an invalid JSON body inside a session gets HTTP 400 with -32700", SLOW, async () => {
    const sessionId = await rawInitialize(url);
    const res = await rawRequest(url, { headers: sessionHeaders(sessionId), body: "not json at all" });
    assert.equal(res.status, 400);
    assert.equal(jsonRpcMessages(res)[0]?.error?.code, -32700);
    // The session survives a bad request.
    const ok = await rawRequest(url, { headers: sessionHeaders(sessionId), body: toolsList() });
    assert.equal(ok.status, 200);
    const tools = jsonRpcMessages(ok).find((m) => m.id === 2)?.result?.tools as Array<{ name: string }> | undefined;
    assert.ok(tools?.some((t) => t.name === "execute_tool"));
    await rawRequest(url, { method: "DELETE", headers: sessionHeaders(sessionId) });
  });

  test("a POST without Mcp-Session-Id that is not initialize gets HTTP 400", SLOW, async () => {
    const res = await rawRequest(url, { headers: { ...MCP_POST_HEADERS }, body: toolsList() });
    assert.equal(res.status, 400);
    const [msg] = jsonRpcMessages(res);
    assert.equal(typeof msg?.error?.code, "number");
    assert.match(String(msg?.error?.message), /Mcp-Session-Id/i);

    const notRpc = await rawRequest(url, { headers: { ...MCP_POST_HEADERS }, body: JSON.stringify({ hello: "world" }) });
    assert.equal(notRpc.status, 400);
    assert.ok(jsonRpcMessages(notRpc)[0]?.error);

    const get = await rawRequest(url, { method: "GET", headers: { Accept: "text/event-stream" } });
    assert.equal(get.status, 400);
  });

  test("an unknown Mcp-Session-Id gets HTTP 404", SLOW, async () => {
    const res = await rawRequest(url, { headers: sessionHeaders("00000000-0000-4000-8000-000000000000"), body: toolsList() });
    assert.equal(res.status, 404);
    const [msg] = jsonRpcMessages(res);
    assert.ok(msg?.error, "404 carries a JSON-RPC error");
    assert.match(String(msg?.error?.message), /session/i);
  });

  test("a wrong Host header gets HTTP 403 and creates no session", SLOW, async () => {
    const before = gw!.gateway.context.sessions.size;
    const port = new URL(url).port;
    const res = await rawRequest(url, { headers: { ...MCP_POST_HEADERS, Host: `evil.example.com:${port}` }, body: initializeBody() });
    assert.equal(res.status, 403);
    assert.match(String(jsonRpcMessages(res)[0]?.error?.message), /evil\.example\.com/);
    assert.equal(res.headers["mcp-session-id"], undefined);
    assert.equal(gw!.gateway.context.sessions.size, before);
    // Control: the same request with a loopback Host is accepted.
    const ok = await rawRequest(url, { headers: { ...MCP_POST_HEADERS, Host: `localhost:${port}` }, body: initializeBody() });
    assert.equal(ok.status, 200);
    const sessionId = ok.headers["mcp-session-id"];
    assert.equal(typeof sessionId, "string");
    await rawRequest(url, { method: "DELETE", headers: sessionHeaders(sessionId as string) });
  });

  test("DELETE with Mcp-Session-Id ends the session: the next request with that id gets 404", SLOW, async () => {
    const sessionId = await rawInitialize(url);
    assert.ok(gw!.gateway.context.sessions.get(sessionId), "the gateway has the session");
    const alive = await rawRequest(url, { headers: sessionHeaders(sessionId), body: toolsList() });
    assert.equal(alive.status, 200);

    const del = await rawRequest(url, { method: "DELETE", headers: sessionHeaders(sessionId) });
    assert.equal(del.status, 200);

    const after = await rawRequest(url, { headers: sessionHeaders(sessionId), body: toolsList(3) });
    assert.equal(after.status, 404);
    await pollFor(async () => (gw!.gateway.context.sessions.get(sessionId) ? undefined : true), "the gateway session to be destroyed", 60_000);
  });
});

describe("DELETE through the SDK client ends the session and its upstream processes", PER_SESSION_PROCESS, () => {
  let gw: TestGateway | undefined;
  let client: Client | undefined;

  before(async () => {
    gw = await startGateway(STDIO_NO_WARM);
  });

  after(async () => {
    await closeAll(client && (() => client!.close()), gw && (() => gw!.close()));
  });

  test("terminateSession → 404 for that session id, session destroyed, upstream child gone", SLOW, async () => {
    client = await connectClient(gw!.url);
    await waitConnected(client, "everything");
    const transport = client.transport as StreamableHTTPClientTransport;
    const sessionId = transport.sessionId;
    assert.equal(typeof sessionId, "string");
    const session = gw!.gateway.context.sessions.get(sessionId!);
    assert.ok(session);
    const pid = (await session.connection("everything")).pid;
    assert.equal(typeof pid, "number");
    assert.ok(processAlive(pid!));

    await transport.terminateSession();

    const res = await rawRequest(gw!.url, {
      headers: { ...MCP_POST_HEADERS, "mcp-session-id": sessionId!, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "list_servers", arguments: {} } }),
    });
    assert.equal(res.status, 404);
    assert.equal(gw!.gateway.context.sessions.get(sessionId!), undefined);
    assert.ok(session.isClosed);
    await pollFor(async () => (processAlive(pid!) ? undefined : true), `upstream process ${pid} to exit`, 60_000);
  });
});
