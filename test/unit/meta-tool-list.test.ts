/**
 * The meta face's tools/list, built once per process (src/faces/meta/server.ts
 * metaToolList, src/mcp/tool-list.ts; ADR 0052): what a session gets over HTTP
 * is byte-for-byte what McpServer's own handler answers for the same tools
 * registered as createMetaServer registered them before (one z.strictObject
 * per tool per session, the SDK converting at each tools/list), for each set
 * of tools the settings offer (run_code with code mode on); two sessions get
 * the same bytes, and sessions are answered from the one list of the process.
 * It guards the seam, not the definitions: a changed description passes it.
 * The JSON Schemas come from the source tree (src/faces/meta/json-schemas.ts,
 * ADR 0068): the first test says when that file no longer matches the zod
 * schemas (write it again with `npm run generate:meta-schemas`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { parseConfig } from "../../src/config/load.js";
import { metaJsonSchemas } from "../../src/faces/meta/json-schemas.js";
import { convertMetaJsonSchemas, enabledMetaTools, metaToolList } from "../../src/faces/meta/server.js";
import { META_OUTPUT_SCHEMAS } from "../../src/faces/meta/outputs.js";
import { createGateway } from "../../src/server/gateway.js";
import type { GatewayContext } from "../../src/session/gateway-context.js";
import { jsonRpcMessages, MCP_POST_HEADERS, rawInitialize, rawRequest } from "../helpers/core-extra.js";

const INIT = { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "tool-list-test", version: "1.0.0" } };

/** The tools/list result as McpServer's own handler answers it, registered as createMetaServer did before ADR 0052. */
async function sdkToolsList(gateway: GatewayContext): Promise<string> {
  const server = new McpServer({ name: "emceepee", version: gateway.version }, { capabilities: { tools: {} } });
  for (const tool of enabledMetaTools(gateway)) {
    const outputSchema = META_OUTPUT_SCHEMAS[tool.name];
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: z.strictObject(tool.input),
        ...(outputSchema ? { outputSchema } : {}),
        ...(tool.annotations ? { annotations: tool.annotations } : {}),
      },
      () => ({ content: [] }),
    );
  }
  const [ours, theirs] = InMemoryTransport.createLinkedPair();
  await server.connect(theirs);
  const answers: Array<(m: JSONRPCMessage) => void> = [];
  ours.onmessage = (m) => answers.shift()?.(m);
  await ours.start();
  const request = (id: number, method: string, params: Record<string, unknown>) =>
    new Promise<JSONRPCMessage>((resolve) => {
      answers.push(resolve);
      void ours.send({ jsonrpc: "2.0", id, method, params });
    });
  await request(1, "initialize", INIT);
  await ours.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  const listed = (await request(2, "tools/list", {})) as { result: unknown };
  await server.close();
  return JSON.stringify(listed.result);
}

/** A new session's tools/list result over HTTP (test/helpers' raw requests), serialized as it came. */
async function sessionToolsList(url: string): Promise<string> {
  const session = await rawInitialize(url);
  const headers = { ...MCP_POST_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" };
  await rawRequest(url, { headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
  const res = await rawRequest(url, { headers, body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }) });
  assert.equal(res.status, 200, res.body);
  const result = jsonRpcMessages(res).find((m) => m.id === 2)?.result as unknown;
  assert.ok(result, res.body);
  return JSON.stringify(result);
}

test("src/faces/meta/json-schemas.ts holds every meta tool's schemas as the SDK converts them from zod now", () => {
  const listed = metaJsonSchemas();
  const now = convertMetaJsonSchemas();
  for (const [name, schemas] of Object.entries(now))
    assert.equal(
      JSON.stringify(listed[name]),
      JSON.stringify(schemas),
      `${name}'s schemas changed: write src/faces/meta/json-schemas.ts again (npm run generate:meta-schemas)`,
    );
  assert.deepEqual(Object.keys(listed), Object.keys(now), "json-schemas.ts lists a tool there is no longer: write it again");
});

for (const codeMode of [false, true]) {
  test(`the meta face's tools/list (code mode ${codeMode ? "on" : "off"}): the SDK's own answer, byte for byte, in every session; built once per process`, async () => {
    const gateway = createGateway(parseConfig({ mcpServers: {}, gateway: { port: 0, logLevel: "silent", codeMode: { enabled: codeMode } } }));
    try {
      const { url } = await gateway.listen();
      const expected = await sdkToolsList(gateway.context);
      const names = (JSON.parse(expected) as { tools: Array<{ name: string }> }).tools.map((t) => t.name);
      assert.equal(names.includes("run_code"), codeMode, "run_code is listed exactly when code mode is on");

      const first = await sessionToolsList(url);
      const second = await sessionToolsList(url);
      assert.equal(first, expected, "the first session's tools/list is the SDK's");
      assert.equal(second, expected, "the second session's too");

      const list = metaToolList(gateway.context);
      assert.equal(metaToolList(gateway.context), list, "one list per process for these settings, not one per call");
      assert.equal(JSON.stringify(list), expected);
      // Sessions are answered from that list (before ADR 0052 each tools/list converted the schemas anew).
      (list.tools[0]!.inputSchema as Record<string, unknown>).type = "changed";
      try {
        assert.equal(await sessionToolsList(url), JSON.stringify(list), "answered from the process's list");
      } finally {
        (list.tools[0]!.inputSchema as Record<string, unknown>).type = "object";
      }
      assert.equal(JSON.stringify(metaToolList(gateway.context)), expected);
    } finally {
      await gateway.close();
    }
  });
}
