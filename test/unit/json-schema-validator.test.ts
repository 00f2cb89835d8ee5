/**
 * The shared JSON Schema validator is bounded (issue 29): Ajv caches a
 * compiled validator per schema object for good, and every elicitation
 * brings a new object, so a long-running gateway kept one more compiled
 * validator per answered elicitation. Validators compile at their first
 * validation, not when handed out (docs/adr/0063).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { JsonSchemaType } from "@modelcontextprotocol/sdk/validation/types.js";
import { z } from "zod";
import { BoundedSchemaValidator, MAX_COMPILED_SCHEMAS, jsonSchemaValidator } from "../../src/mcp/json-schema-validator.js";
import { newUpstreamClient } from "../../src/upstream/client-handlers.js";
import { unusedHandlers } from "../helpers/upstream-handlers.js";

const form = (): JsonSchemaType => ({ type: "object", properties: { name: { type: "string" } }, required: ["name"] });

test("the same schema text compiles once, whichever object it comes in", () => {
  const first = jsonSchemaValidator.getValidator(form());
  const again = jsonSchemaValidator.getValidator(form());
  assert.equal(again, first, "a new object with the same schema reuses the compiled validator");
  assert.equal(first({ name: "Ada" }).valid, true);
  assert.equal(first({}).valid, false);
});

test("at most `max` schemas are kept compiled; validators handed out before a reset keep working", () => {
  const v = new BoundedSchemaValidator(3);
  const schema = (n: number): JsonSchemaType => ({ type: "object", properties: { [`f${n}`]: { type: "integer" } }, required: [`f${n}`] });
  const early = v.getValidator(schema(0));
  assert.equal(early({ f0: 1 }).valid, true);
  for (let n = 1; n < 10; n++) {
    assert.equal(v.getValidator(schema(n))({ [`f${n}`]: n }).valid, true);
    assert.ok(v.size <= 3, `at most 3 compiled, got ${v.size}`);
  }
  assert.equal(early({ f0: 1 }).valid, true);
  assert.equal(early({ f0: "x" }).valid, false);
  assert.equal(MAX_COMPILED_SCHEMAS, 256, "the documented bound (docs/design/limits.md)");
});

test("a validator compiles its schema at its first validation, once; a schema that cannot compile fails there, not when handed out", () => {
  const v = new BoundedSchemaValidator();
  const a = v.getValidator(form());
  const b = v.getValidator(form());
  assert.equal(b, a, "handed out once per schema text");
  assert.equal(v.size, 0, "nothing compiled before the first validation");
  assert.equal(a({ name: 1 }).valid, false);
  assert.equal(v.size, 1);
  assert.equal(b({ name: "Ada" }).valid, true);
  assert.equal(v.size, 1, "compiled once");
  const broken = v.getValidator({ $ref: "#/definitions/missing" });
  const thrown: unknown[] = [];
  for (let i = 0; i < 2; i++)
    assert.throws(
      () => broken({}),
      (err) => (thrown.push(err), /resolve reference/.test(String(err))),
    );
  assert.equal(thrown[1], thrown[0], "the same error object again: the failed compile is kept, not tried at every call");
});

test("two schemas with one $id are two schemas (another upstream's, or the same tool's after its list changed)", () => {
  const v = new BoundedSchemaValidator();
  const before = v.getValidator({ $id: "urn:tool:out", type: "object", properties: { n: { type: "number" } }, required: ["n"] });
  assert.equal(before({ n: 1 }).valid, true);
  const after = v.getValidator({ $id: "urn:tool:out", type: "object", properties: { s: { type: "string" } }, required: ["s"] });
  assert.equal(after({ s: "x" }).valid, true, "valid under its own schema");
  assert.equal(after({ n: 1 }).valid, false, "not checked against the first schema with that $id");
  assert.equal(before({ s: "x" }).valid, false);
});

test("upstream clients validate tool output with the shared validator: one compiled schema for every connection", async () => {
  const before = jsonSchemaValidator.size;
  const clients = [];
  for (let i = 0; i < 2; i++) {
    const upstream = new McpServer({ name: `upstream-${i}`, version: "1.0.0" });
    upstream.registerTool("measure", { outputSchema: { upstreamOutputCheck: z.number() } }, () => ({
      content: [{ type: "text", text: "42" }],
      structuredContent: { upstreamOutputCheck: 42 },
    }));
    clients.push({ client: await upstreamClientOf(upstream), upstream });
  }
  try {
    for (const { client } of clients) {
      await client.listTools();
      assert.equal(jsonSchemaValidator.size, before + (client === clients[0]!.client ? 0 : 1), "listing tools compiles nothing");
      const result = await client.callTool({ name: "measure", arguments: {} });
      assert.deepEqual(result.structuredContent, { upstreamOutputCheck: 42 });
    }
    assert.equal(jsonSchemaValidator.size, before + 1, "the tool's output schema is compiled once, by the shared validator");
  } finally {
    for (const { client, upstream } of clients) {
      await client.close();
      await upstream.close();
    }
  }
});

test("an output schema Ajv cannot compile: the upstream's tools are still listed, and a call of that tool fails its check", async () => {
  const upstream = new Server({ name: "upstream", version: "1.0.0" }, { capabilities: { tools: {} } });
  const tools = [
    {
      name: "broken",
      inputSchema: { type: "object" as const },
      outputSchema: { type: "object" as const, properties: { a: { $ref: "#/definitions/missing" } } },
    },
    { name: "plain", inputSchema: { type: "object" as const } },
  ];
  upstream.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
  upstream.setRequestHandler(CallToolRequestSchema, () => ({ content: [], structuredContent: { a: 1 } }));
  const client = await upstreamClientOf(upstream);
  try {
    assert.deepEqual(
      (await client.listTools()).tools.map((t) => t.name),
      ["broken", "plain"],
    );
    await assert.rejects(client.callTool({ name: "broken", arguments: {} }), /Failed to validate structured content: can't resolve reference/);
  } finally {
    await client.close();
    await upstream.close();
  }
});

/** The gateway's upstream client (newUpstreamClient) connected to `upstream` over the SDK's in-memory transport. */
async function upstreamClientOf(upstream: { connect(transport: Transport): Promise<void> }) {
  const { client } = newUpstreamClient({
    clientInfo: { name: "test", version: "1" },
    handlers: unusedHandlers(),
    attribution: () => undefined,
    toolsChanged: () => undefined,
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await upstream.connect(serverSide);
  await client.connect(clientSide);
  return client;
}
