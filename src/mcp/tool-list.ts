/**
 * SDK workaround — McpServer answers `tools/list` by converting every
 * registered tool's zod schemas to JSON Schema at each request of each
 * session (`toJsonSchemaCompat`), with no way to hand it a finished list. A
 * face whose tools are fixed per process (the meta face) builds its list once
 * with `toolList()`, which does what McpServer's handler does, and answers
 * every session's `tools/list` from it with `answerToolsList()` (ADR 0052).
 * A registration may bring its schemas already converted (`jsonSchemas`, the
 * meta face's from its source tree, ADR 0068): then nothing is converted.
 *
 * Touches no private member: `Server.setRequestHandler` replaces the handler
 * McpServer installed at its first `registerTool`. A canary
 * (test/unit/sdk-canaries.test.ts) checks that the list is byte-for-byte what
 * McpServer's own handler answers, so a change in the SDK's mapping shows.
 */
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { toJsonSchemaCompat } from "@modelcontextprotocol/sdk/server/zod-json-schema-compat.js";
import { ListToolsRequestSchema, type ListToolsResult, type Tool, type ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";

/** What `McpServer.registerTool` is given for one tool (schemas as zod objects). */
export interface ToolRegistration {
  name: string;
  title?: string;
  description?: string;
  inputSchema: z.ZodObject;
  outputSchema?: z.ZodObject;
  annotations?: ToolAnnotations;
  /** `jsonSchemasOf(this)` computed ahead (ADR 0068): toolList uses it instead of converting. The caller keeps it equal. */
  jsonSchemas?: ToolJsonSchemas;
}

/** A tool's input and output schemas as McpServer lists them (JSON Schema). */
export interface ToolJsonSchemas {
  input: Tool["inputSchema"];
  output?: Tool["outputSchema"];
}

/** `tool`'s zod schemas converted to JSON Schema as McpServer's tools/list converts them. */
export function jsonSchemasOf(tool: Pick<ToolRegistration, "inputSchema" | "outputSchema">): ToolJsonSchemas {
  return {
    input: toJsonSchemaCompat(tool.inputSchema, { strictUnions: true, pipeStrategy: "input" }) as Tool["inputSchema"],
    ...(tool.outputSchema ? { output: toJsonSchemaCompat(tool.outputSchema, { strictUnions: true, pipeStrategy: "output" }) as Tool["outputSchema"] } : {}),
  };
}

/** The `tools/list` result McpServer would answer for `tools` (given to `registerTool` in this order, all enabled). */
export function toolList(tools: readonly ToolRegistration[]): ListToolsResult {
  return {
    tools: tools.map((tool) => {
      const schemas = tool.jsonSchemas ?? jsonSchemasOf(tool);
      // McpServer's key order and options (server/mcp.js, setToolRequestHandlers; registerTool declares
      // every tool's taskSupport "forbidden"); undefined keys are not serialized.
      const definition = {
        name: tool.name,
        title: tool.title,
        description: tool.description,
        inputSchema: schemas.input,
        annotations: tool.annotations,
        execution: { taskSupport: "forbidden" },
        _meta: undefined,
      } as Tool;
      if (schemas.output) definition.outputSchema = schemas.output;
      return definition;
    }),
  };
}

/**
 * Answers `server`'s `tools/list` with a copy of `list` (a copy: what a
 * session's answer goes through must not reach the next session's). Call it
 * after the last `registerTool`; tools enabled, disabled or updated later are
 * not seen.
 */
export function answerToolsList(server: McpServer, list: ListToolsResult): void {
  server.server.setRequestHandler(ListToolsRequestSchema, () => structuredClone(list));
}
