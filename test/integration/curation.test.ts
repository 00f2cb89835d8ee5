/**
 * Curation and virtual servers (issue 24, docs/adr/0024), in process: one
 * gateway with server-everything and the slow fixture in process. A renamed
 * tool is listed and called by its new name on every face (the old name is
 * unknown), overrides show, a fixed argument is out of the schema and always
 * sent, a default is filled; a virtual server at /v/<name>/mcp offers exactly
 * its chosen tools from two upstreams under its own rules; an unknown one is
 * a 404 that names the known ones. A reload that changes what a session sees
 * sends tools/list_changed to that session only.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { parseConfig } from "../../src/config/load.js";
import { eventually } from "../helpers/async-extra.js";
import { block, call, connectClient } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { isTerminalTask, pollTask, startTask, taskResult } from "../helpers/tasks.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { startOidcProvider } from "../helpers/oidc.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const servers = { everything: inProcess("everything"), slow: inProcess("slow") };

function governance(echoName: string, kitTools: Array<Record<string, string>>) {
  return {
    profile: "enforce",
    curation: [
      {
        server: "everything",
        tool: "echo",
        name: echoName,
        title: "Say it back",
        description: "Repeats the message.",
        annotations: { readOnlyHint: true },
      },
      { server: "everything", tool: "get-sum", arguments: { fixed: { b: 10 }, defaults: { a: 1 } } },
    ],
    virtualServers: [
      {
        name: "kit",
        title: "The kit",
        tools: kitTools,
        rules: [{ id: "kit-no-sum", server: "everything", tool: "get-sum", action: "deny" }],
      },
    ],
  };
}

const KIT = [
  { server: "everything", tool: "echo", as: "shout" },
  { server: "everything", tool: "get-sum" },
  { server: "slow", tool: "pid" },
];

const text = (r: unknown) => ((r as CallToolResult).content ?? []).map((c) => ("text" in c ? c.text : "")).join(" ");

async function refused(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  const r = (await p.then(
    (v) => v,
    (e: unknown) => ({ thrown: e as Error }),
  )) as CallToolResult & { thrown?: Error };
  const said = r.thrown ? r.thrown.message : r.isError ? text(r) : "";
  assert.match(said, pattern, `expected a refusal matching ${String(pattern)}, got ${JSON.stringify(r).slice(0, 300)}`);
}

function counting(client: Client): { count: number } {
  const seen = { count: 0 };
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void seen.count++);
  return seen;
}

test("curation and virtual servers on every face; list_changed on reload to the sessions whose view changed, only those", { timeout: 240_000 }, async () => {
  const gw = await startInProcessGateway({ mcpServers: servers, gateway: { governance: governance("say", KIT) } });
  const base = gw.url.replace(/\/mcp$/, "");
  const clients: Client[] = [];
  const open = async (path: string) => {
    const c = await connectClient(`${base}${path}`);
    clients.push(c);
    return c;
  };
  try {
    const single = await open("/servers/everything/mcp");
    const all = await open("/all/mcp");
    const kit = await open("/v/kit/mcp");
    const meta = await open("/mcp");
    const slowOnly = await open("/servers/slow/mcp");

    // /servers/everything/mcp: renamed, overridden, fixed argument out of the schema, default shown.
    const tools = (await single.listTools()).tools;
    const names = tools.map((t) => t.name);
    assert.ok(names.includes("say") && !names.includes("echo"), `lists ${names.join(", ")}`);
    const say = tools.find((t) => t.name === "say")!;
    assert.equal(say.title, "Say it back");
    assert.equal(say.description, "Repeats the message.");
    assert.equal(say.annotations?.readOnlyHint, true);
    const sum = tools.find((t) => t.name === "get-sum")!;
    const props = sum.inputSchema.properties as Record<string, { default?: unknown }>;
    assert.ok(!("b" in props), "the fixed argument b is not in the schema");
    assert.equal(props.a?.default, 1, "the default of a is shown");
    assert.ok(!(sum.inputSchema.required ?? []).includes("a"), "a defaulted argument is not required");
    assert.match(text(await single.callTool({ name: "say", arguments: { message: "hi" } })), /hi/);
    await refused(single.callTool({ name: "echo", arguments: { message: "hi" } }), /EMCP_UNKNOWN_TOOL|unknown tool 'echo'/);
    // Fixed b = 10, default a = 1; a caller's a is kept; a caller's b is refused (it is the gateway's).
    assert.match(text(await single.callTool({ name: "get-sum", arguments: {} })), /\b11\b/);
    assert.match(text(await single.callTool({ name: "get-sum", arguments: { a: 5 } })), /\b15\b/);
    await refused(single.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } }), /sets 'b' of 'get-sum' itself/);

    // /all/mcp: the prefix over the curated name.
    const allNames = (await all.listTools()).tools.map((t) => t.name);
    assert.ok(allNames.includes("everything__say") && !allNames.includes("everything__echo"), `all lists ${allNames.join(", ")}`);
    assert.match(text(await all.callTool({ name: "everything__say", arguments: { message: "yo" } })), /yo/);
    await refused(all.callTool({ name: "everything__echo", arguments: { message: "yo" } }), /EMCP_UNKNOWN_TOOL|unknown tool/);

    // Meta face: list_tools and execute_tool by the curated name; the pipeline saw the upstream's names (decision records).
    const listed =
      block<Array<{ server: string; tools: Array<{ name: string }> }>>(await call(meta, "list_tools", { server: "everything", limit: 500 }), "servers") ?? [];
    const metaNames = listed.flatMap((s) => s.tools.map((t) => t.name));
    assert.ok(metaNames.includes("say") && !metaNames.includes("echo"), `meta lists ${metaNames.join(", ")}`);
    assert.match(text(await call(meta, "execute_tool", { server: "everything", tool: "say", args: { message: "m" } })), /m/);
    assert.match(text(await call(meta, "execute_tool", { server: "everything", tool: "get-sum", args: {} })), /\b11\b/);
    await refused(call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "m" } }), /EMCP_UNKNOWN_TOOL/);
    const decided = await gw.gateway.context.store.decisions.list({ limit: 100 });
    assert.ok(
      decided.some((d) => d.server === "everything" && d.tool === "echo" && d.face === "meta"),
      "the decision names the upstream's tool (echo), not the curated name",
    );

    // The virtual server: exactly its tools from two upstreams, `as` over the curated name; tools only.
    assert.deepEqual(kit.getServerCapabilities()?.resources, undefined);
    assert.deepEqual(kit.getServerCapabilities()?.prompts, undefined);
    assert.equal(kit.getServerVersion()?.title, "The kit");
    const kitNames = (await kit.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(kitNames, ["get-sum", "pid", "shout"]);
    assert.match(text(await kit.callTool({ name: "shout", arguments: { message: "loud" } })), /loud/);
    assert.match(text(await kit.callTool({ name: "pid", arguments: {} })), /\d+/);
    await refused(kit.callTool({ name: "say", arguments: { message: "x" } }), /EMCP_UNKNOWN_TOOL|has no tool 'say'/);
    await refused(kit.callTool({ name: "get-tiny-image", arguments: {} }), /EMCP_UNKNOWN_TOOL|has no tool/);
    // Tasks as on any transparent face: a task-augmented call of a curated tool runs with the curated arguments.
    const task = await startTask(single, "get-sum", { a: 2 });
    await pollTask(single, task.taskId, isTerminalTask, "the get-sum task");
    assert.match(text(await taskResult(single, task.taskId)), /\b12\b/);
    const kitTask = await startTask(kit, "shout", { message: "as a task" });
    await pollTask(kit, kitTask.taskId, isTerminalTask, "the shout task");
    assert.match(text(await taskResult(kit, kitTask.taskId)), /as a task/);
    // Its own rules: get-sum denied here, allowed on /servers/everything/mcp (above).
    await refused(kit.callTool({ name: "get-sum", arguments: {} }), /EMCP_POLICY_DENIED|kit-no-sum/);

    // An unknown virtual server: 404 naming the ones there are.
    const res = await fetch(`${base}/v/nope/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } },
      }),
    });
    assert.equal(res.status, 404);
    assert.match(await res.text(), /no virtual server named 'nope'.*kit/);

    // Reload: echo renamed again. /servers/everything, /all and the meta session (connected to everything) see it;
    // /v/kit shows echo as "shout" whatever its curated name, and /servers/slow has no echo: those two are not told.
    const seen = { single: counting(single), all: counting(all), kit: counting(kit), slowOnly: counting(slowOnly) };
    await call(meta, "list_servers"); // drain the meta session's events
    const config = (echoName: string, kitTools: Array<Record<string, string>>) =>
      parseConfig({ mcpServers: servers, gateway: { port: 0, logLevel: "silent", governance: governance(echoName, kitTools) } });
    const report = await gw.gateway.reload(config("speak", KIT));
    assert.equal(report.governance?.applied, true);
    assert.ok(!report.settingsChanged.includes("governance"), `needs no restart: ${report.settingsChanged.join(", ")}`);
    await eventually("list_changed on /servers/everything/mcp and /all/mcp", () => (seen.single.count >= 1 && seen.all.count >= 1 ? true : undefined));
    assert.ok((await single.listTools()).tools.some((t) => t.name === "speak"));
    // The meta session: an event for the server whose tools changed.
    const activity = JSON.stringify((await call(meta, "list_servers")).content);
    assert.match(activity, /notifications\/tools\/list_changed/);
    // Told: the faces /servers/everything and /all, and the sessions holding a connection to everything (single, all, meta, kit:
    // their buffers get the event an attached meta face shows); not the /servers/slow session.
    assert.equal(report.listChanged, 6);

    // Now a reload that changes only the kit: the kit is told, once — so nothing came from the first reload
    // (one SSE stream, in order) — and the others are not.
    const before = { single: seen.single.count, all: seen.all.count };
    await gw.gateway.reload(config("speak", KIT.slice(0, 2)));
    await eventually("list_changed on /v/kit/mcp", () => (seen.kit.count >= 1 ? true : undefined));
    assert.deepEqual((await kit.listTools()).tools.map((t) => t.name).sort(), ["get-sum", "shout"]);
    assert.equal(seen.kit.count, 1, "the kit's view did not change on the first reload");
    assert.deepEqual({ single: seen.single.count, all: seen.all.count }, before, "unchanged views are not told");
    // /servers/slow: its view never changed; a round trip after both reloads, then still none.
    await slowOnly.listTools();
    assert.equal(seen.slowOnly.count, 0);

    // A policy change alone (a visibility rule hides get-sum): the faces that showed it are told.
    const hidden = config("speak", KIT.slice(0, 2));
    hidden.gateway.governance.visibility = [{ server: "everything", tool: "get-sum", visible: false }];
    const counts = { single: seen.single.count, kit: seen.kit.count };
    const third = await gw.gateway.reload(hidden);
    assert.equal(third.governance?.applied, true);
    await eventually("list_changed after the visibility change", () => (seen.single.count > counts.single && seen.kit.count > counts.kit ? true : undefined));
    assert.ok(!(await single.listTools()).tools.some((t) => t.name === "get-sum"));
    assert.deepEqual(
      (await kit.listTools()).tools.map((t) => t.name),
      ["shout"],
    );
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
    await gw.close();
  }
});

test("per principal (real logins): alice's rename is hers alone; a reload that changes only alice's view tells only alice", { timeout: 240_000 }, async () => {
  const SCOPE = "mcp:tools";
  const REDIRECT = "http://127.0.0.1:65500/callback";
  const idp = await startOidcProvider({ scopes: [SCOPE] });
  const entries = (aliceName: string, bobName?: string) => [
    { server: "everything", tool: "echo", principal: { subject: "alice" }, name: aliceName },
    ...(bobName !== undefined ? [{ server: "everything", tool: "echo", principal: { subject: "bob" }, name: bobName }] : []),
  ];
  const gatewaySection = (aliceName: string, bobName?: string) => ({
    auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
    governance: { curation: entries(aliceName, bobName) },
  });
  const gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything") }, gateway: gatewaySection("alice_echo") });
  const clients: Client[] = [];
  try {
    const url = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    const alice = (await loginAndConnect(url, "alice", new MemoryOAuthClient(REDIRECT))).client;
    const bob = (await loginAndConnect(url, "bob", new MemoryOAuthClient(REDIRECT))).client;
    clients.push(alice, bob);
    const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);
    assert.ok((await names(alice)).includes("alice_echo") && !(await names(alice)).includes("echo"));
    assert.ok((await names(bob)).includes("echo") && !(await names(bob)).includes("alice_echo"));
    await refused(alice.callTool({ name: "echo", arguments: { message: "x" } }), /EMCP_UNKNOWN_TOOL|unknown tool 'echo'/);
    assert.match(text(await alice.callTool({ name: "alice_echo", arguments: { message: "mine" } })), /mine/);
    assert.match(text(await bob.callTool({ name: "echo", arguments: { message: "his" } })), /his/);

    const seen = { alice: counting(alice), bob: counting(bob) };
    const reload = (aliceName: string, bobName?: string) =>
      gw.gateway.reload(
        parseConfig({ mcpServers: { everything: inProcess("everything") }, gateway: { port: 0, logLevel: "silent", ...gatewaySection(aliceName, bobName) } }),
      );
    await reload("alice_says");
    await eventually("alice told", () => (seen.alice.count >= 1 ? true : undefined));
    assert.ok((await names(alice)).includes("alice_says"));
    // Now bob's view changes: bob is told once — so not by the first reload (one stream, in order) — and alice not again.
    await reload("alice_says", "bob_says");
    await eventually("bob told", () => (seen.bob.count >= 1 ? true : undefined));
    assert.equal(seen.bob.count, 1, "bob's view did not change on the first reload");
    assert.equal(seen.alice.count, 1, "alice's view did not change on the second reload");
    assert.ok((await names(bob)).includes("bob_says"));
  } finally {
    for (const c of clients) {
      await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await c.close().catch(() => undefined);
    }
    await gw.close();
    await idp.close();
  }
});
