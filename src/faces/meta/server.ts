/**
 * The meta-tools face: one McpServer per downstream session exposing the
 * gateway's management tools and its own resources. Every tool is registered
 * here once; the HTTP endpoint and `emceepee stdio` both use this function.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { toToolErrorText } from "../../errors.js";
import { wrapToolErrors } from "../../mcp/tool-errors.js";
import type { MetaContext, MetaTool } from "./define.js";
import { DIAGRAMS_URI, diagramsContents } from "./diagrams.js";
import { withEnvelope } from "./envelope.js";
import { awaitActivity } from "./tools/activity.js";
import { getElicitations, respondToElicitation } from "./tools/elicitation.js";
import { getLogs, getNotifications } from "./tools/notifications.js";
import { getPrompt, listPrompts } from "./tools/prompts.js";
import { listResourceTemplates, listResources, readResource } from "./tools/resources.js";
import { getSamplingRequests, respondToSampling } from "./tools/sampling.js";
import { addServer, listServers, removeServer } from "./tools/servers.js";
import { cancelTask, getTask, getTaskResult, listTasks } from "./tools/tasks.js";
import { executeTool, listTools } from "./tools/tools.js";

export const META_TOOLS: readonly MetaTool[] = [
  addServer,
  removeServer,
  listServers,
  listTools,
  executeTool,
  listResources,
  listResourceTemplates,
  readResource,
  listPrompts,
  getPrompt,
  getNotifications,
  getLogs,
  getElicitations,
  respondToElicitation,
  getSamplingRequests,
  respondToSampling,
  listTasks,
  getTask,
  getTaskResult,
  cancelTask,
  awaitActivity,
];

const INSTRUCTIONS = `emceepee is an MCP gateway. Use list_servers and list_tools to discover upstream servers and their tools, execute_tool to call them.
Slow calls become tasks after timeout_ms: follow them with await_activity, get_task and get_task_result.
When a server asks for user input or an LLM completion, it shows up in pending_client_action: answer with respond_to_elicitation or respond_to_sampling.
New events are delivered exactly once, in whichever tool response comes first.`;

export function createMetaServer(ctx: MetaContext): McpServer {
  const server = new McpServer(
    { name: "emceepee", title: "emceepee MCP gateway", version: ctx.gateway.version },
    { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS },
  );
  for (const tool of META_TOOLS) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: z.strictObject(tool.input),
        ...(tool.annotations ? { annotations: tool.annotations } : {}),
      },
      async (args: unknown, extra) => {
        ctx.session.touch();
        let result: CallToolResult;
        try {
          result = await tool.run(ctx, args as never, extra);
        } catch (err) {
          // The one boundary's text (`EMCP_X: message`); an unexpected failure is logged there as an error.
          const text = toToolErrorText(err, ctx.session.logger);
          ctx.session.logger.debug({ tool: tool.name, err: text }, "meta_tool_error");
          result = { content: [{ type: "text", text }], isError: true };
        }
        ctx.session.touch();
        return tool.envelope === false ? result : withEnvelope(ctx.session, result);
      },
    );
  }
  // Input-validation failures are answered by the SDK before a handler runs;
  // they are tool responses too, so they carry the session envelope as well.
  wrapToolErrors(server, (result) => withEnvelope(ctx.session, result));
  server.registerResource(
    "diagrams",
    DIAGRAMS_URI,
    { title: "Gateway state diagrams", description: "Mermaid diagrams of emceepee's state machines", mimeType: "application/json" },
    async () => diagramsContents(),
  );
  return server;
}
