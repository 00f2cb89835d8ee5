/**
 * add_server, remove_server, list_servers. Responses carry the project's
 * field names and the seeds' (seed 003 ServerInfo and SessionManager.addServer);
 * docs/adr/0004-seed-shapes.md lists both.
 */
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
    "Add an MCP server for every session and connect this session to it. Give either `command` (+ `args`, `env`, `cwd`) for a stdio server, or `url` (+ `headers`, `transport`: streamable-http | sse) for a remote one. Fails, keeping nothing, if the server cannot be reached. The same name with the same config just connects; a different config updates a server added at runtime (every session reconnects with it, their working tasks on it fail); servers from the config file cannot be replaced. Returns the server's capabilities and tools.",
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
    const outcome = await gateway.sessions.addServer(session, name, parsed.data);
    const conn = await session.connection(name);
    const tools = await conn.listTools().catch((err: unknown) => {
      session.logger.warn({ server: name, err: errorMessage(err) }, "list_tools_after_add_failed");
      return [];
    });
    const summary = {
      added: `Server '${name}' added and connected (${tools.length} tools).`,
      updated: `Server '${name}' updated: reconnected with the new config (${tools.length} tools); other sessions reconnect on next use.`,
      unchanged: `Server '${name}' already has this config; connected (${tools.length} tools).`,
    }[outcome];
    return json(
      {
        added: name,
        outcome,
        status: conn.status,
        serverInfo: conn.serverInfo,
        // Seed 003 (SessionManager.addServer): the server's capabilities and its tools as ToolInfo.
        capabilities: conn.capabilities ?? {},
        tools: tools.map((t) => ({
          name: t.name,
          ...(t.title !== undefined ? { title: t.title } : {}),
          ...(t.description !== undefined ? { description: t.description } : {}),
          inputSchema: t.inputSchema,
        })),
        tool_names: tools.map((t) => t.name),
      },
      summary,
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
  description:
    "List configured servers with this session's connection status and last error; `source` says whether a server comes from the config file or was added at runtime.",
  input: {},
  annotations: { readOnlyHint: true },
  async run({ session, gateway }) {
    const servers = gateway.registry.list().map((entry) => {
      const view = session.view(entry.name);
      const target = describeTarget(entry.config);
      const connectedAt = iso(view.connectedAt);
      return {
        name: entry.name,
        ...target,
        // Seed 003 ServerInfo.url: remote servers only (without credentials or query); stdio servers have none.
        ...(target.transport !== "stdio" ? { url: target.target } : {}),
        source: entry.addedBy === "config" ? "config" : "runtime",
        status: view.status,
        connected: view.status === "connected",
        ...(connectedAt !== undefined ? { connected_at: connectedAt, connectedAt } : {}),
        ...(view.lastError !== undefined ? { last_error: view.lastError, lastError: view.lastError } : {}),
        ...(view.serverInfo ? { server_info: view.serverInfo } : {}),
        working_tasks: session.tasks.list({ server: entry.name, status: "working" }).length,
      };
    });
    return json({ servers });
  },
});
