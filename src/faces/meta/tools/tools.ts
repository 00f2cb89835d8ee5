/** list_tools, execute_tool (with timeout promotion to a gateway-owned task). */
import { z } from "zod";
import { DEFAULT_SETTINGS } from "../../../config/schema.js";
import { assertArgumentsSize, ErrorCodes, GatewayError } from "../../../errors.js";
import { executeWithPromotion } from "../../../tasks/execute.js";
import { runUpstreamTaskToEnd } from "../../../tasks/native.js";
import { forwardProgress } from "../../progress.js";
import { defineTool, json, type MetaContext } from "../define.js";
import { elicitationSummary } from "../envelope.js";
import { fanout, named } from "./fanout.js";
import { taskView } from "./task-view.js";

/** How many of the server's working tasks a promotion reply lists. */
const PENDING_TASKS_SHOWN = 20;

/** The defaults the descriptions quote, from the config schema (a config may set others). */
const { defaultTimeoutMs: DEFAULT_TIMEOUT_MS } = DEFAULT_SETTINGS.tools;
const { defaultTtlMs: DEFAULT_TTL_MS } = DEFAULT_SETTINGS.tasks;

export const listTools = defineTool({
  name: "list_tools",
  title: "List upstream tools",
  description: "List the tools of one server, or of every server when `server` is omitted (full definitions, input schemas included).",
  input: { server: z.string().optional().describe("Server name; omit for all servers") },
  annotations: { readOnlyHint: true },
  async run(ctx, { server }) {
    return json({ servers: named("tools", await fanout(ctx, server, (c) => c.cachedTools())) });
  },
});

export const executeTool = defineTool({
  name: "execute_tool",
  title: "Call an upstream tool",
  description: `Call a tool on an upstream server. Waits up to \`timeout_ms\` (default ${DEFAULT_TIMEOUT_MS}) for the result and returns it unchanged. If the tool takes longer, the call keeps running as a task: the response gives its task_id and any pending elicitations of that server; use await_activity, get_task or get_task_result, and respond_to_elicitation if the server asks for input.`,
  input: {
    server: z.string().describe("Server name, as in list_servers"),
    tool: z.string().describe("Tool name, as in list_tools"),
    args: z.record(z.string(), z.unknown()).optional().describe("Tool arguments (an object matching the tool's input schema)"),
    timeout_ms: z
      .number()
      .int()
      .min(0)
      .max(3_600_000)
      .optional()
      .describe(`How long to wait before promoting the call to a task (default ${DEFAULT_TIMEOUT_MS})`),
    task_ttl_ms: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(`How long a promoted task may run before it expires (default ${DEFAULT_TTL_MS}, capped by the gateway's maxTtlMs)`),
  },
  async run(ctx, { server, tool, args, timeout_ms, task_ttl_ms }, extra) {
    const { session, gateway } = ctx;
    assertArgumentsSize(args, gateway.settings.tools.maxArgumentsBytes);
    const conn = await session.connection(server);
    await assertToolExists(ctx, server, tool);
    const timeoutMs = timeout_ms ?? gateway.settings.tools.defaultTimeoutMs;
    const progress = forwardProgress(extra, extra._meta?.progressToken);
    // Tools the upstream only runs as tasks: the gateway drives the upstream task (seed 004 emulation).
    const required = (await conn.taskSupport(tool)) === "required";
    const outcome = await executeWithPromotion({
      ...(required ? { run: (o) => runUpstreamTaskToEnd(gateway, conn, { name: tool, ...(args ? { arguments: args } : {}) }, o) } : {}),
      tasks: session.tasks,
      connection: conn,
      clock: gateway.clock,
      tool,
      args,
      timeoutMs,
      ttlMs: task_ttl_ms,
      callTimeoutMs: timeoutMs + gateway.settings.tasks.maxTtlMs,
      signal: extra.signal,
      onprogress: progress.onprogress,
    });
    await progress.flush();
    if (outcome.kind === "result") return outcome.result;
    const { task } = outcome;
    // The newest working tasks only: listing all of them made the N-th promotion an O(N) reply.
    const working = session.tasks.list({ server, status: "working" });
    return json(
      {
        proxy_task: taskView(task),
        pending_on_server: {
          tasks: working.slice(-PENDING_TASKS_SHOWN).map(taskView),
          ...(working.length > PENDING_TASKS_SHOWN
            ? { tasks_total: working.length, tasks_note: `newest ${PENDING_TASKS_SHOWN} shown; list_tasks lists all` }
            : {}),
          elicitations_for_server: session.pending.list("elicitation", server).map(elicitationSummary),
        },
      },
      `Tool call exceeded timeout (${timeoutMs}ms). Promoted to task ${task.taskId}. Use get_task_result to retrieve the result when ready, await_activity to wait for activity, and respond_to_elicitation if the server asks for input.`,
    );
  },
});

async function assertToolExists({ session }: MetaContext, server: string, tool: string): Promise<void> {
  const conn = await session.connection(server);
  const tools = await conn.cachedTools();
  if (tools.some((t) => t.name === tool)) return;
  throw new GatewayError(
    ErrorCodes.UNKNOWN_TOOL,
    `server '${server}' has no tool '${tool}'. Call list_tools with server '${server}' to see its ${tools.length} tools.`,
    { details: { server, tool } },
  );
}
