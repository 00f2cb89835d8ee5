/**
 * The meta-tools face: one McpServer per downstream session exposing the
 * gateway's management tools and its own resources. Every tool is registered
 * here once; the HTTP endpoint and `emceepee stdio` both use this function.
 * Each call is timed for the access log; gateway-made replies declare their
 * `outputSchema` (outputs.ts). The tools' zod objects and their tools/list
 * are built once per process, not per session (ADR 0052), from JSON Schemas
 * converted in the source tree, not at run time (json-schemas.ts, ADR 0068).
 */
import { acceptCancelOfRequestZero } from "../../mcp/cancel-request-zero.js";
import { jsonSchemaValidator } from "../../mcp/json-schema-validator.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ListToolsResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { principalOf } from "../../auth/principal.js";
import { toToolErrorText } from "../../errors.js";
import { wrapToolErrors } from "../../mcp/tool-errors.js";
import { answerToolsList, jsonSchemasOf, toolList, type ToolJsonSchemas, type ToolRegistration } from "../../mcp/tool-list.js";
import type { GatewayContext } from "../../session/gateway-context.js";
import { logToolCall, resultOutcome } from "../access-log.js";
import { wasPromoted, type MetaContext, type MetaTool } from "./define.js";
import { DIAGRAMS_URI, diagramsContents } from "./diagrams.js";
import { withEnvelope } from "./envelope.js";
import { metaJsonSchemas } from "./json-schemas.js";
import { META_OUTPUT_SCHEMAS } from "./outputs.js";
import { awaitActivity } from "./tools/activity.js";
import { getElicitations, respondToElicitation } from "./tools/elicitation.js";
import { getLogs, getNotifications } from "./tools/notifications.js";
import { getPrompt, listPrompts } from "./tools/prompts.js";
import { listResourceTemplates, listResources, readResource } from "./tools/resources.js";
import { getSamplingRequests, respondToSampling } from "./tools/sampling.js";
import { addServer, listServers, removeServer } from "./tools/servers.js";
import { cancelTask, getTask, getTaskResult, listTasks } from "./tools/tasks.js";
import { executeTool, listTools } from "./tools/tools.js";
import { searchToolsTool } from "./tools/search.js";
import { cancelElicitationRequest, cancelSamplingRequest } from "./tools/cancel-requests.js";
import { reconnectServer } from "./tools/reconnect.js";
import { subscribeResource, unsubscribeResource } from "./tools/subscriptions.js";
import { deleteTimer, getTimer, listTimers, setTimer } from "./tools/timers.js";
import { runCode } from "./code-mode/run-code.js";

export const META_TOOLS: readonly MetaTool[] = [
  addServer,
  removeServer,
  reconnectServer,
  listServers,
  listTools,
  searchToolsTool,
  executeTool,
  listResources,
  listResourceTemplates,
  readResource,
  subscribeResource,
  unsubscribeResource,
  listPrompts,
  getPrompt,
  getNotifications,
  getLogs,
  getElicitations,
  respondToElicitation,
  cancelElicitationRequest,
  getSamplingRequests,
  respondToSampling,
  cancelSamplingRequest,
  listTasks,
  getTask,
  getTaskResult,
  cancelTask,
  awaitActivity,
  setTimer,
  listTimers,
  getTimer,
  deleteTimer,
  runCode,
];

const INSTRUCTIONS = `emceepee is an MCP gateway. Use list_servers and list_tools (or search_tools, to find a tool by what it does among many) to discover upstream servers and their tools, execute_tool to call them (a server starts on first use).
Slow calls become tasks after timeout_ms: follow them with await_activity, get_task and get_task_result.
When a server asks for user input or an LLM completion, it shows up in pending_client_action: answer with respond_to_elicitation or respond_to_sampling.
New events are delivered exactly once, in whichever tool response comes first.`;

/** Each tool's registration, built at its first use in the process: every session's McpServer shares its zod objects. */
const registrations = new Map<MetaTool, ToolRegistration>();
/** The JSON Schemas of json-schemas.ts, read at the first registration. */
let converted: Readonly<Record<string, ToolJsonSchemas>> | undefined;

function registrationOf(tool: MetaTool): ToolRegistration {
  let registration = registrations.get(tool);
  if (!registration) {
    const outputSchema = META_OUTPUT_SCHEMAS[tool.name];
    // Converted in the source tree (ADR 0068); a tool missing there is converted here (meta-tool-list.test.ts fails on it).
    const jsonSchemas = (converted ??= metaJsonSchemas())[tool.name];
    registration = {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: z.strictObject(tool.input),
      ...(outputSchema ? { outputSchema } : {}),
      ...(tool.annotations ? { annotations: tool.annotations } : {}),
      ...(jsonSchemas ? { jsonSchemas } : {}),
    };
    registrations.set(tool, registration);
  }
  return registration;
}

/**
 * Every meta tool's schemas converted from zod now, as McpServer would convert
 * them: what json-schemas.ts must hold (scripts/meta-json-schemas.mjs writes
 * it; test/unit/meta-tool-list.test.ts compares).
 */
export function convertMetaJsonSchemas(): Record<string, ToolJsonSchemas> {
  // jsonSchemasOf converts the zod schemas; it never reads the registration's jsonSchemas (the file being checked).
  return Object.fromEntries(META_TOOLS.map((tool) => [tool.name, jsonSchemasOf(registrationOf(tool))]));
}

/** The meta tools `gateway`'s settings offer, in registration order. */
export function enabledMetaTools(gateway: GatewayContext): MetaTool[] {
  return META_TOOLS.filter((tool) => tool.enabled?.(gateway) !== false);
}

/** The tools/list of each set of enabled tools (keyed by their names), built once per process. */
const toolLists = new Map<string, ListToolsResult>();

/**
 * The meta face's tools/list for `gateway`'s settings: built at the first
 * meta session in the process that has these settings, then the same list for
 * every session. Do not change what it returns (sessions answer copies).
 */
export function metaToolList(gateway: GatewayContext, tools: MetaTool[] = enabledMetaTools(gateway)): ListToolsResult {
  const key = tools.map((tool) => tool.name).join(",");
  let list = toolLists.get(key);
  if (!list) {
    list = toolList(tools.map(registrationOf));
    toolLists.set(key, list);
  }
  return list;
}

export function createMetaServer(ctx: MetaContext): McpServer {
  const server = new McpServer(
    { name: "emceepee", title: "emceepee MCP gateway", version: ctx.gateway.version },
    { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator },
  );
  acceptCancelOfRequestZero(server.server); // a client may number a call 0 (SDK 1.32 drops its cancel)
  const tools = enabledMetaTools(ctx.gateway);
  for (const tool of tools) {
    const { name, jsonSchemas: _listedAhead, ...config } = registrationOf(tool);
    server.registerTool(name, config, async (args: unknown, extra) => {
      ctx.session.touch();
      const { server: target, tool: upstreamTool } = args as { server?: unknown; tool?: unknown };
      const entry = {
        face: "meta" as const,
        server: typeof target === "string" ? target : undefined,
        tool: tool.name,
        upstreamTool: tool.name === "execute_tool" && typeof upstreamTool === "string" ? upstreamTool : undefined,
        principalHash: principalOf(extra.authInfo)?.hash,
      };
      const result = await logToolCall(
        ctx.gateway,
        ctx.session,
        entry,
        extra.signal,
        () => runTool(ctx, tool, args, extra),
        (r) => (wasPromoted(r) ? "promoted" : resultOutcome(r)),
      );
      ctx.session.touch();
      return tool.envelope === false ? result : withEnvelope(ctx.session, result);
    });
  }
  // Input-validation failures are answered by the SDK before a handler runs;
  // they are tool responses too, so they carry the session envelope as well.
  wrapToolErrors(server, (result) => withEnvelope(ctx.session, result));
  // McpServer would convert every tool's schemas to JSON Schema at each tools/list (src/mcp/tool-list.ts).
  answerToolsList(server, metaToolList(ctx.gateway, tools));
  server.registerResource(
    "diagrams",
    DIAGRAMS_URI,
    { title: "Gateway state diagrams", description: "Mermaid diagrams of emceepee's state machines", mimeType: "application/json" },
    async () => diagramsContents(),
  );
  return server;
}

/** A tool's result, or its error as an `isError` result. */
async function runTool(ctx: MetaContext, tool: MetaTool, args: unknown, extra: Parameters<MetaTool["run"]>[2]): Promise<CallToolResult> {
  try {
    return await tool.run(ctx, args as never, extra);
  } catch (err) {
    // The one boundary's text (`EMCP_X: message`); an unexpected failure is logged there as an error.
    const text = toToolErrorText(err, ctx.session.logger);
    ctx.session.logger.debug({ tool: tool.name, err: text }, "meta_tool_error");
    return { content: [{ type: "text", text }], isError: true };
  }
}
