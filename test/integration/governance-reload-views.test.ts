/**
 * What a reload changes in a live session's view (issue 24), in process with
 * the static-token caller: a named profile's own curation (before the
 * gateway's list: its entry for a tool wins, the gateway's entries for other
 * tools still apply) on the transparent and meta faces, and the list_changed
 * that follows when a reload takes the profile away; a reload that hides
 * resources and a prompt sends resources/list_changed and prompts/list_changed
 * to the transparent faces and the meta face's buffer, and one that changes
 * only curation sends neither.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { parseConfig } from "../../src/config/load.js";
import { eventually } from "../helpers/async-extra.js";
import { block, call, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const TOKEN = "reload-views-static-token-0123456789";
const servers = { everything: inProcess("everything") };
const STATIC = [{ principal: { issuer: "urn:emceepee:static-token" }, profile: "team" }];
const HIDE_ITEMS = [
  { server: "everything", resource: "*", visible: false },
  { server: "everything", prompt: "args-prompt", visible: false },
];

function governance(profileFor: unknown[], visibility?: unknown[]) {
  return {
    profile: "enforce",
    curation: [
      { server: "everything", tool: "echo", description: "global echo" },
      { server: "everything", tool: "get-sum", name: "add" },
    ],
    profiles: [
      {
        name: "team",
        curation: [{ server: "everything", tool: "echo", name: "team-echo", arguments: { defaults: { message: "hi team" } } }],
        ...(visibility ? { visibility } : {}),
      },
    ],
    profileFor,
  };
}

const reload = async (profileFor: unknown[], visibility?: unknown[]) => {
  const config = parseConfig({ mcpServers: servers, gateway: { port: 0, logLevel: "silent", token: TOKEN, governance: governance(profileFor, visibility) } });
  const report = await gw.gateway.reload(config);
  assert.equal(report.governance?.applied, true, JSON.stringify(report));
};

let gw: TestGateway;
const clients: Client[] = [];
const counts = new Map<string, number>();
let single: Client;
let all: Client;
let meta: Client;

async function connect(face: string, name: string): Promise<Client> {
  const client = new Client({ name, version: "1" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, `${face}/mcp`)), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }),
  );
  for (const [kind, schema] of [
    ["tools", ToolListChangedNotificationSchema],
    ["resources", ResourceListChangedNotificationSchema],
    ["prompts", PromptListChangedNotificationSchema],
  ] as const)
    client.setNotificationHandler(schema, () => void counts.set(`${name}:${kind}`, (counts.get(`${name}:${kind}`) ?? 0) + 1));
  clients.push(client);
  return client;
}
const count = (key: string) => counts.get(key) ?? 0;

before(async () => {
  gw = await startInProcessGateway({ mcpServers: servers, gateway: { token: TOKEN, governance: governance(STATIC) } });
  single = await connect("/servers/everything", "single");
  all = await connect("/all", "all");
  meta = await connect("", "meta");
});

after(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await gw?.close();
});

test("a profile's curation comes before the gateway's; a reload that takes the profile away sends tools/list_changed", async () => {
  const names = async () => (await single.listTools()).tools.map((t) => t.name);
  let tools = await names();
  assert.ok(tools.includes("team-echo") && !tools.includes("echo"), `the profile's rename wins: ${tools.join(", ")}`);
  assert.ok(tools.includes("add") && !tools.includes("get-sum"), `the gateway's entry for another tool still applies: ${tools.join(", ")}`);
  const echoed = await single.callTool({ name: "team-echo", arguments: {} });
  assert.match(JSON.stringify(echoed.content), /hi team/, "the profile's default argument");
  const unknown = await single.callTool({ name: "echo", arguments: { message: "x" } }).then(
    (r) => JSON.stringify(r),
    (e: unknown) => String(e),
  );
  assert.match(unknown, /EMCP_UNKNOWN_TOOL|has no tool/);
  const listed = block<Array<{ tools: Array<{ name: string }> }>>(await call(meta, "list_tools", { server: "everything", limit: 500 }), "servers") ?? [];
  const metaTools = listed.flatMap((s) => s.tools.map((t) => t.name));
  assert.ok(metaTools.includes("team-echo") && metaTools.includes("add"), metaTools.join(", "));
  assert.ok((await all.listTools()).tools.some((t) => t.name === "everything__team-echo"));

  await reload([]);
  await eventually("tools/list_changed on /servers/everything/mcp", () => (count("single:tools") >= 1 ? true : undefined), 30_000);
  tools = await names();
  assert.ok(tools.includes("echo") && !tools.includes("team-echo") && tools.includes("add"), tools.join(", "));
  assert.equal((await single.listTools()).tools.find((t) => t.name === "echo")?.description, "global echo");
  for (const key of ["single:resources", "single:prompts", "all:resources", "all:prompts"])
    assert.equal(count(key), 0, `${key}: curation alone changes no item list`);
});

test("a reload that hides resources and a prompt sends resources/list_changed and prompts/list_changed to the sessions that see them", async () => {
  assert.ok((await single.listResources()).resources.length > 0);
  assert.ok((await single.listPrompts()).prompts.some((p) => p.name === "args-prompt"));
  await call(meta, "list_prompts", { server: "everything" }); // the meta session's connection is live for the comparison
  await call(meta, "get_notifications", {}); // and its buffer empty

  await reload(STATIC, HIDE_ITEMS);
  for (const key of ["single:resources", "single:prompts", "all:resources", "all:prompts"])
    await eventually(`${key} list_changed`, () => (count(key) >= 1 ? true : undefined), 30_000);
  assert.deepEqual((await single.listResources()).resources, []);
  assert.ok(!(await single.listPrompts()).prompts.some((p) => p.name === "args-prompt"));
  const buffered = JSON.stringify(await call(meta, "get_notifications", { server: "everything" }));
  assert.match(buffered, /notifications\/resources\/list_changed/);
  assert.match(buffered, /notifications\/prompts\/list_changed/);
});
