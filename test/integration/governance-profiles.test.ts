/**
 * Named profiles on a live session (issue 24), in process: the static-token
 * caller on /servers/everything/mcp; a reload that gives that principal a
 * profile hiding echo and a prompt sends it tools/list_changed, and then echo
 * is absent and unknown, the prompt absent, and the other tools still work.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { parseConfig } from "../../src/config/load.js";
import { eventually } from "../helpers/async-extra.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const TOKEN = "profiles-static-token-0123456789";
const servers = { everything: inProcess("everything") };

function governance(profileFor: unknown[]) {
  return {
    profile: "enforce",
    profiles: [
      {
        name: "narrow",
        visibility: [
          { server: "everything", tool: "echo", visible: false },
          { server: "everything", prompt: "args-prompt", visible: false },
        ],
      },
    ],
    profileFor,
  };
}

test("a reload that gives the caller a profile sends tools/list_changed; then its visibility applies", { timeout: 120_000 }, async () => {
  const gw = await startInProcessGateway({ mcpServers: servers, gateway: { token: TOKEN, governance: governance([]) } });
  const client = new Client({ name: "profiles", version: "1" });
  try {
    await client.connect(
      new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, "/servers/everything/mcp")), {
        requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
      }),
    );
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    const tools = async () => (await client.listTools()).tools.map((t) => t.name);
    assert.ok((await tools()).includes("echo"));
    assert.ok((await client.listPrompts()).prompts.some((p) => p.name === "args-prompt"));

    const config = parseConfig({
      mcpServers: servers,
      gateway: {
        port: 0,
        logLevel: "silent",
        token: TOKEN,
        governance: governance([{ principal: { issuer: "urn:emceepee:static-token" }, profile: "narrow" }]),
      },
    });
    const report = await gw.gateway.reload(config);
    assert.equal(report.governance?.applied, true, JSON.stringify(report));
    await eventually("tools/list_changed", () => (changed >= 1 ? true : undefined), 30_000);
    const now = await tools();
    assert.ok(!now.includes("echo") && now.includes("get-sum"), now.join(", "));
    assert.ok(!(await client.listPrompts()).prompts.some((p) => p.name === "args-prompt"));
    const refused = await client.callTool({ name: "echo", arguments: { message: "x" } }).then(
      (r) => JSON.stringify(r),
      (e: unknown) => String(e),
    );
    assert.match(refused, /EMCP_UNKNOWN_TOOL|has no tool 'echo'/);
    const sum = await client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
    assert.notEqual(sum.isError, true);
  } finally {
    await client.close();
    await gw.close();
  }
});
