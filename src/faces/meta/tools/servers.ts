/** add_server, remove_server, list_servers. */
import { z } from "zod";
import { formatZodError } from "../../../config/load.js";
import { serverConfigSchema, serverNameSchema } from "../../../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../../../errors.js";
import { describeTarget } from "../../../upstream/registry.js";
import { defineTool, iso, json } from "../define.js";

export const addServer = defineTool({
  name: "add_server",
  title: "Add an upstream MCP server",
  description:
    "Add an MCP server for every session and connect this session to it. Give either `command` (+ `args`, `env`, `cwd`) for a stdio server, or `url` (+ `headers`, `transport`: streamable-http | sse) for a remote one. Fails, keeping nothing, if the server cannot be reached.",
  input: {
    name: serverNameSchema.describe("Unique name used to address the server in other tools"),
    command: z.string().optional().describe("Executable for a stdio server"),
    args: z.array(z.string()).optional().describe("Arguments for `command`"),
    env: z.record(z.string(), z.string()).optional().describe("Extra environment for `command`"),
    cwd: z.string().optional().describe("Working directory for `command`"),
    url: z.string().optional().describe("URL of a remote server"),
    headers: z.record(z.string(), z.string()).optional().describe("HTTP headers for a remote server"),
    transport: z.enum(["streamable-http", "sse"]).optional().describe("Remote transport (default streamable-http)"),
  },
  async run({ session, gateway }, { name, ...rest }) {
    const candidate = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
    if (candidate.command !== undefined && candidate.url !== undefined) {
      throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, "give either `command` (stdio) or `url` (remote), not both");
    }
    const parsed = serverConfigSchema.safeParse(candidate);
    if (!parsed.success) {
      throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `invalid server config:\n${formatZodError(parsed.error)}`);
    }
    await gateway.sessions.addServer(session, name, parsed.data);
    const conn = await session.connection(name);
    const tools = await conn.listTools().catch((err: unknown) => {
      session.logger.warn({ server: name, err: errorMessage(err) }, "list_tools_after_add_failed");
      return [];
    });
    return json(
      { added: name, status: conn.status, serverInfo: conn.serverInfo, tools: tools.map((t) => t.name) },
      `Server '${name}' added and connected (${tools.length} tools).`,
    );
  },
});

export const removeServer = defineTool({
  name: "remove_server",
  title: "Remove an upstream MCP server",
  description:
    "Remove a server for every session: all sessions disconnect from it, its working tasks fail and its pending elicitations/sampling requests are rejected.",
  input: { name: z.string().describe("Server name, as in list_servers") },
  annotations: { destructiveHint: true },
  async run({ session, gateway }, { name }) {
    const sessions = await gateway.sessions.removeServer(session, name);
    return json({ removed: name, sessionsDisconnected: sessions }, `Server '${name}' removed.`);
  },
});

export const listServers = defineTool({
  name: "list_servers",
  title: "List upstream MCP servers",
  description: "List configured servers with this session's connection status and last error.",
  input: {},
  annotations: { readOnlyHint: true },
  async run({ session, gateway }) {
    const servers = gateway.registry.list().map((entry) => {
      const view = session.view(entry.name);
      return {
        name: entry.name,
        ...describeTarget(entry.config),
        status: view.status,
        connected: view.status === "connected",
        ...(view.connectedAt !== undefined ? { connected_at: iso(view.connectedAt) } : {}),
        ...(view.lastError !== undefined ? { last_error: view.lastError } : {}),
        ...(view.serverInfo ? { server_info: view.serverInfo } : {}),
        working_tasks: session.tasks.list({ server: entry.name, status: "working" }).length,
      };
    });
    return json({ servers });
  },
});
