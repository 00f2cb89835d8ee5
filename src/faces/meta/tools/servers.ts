/**
 * add_server, remove_server, list_servers. Responses carry the project's
 * field names and their camelCase aliases (design MF-19);
 * docs/adr/0004-reply-shapes.md lists both.
 *
 * Also the runtime server policy (docs/adr/0006): what a client may add,
 * replace or remove, by `gateway.servers.*` and whether the gateway is bound
 * beyond loopback without a token. The SessionManager asks it in turn with the
 * other changes to the same name, so it judges the entry really replaced.
 */
import { z } from "zod";
import { formatZodError } from "../../../config/load.js";
import { isStdioConfig, serverConfigSchema, serverNameSchema, type ServerConfig } from "../../../config/server-entry.js";
import { ErrorCodes, GatewayError, errorMessage } from "../../../errors.js";
import { callersAuthenticated } from "../../../auth/required.js";
import { isLoopbackHost } from "../../../http/guards.js";
import { describeTarget, entrySharing, type RegisteredServer } from "../../../upstream/registry.js";
import { RuntimeUrlPolicy } from "../../../upstream/url-policy.js";
import { defineTool, iso, json, type MetaContext } from "../define.js";

export const addServer = defineTool({
  name: "add_server",
  title: "Add an upstream MCP server",
  description:
    "Add an MCP server for every session and connect this session to it. Give either `url` (+ `headers`, `transport`: streamable-http | sse) for a remote server, or `command` (+ `args`, `env`, `cwd`) for a stdio one — stdio only if the gateway's operator allows it (gateway.servers.allowRuntimeStdio; otherwise EMCP_FORBIDDEN). Fails, keeping nothing, if the server cannot be reached. Other sessions see the server but use it without your `headers`/`env`, and only you may change or remove it (unless the operator allows it); with user logins (OAuth) only your own sessions see it. The URL must be one the operator allows (gateway.servers.runtimeUrls), and redirects are not followed. The same name with the same config just connects; a different config updates a server this session added (every session reconnects with it, their working tasks on it fail); servers from the config file are replaced only if the operator allows it. Returns the server's capabilities and tools.",
  input: {
    name: serverNameSchema.describe("Unique name used to address the server in other tools"),
    command: z.string().optional().describe("Executable for a stdio server"),
    args: z.array(z.string()).optional().describe("Arguments for `command`"),
    env: z.record(z.string(), z.string()).optional().describe("Extra environment for `command`"),
    cwd: z.string().optional().describe("Working directory for `command`"),
    url: z.string().optional().describe("URL of a remote server"),
    headers: z.record(z.string(), z.string()).optional().describe("HTTP headers for a remote server"),
    transport: z.enum(["streamable-http", "sse"]).optional().describe("Remote transport (default streamable-http)"),
    sharing: z
      .enum(["session", "shared"])
      .optional()
      .describe("session: a connection per client session; shared: one connection for all sessions (default: the gateway's for this transport)"),
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
    const config = parsed.data;
    const outcome = await gateway.sessions.addServer(session, name, config, (existing) => authorizeAdd({ session, gateway }, name, config, existing));
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
        // The alias shape (design MF-19): the server's capabilities and its tools (name, description, inputSchema).
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
    "Remove a server for every session: all sessions disconnect from it, its working tasks fail and its pending elicitations/sampling requests are rejected. Servers from the config file only if the gateway's operator allows it (gateway.servers.allowConfigServerChanges; otherwise EMCP_FORBIDDEN).",
  input: { name: z.string().describe("Server name, as in list_servers") },
  annotations: { destructiveHint: true },
  async run({ session, gateway }, { name }) {
    const sessions = await gateway.sessions.removeServer(session, name, async (entry) => {
      if (entry.addedBy === "config") authorizeConfigServerChange({ session, gateway }, name, "remove");
      else await authorizeCrossSession({ session, gateway }, entry, "remove");
    });
    return json({ removed: name, sessionsDisconnected: sessions }, `Server '${name}' removed.`);
  },
});

export const listServers = defineTool({
  name: "list_servers",
  title: "List upstream MCP servers",
  description:
    "List configured servers with this session's connection status and last error; `source` says whether a server comes from the config file or was added at runtime; `owner` says who may change it (config, this_session, another_session; another session's server is used here without its credentials).",
  input: {},
  annotations: { readOnlyHint: true },
  async run({ session, gateway }) {
    const working = await session.tasks.list({ status: "working" });
    const servers = gateway.registry.list(session).map((entry) => {
      const view = session.view(entry.name);
      const target = describeTarget(entry.config);
      const connectedAt = iso(view.connectedAt);
      return {
        name: entry.name,
        ...target,
        // The alias `url` (design MF-19): remote servers only (without credentials or query); stdio servers have none.
        ...(target.transport !== "stdio" ? { url: target.target } : {}),
        source: entry.addedBy === "config" ? "config" : "runtime",
        // Who may change it (docs/adr/0015); a runtime server of another session is used here without its credentials.
        owner: entry.addedBy === "config" ? "config" : entry.addedBy === session.id ? "this_session" : "another_session",
        sharing: entrySharing(entry, gateway.settings),
        status: view.status,
        connected: view.status === "connected",
        ...(connectedAt !== undefined ? { connected_at: connectedAt, connectedAt } : {}),
        ...(view.lastError !== undefined ? { last_error: view.lastError, lastError: view.lastError } : {}),
        ...(view.serverInfo ? { server_info: view.serverInfo } : {}),
        working_tasks: working.filter((t) => t.server === entry.name).length,
      };
    });
    return json({ servers });
  },
});

/**
 * add_server's policy: whether it replaces a config-file server or another
 * session's, the kind of server the client asks for, and its URL
 * (gateway.servers.runtimeUrls; resolved here, before anything is sent).
 */
async function authorizeAdd(ctx: MetaContext, name: string, config: ServerConfig, existing: RegisteredServer | undefined): Promise<void> {
  if (existing?.addedBy === "config") authorizeConfigServerChange(ctx, name, "replace");
  else if (existing) await authorizeCrossSession(ctx, existing, "replace");
  const { servers } = ctx.gateway.settings;
  if (isStdioConfig(config)) {
    if (!servers.allowRuntimeStdio) {
      refuse(
        ctx,
        name,
        "gateway.servers.allowRuntimeStdio",
        `add_server with \`command\` is off on this gateway (gateway.servers.allowRuntimeStdio is false): it would run a program on the gateway's host, so stdio servers come from the config file only. Ask the gateway's operator to add '${name}' under mcpServers in the config file, or to set gateway.servers.allowRuntimeStdio: true if every client that can reach the gateway may run commands on its host. A remote server (\`url\`) can be added without it.`,
      );
    }
    requireTokenBeyondLoopback(ctx, name, "add_server with `command`", "run any command on its host");
  } else {
    if (!servers.allowRuntimeRemote) {
      refuse(
        ctx,
        name,
        "gateway.servers.allowRuntimeRemote",
        `add_server with \`url\` is off on this gateway (gateway.servers.allowRuntimeRemote is false): remote servers come from the config file only. Ask the gateway's operator to add '${name}' under mcpServers in the config file, or to set gateway.servers.allowRuntimeRemote: true.`,
      );
    }
    requireTokenBeyondLoopback(ctx, name, "add_server with `url`", "make it connect to any URL its host can reach");
    try {
      await new RuntimeUrlPolicy(servers.runtimeUrls).check(config.url, name);
    } catch (err) {
      if (err instanceof GatewayError) ctx.session.logger.warn({ server: name, setting: "gateway.servers.runtimeUrls" }, "server_change_forbidden");
      throw err;
    }
  }
}

/**
 * A runtime server belongs to the session that added it (docs/adr/0015):
 * another session may not replace or remove it — that would re-point the
 * owner's next calls, with its credentials — unless the operator allows it
 * (gateway.servers.allowCrossSessionChanges), or the owner has ended for good
 * (no live session here and no stored record: nobody else could ever change it).
 */
async function authorizeCrossSession(ctx: MetaContext, entry: RegisteredServer, change: "remove" | "replace"): Promise<void> {
  const { session, gateway } = ctx;
  if (entry.addedBy === session.id || gateway.settings.servers.allowCrossSessionChanges) return;
  if (!gateway.sessions.get(entry.addedBy) && !(await gateway.store.sessions.get(entry.addedBy))) return;
  const how =
    change === "remove"
      ? "Only that session can remove it"
      : `add_server yours under another name (the same \`url\` without \`headers\` just connects you to this one, without the other session's credentials)`;
  refuse(
    ctx,
    entry.name,
    "gateway.servers.allowCrossSessionChanges",
    `server '${entry.name}' was added at runtime by another session, and sessions may not ${change} each other's servers (gateway.servers.allowCrossSessionChanges is false): its credentials and its URL are that session's. ${how}; or ask the gateway's operator to set gateway.servers.allowCrossSessionChanges: true.`,
  );
}

/** remove_server of a config-file server, or add_server replacing one with another config. */
function authorizeConfigServerChange(ctx: MetaContext, name: string, change: "remove" | "replace"): void {
  if (!ctx.gateway.settings.servers.allowConfigServerChanges) {
    const how =
      change === "remove"
        ? "Ask the gateway's operator to remove it from the config file"
        : `add_server yours under another name, or ask the gateway's operator to change the config file`;
    refuse(
      ctx,
      name,
      "gateway.servers.allowConfigServerChanges",
      `server '${name}' comes from the gateway's config file, and clients may not ${change} it (gateway.servers.allowConfigServerChanges is false): the operator set it up for every session. ${how}, or to set gateway.servers.allowConfigServerChanges: true.`,
    );
  }
  requireTokenBeyondLoopback(
    ctx,
    name,
    `${change === "remove" ? "remove_server" : "add_server replacing"} a config-file server`,
    "take away or redirect the servers the operator configured",
  );
}

/** Every runtime change is refused on a gateway anyone on the network can reach without a token, whatever the settings allow. */
function requireTokenBeyondLoopback(ctx: MetaContext, name: string, what: string, risk: string): void {
  const { host } = ctx.gateway.settings;
  if (callersAuthenticated(ctx.gateway.settings) || isLoopbackHost(host)) return;
  refuse(
    ctx,
    name,
    "gateway.token",
    `${what} is refused: the gateway listens on ${host}, beyond loopback, without a token, so anyone who can reach it could ${risk}. The operator can set gateway.token (or --token / EMCEEPEE_TOKEN), so that only clients with the token get in, or gateway.auth.oauth.issuers, so that only clients with an OAuth access token get in, or listen on 127.0.0.1.`,
  );
}

function refuse(ctx: MetaContext, server: string, setting: string, message: string): never {
  ctx.session.logger.warn({ server, setting }, "server_change_forbidden");
  throw new GatewayError(ErrorCodes.FORBIDDEN, message, { details: { server, setting } });
}
