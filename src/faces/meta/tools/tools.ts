/**
 * list_tools (filtered by name, paged), execute_tool (with timeout promotion
 * to a task — gateway-owned, or mapped onto an upstream task that survives a
 * restart (design MF-20); the promotion says which respond_to_* the server's
 * pending requests need).
 */
import { z } from "zod";
import { principalOf } from "../../../auth/principal.js";
import { DEFAULT_SETTINGS } from "../../../config/schema.js";
import { isStdioConfig } from "../../../config/server-entry.js";
import { assertArgumentsSize, ErrorCodes, GatewayError } from "../../../errors.js";
import { consentNeeded, grantOwner, runAfterConsent, type ConsentNeeded } from "../../../session/consent-wait.js";
import { executeWithPromotion, type RunOptions } from "../../../tasks/execute.js";
import { runUpstreamTaskToEnd } from "../../../tasks/emulation.js";
import { forwardProgress } from "../../progress.js";
import { defineTool, json, promoted, type MetaContext } from "../define.js";
import { elicitationSummary, samplingSummary } from "../envelope.js";
import { fanout, type PerServer } from "./fanout.js";
import { taskView } from "./task-view.js";

/** How many of the server's working tasks a promotion reply lists. */
const PENDING_TASKS_SHOWN = 20;

/** The defaults the descriptions quote, from the config schema (a config may set others). */
const { defaultTimeoutMs: DEFAULT_TIMEOUT_MS } = DEFAULT_SETTINGS.tools;
const { defaultTtlMs: DEFAULT_TTL_MS } = DEFAULT_SETTINGS.tasks;

/** list_tools page size: a tool definition is about 0.7 KB, sent twice (text and structuredContent), so a default reply is about 15 KB. */
const LIST_TOOLS_DEFAULT_LIMIT = 10;
const LIST_TOOLS_MAX_LIMIT = 500;

export const listTools = defineTool({
  name: "list_tools",
  title: "List upstream tools",
  description: `List the tools of one server, or of every server when \`server\` is omitted (full definitions, input schemas included), grouped by server. \`name_contains\` keeps the tools whose name contains it (case-insensitive). At most \`limit\` tools per reply (default ${LIST_TOOLS_DEFAULT_LIMIT}); when more match, the reply has \`next_cursor\`: call again with the same arguments and \`cursor\` set to it. With many tools, search_tools finds the right one by what it does for far fewer tokens.`,
  input: {
    server: z.string().optional().describe("Server name; omit for all servers"),
    name_contains: z.string().min(1).max(200).optional().describe("Only tools whose name contains this text (case-insensitive)"),
    limit: z
      .number()
      .int()
      .min(1)
      .max(LIST_TOOLS_MAX_LIMIT)
      .optional()
      .describe(`Most tools in one reply (default ${LIST_TOOLS_DEFAULT_LIMIT}, at most ${LIST_TOOLS_MAX_LIMIT})`),
    cursor: z.string().min(1).max(1000).optional().describe("next_cursor from the previous list_tools reply (same server and name_contains)"),
  },
  annotations: { readOnlyHint: true },
  async run(ctx, { server, name_contains, limit = LIST_TOOLS_DEFAULT_LIMIT, cursor }, extra) {
    const query = { server: server ?? null, name_contains: name_contains ?? null };
    const offset = cursor === undefined ? 0 : readCursor(cursor, query);
    const needle = name_contains?.toLowerCase();
    const { governance } = ctx.gateway;
    const principal = principalOf(extra.authInfo);
    const rows = await fanout(ctx, server, async (c) => {
      // Tools the caller may not see are absent (gateway.governance.visibility); the others as curated for the caller (docs/adr/0024).
      const visible = (await c.cachedTools()).filter((t) => governance?.visible(principal, c.name, t.name) ?? true);
      const tools = ctx.gateway.curation?.viewAll(principal, c.name, visible) ?? visible;
      return needle === undefined ? tools : tools.filter((t) => t.name.toLowerCase().includes(needle));
    });
    const all = rows.flatMap((r) => ("items" in r ? r.items.map((tool) => ({ server: r.server, tool })) : []));
    const page = all.slice(offset, offset + limit);
    const next = offset + page.length < all.length ? offset + page.length : undefined;
    return json(
      {
        servers: pageRows(rows, page, offset === 0 || server !== undefined),
        total_tools: all.length,
        returned: page.length,
        ...(next !== undefined
          ? {
              next_cursor: writeCursor(next, query),
              note: `${all.length - next} more tools: call list_tools again with the same arguments and cursor set to next_cursor`,
            }
          : {}),
      },
      next !== undefined && offset === 0 && name_contains === undefined && server === undefined
        ? `${all.length} tools; the first ${page.length} below. Find one by what it does with search_tools, narrow with server or name_contains, or page with cursor.`
        : undefined,
    );
  },
});

/**
 * The page's tools grouped by server, in server order. Servers without a tool
 * on this page are listed (with `tools: []`, or their `error`) on the first
 * page only, or always when the caller asked for that one server.
 */
function pageRows<T>(rows: PerServer<T>[], page: Array<{ server: string; tool: T }>, listEmpty: boolean) {
  return rows.flatMap((r): Array<{ server: string; tools: T[] } | { server: string; error: string }> => {
    if (!("items" in r)) return listEmpty ? [r] : [];
    const tools = page.filter((p) => p.server === r.server).map((p) => p.tool);
    return tools.length || listEmpty ? [{ server: r.server, tools }] : [];
  });
}

interface ToolsQuery {
  server: string | null;
  name_contains: string | null;
}

/** An opaque cursor: the offset into the query's tool list, and the query it belongs to. */
function writeCursor(offset: number, query: ToolsQuery): string {
  return Buffer.from(JSON.stringify({ offset, ...query })).toString("base64url");
}

function readCursor(cursor: string, query: ToolsQuery): number {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    decoded = undefined;
  }
  const c = decoded as Partial<ToolsQuery & { offset: unknown }> | undefined;
  if (!c || typeof c !== "object" || typeof c.offset !== "number" || !Number.isInteger(c.offset) || c.offset < 0) {
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      "`cursor` is not a list_tools cursor; pass the next_cursor of the previous reply unchanged, or omit it for the first page",
    );
  }
  if (c.server !== query.server || c.name_contains !== query.name_contains) {
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `this cursor belongs to list_tools with server ${JSON.stringify(c.server)} and name_contains ${JSON.stringify(c.name_contains)}; call again with those, or omit cursor to start over`,
    );
  }
  return c.offset;
}

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
  async run(ctx, { server, tool: asked, args: askedArgs, timeout_ms, task_ttl_ms }, extra) {
    const { session, gateway } = ctx;
    assertArgumentsSize(askedArgs, gateway.settings.tools.maxArgumentsBytes);
    // A server that needs the person's consent first: the call is promoted below and goes on after it (session/consent-wait.ts).
    const consent = await session.connection(server).then(
      () => undefined,
      (err: unknown) => {
        const needed = consentNeeded(err);
        if (!needed) throw err;
        return needed;
      },
    );
    const principal = principalOf(extra.authInfo);
    // The caller's name of the tool (curation, docs/adr/0024) → the upstream's; from here on the upstream's names and the arguments as sent.
    const upstream = gateway.curation ? gateway.curation.upstreamName(principal, server, asked) : asked;
    if (!consent) await assertToolExists(ctx, server, upstream ?? asked, upstream === undefined);
    const tool = upstream ?? asked;
    const args = gateway.curation ? gateway.curation.arguments(principal, server, tool, askedArgs, asked) : askedArgs;
    // The decision pipeline (docs/adr/0022): a hidden tool is unknown, a denied call fails here.
    const decision = await gateway.governance?.authorize({
      principal,
      face: "meta",
      sessionId: session.id,
      server,
      tool,
      args,
      waitsForApproval: gateway.approvals !== undefined,
    });
    // Rate limits (docs/adr/0023): an empty bucket refuses the call here, before anything is sent upstream or a task is made.
    await gateway.rateLimits?.take({ principal, server, tool });
    // A person must approve it (docs/adr/0025): a promoted task at once, input_required until they decide.
    if (decision?.outcome === "approval_required" && gateway.approvals) {
      const { task, approval } = await gateway.approvals.open({
        session,
        decision,
        principal,
        face: "meta",
        server,
        tool,
        args,
        ttlMs: task_ttl_ms ?? gateway.settings.tasks.defaultTtlMs,
      });
      return promoted(
        json(
          {
            task_id: task.taskId,
            proxy_task: taskView(task),
            approval: { id: approval.id, rule: approval.ruleId, expires_at: new Date(approval.expiresAt).toISOString() },
          },
          `Calling '${asked}' on '${server}' needs a person's approval (approval ${approval.id}, rule ${approval.ruleId}). It waits as task ${task.taskId} (input_required) until an approver decides in the gateway's console; use get_task_result to wait for the result, or cancel_task to withdraw it.`,
        ),
      );
    }
    const timeoutMs = timeout_ms ?? gateway.settings.tools.defaultTimeoutMs;
    if (consent) return consentPromotion(ctx, consent, { server, asked, tool, args, ttlMs: task_ttl_ms, timeoutMs });
    const conn = await session.connection(server);
    const progress = forwardProgress(extra, extra._meta?.progressToken);
    // Tools the upstream only runs as tasks: the gateway drives the upstream task (design MF-9, TK-15).
    // Tools it can run as tasks, on an upstream that keeps them across a gateway restart, run as an
    // upstream task from the start, so that a promotion survives a restart (design MF-20).
    const support = await conn.taskSupport(tool);
    const keepUpstreamTask = support !== "forbidden" && keepsTasksAcrossRestart(ctx, server);
    const call = { name: tool, ...(args ? { arguments: args } : {}) };
    const outcome = await executeWithPromotion({
      ...(support === "required" || keepUpstreamTask
        ? { run: (o) => runUpstreamTaskToEnd(gateway, conn, call, { ...o, keepAlive: support === "required" }) }
        : {}),
      keepUpstreamTask,
      tasks: session.tasks,
      connection: conn,
      clock: gateway.clock,
      tool,
      args,
      timeoutMs,
      ttlMs: task_ttl_ms ?? gateway.settings.tasks.defaultTtlMs,
      callTimeoutMs: timeoutMs + gateway.settings.tasks.maxTtlMs,
      signal: extra.signal,
      onprogress: progress.onprogress,
    }).catch((err: unknown) => {
      // The grant was revoked or refused under a live connection: nothing was sent; the call waits for consent as below.
      const needed = consentNeeded(err);
      if (!needed) throw err;
      return needed;
    });
    await progress.flush();
    if (!("kind" in outcome)) return consentPromotion(ctx, outcome, { server, asked, tool, args, ttlMs: task_ttl_ms, timeoutMs });
    if (outcome.kind === "result") return outcome.result;
    const { task } = outcome;
    // The newest working tasks only: listing all of them made the N-th promotion an O(N) reply.
    const working = await session.tasks.list({ server, status: "working" });
    const elicitations = session.pending.list("elicitation", server);
    const sampling = session.pending.list("sampling", server);
    return promoted(
      json(
        {
          task_id: task.taskId,
          proxy_task: taskView(task),
          pending_on_server: {
            tasks: working.slice(-PENDING_TASKS_SHOWN).map(taskView),
            ...(working.length > PENDING_TASKS_SHOWN
              ? { tasks_total: working.length, tasks_note: `newest ${PENDING_TASKS_SHOWN} shown; list_tasks lists all` }
              : {}),
            elicitations_for_server: elicitations.map(elicitationSummary),
            sampling_requests_for_server: sampling.map(samplingSummary),
          },
        },
        `Tool call exceeded timeout (${timeoutMs}ms). Promoted to task ${task.taskId}. Use get_task_result to retrieve the result when ready and await_activity to wait for activity. ${whatTheServerWaitsFor(server, elicitations.length, sampling.length)}`,
      ),
    );
  },
});

/**
 * A call whose server needs the person's consent (issue 23): a task at once,
 * input_required while a URL elicitation with the authorization link waits in
 * the queue; once the grant is stored the call runs (the tool checked then).
 */
async function consentPromotion(
  ctx: MetaContext,
  consent: ConsentNeeded,
  c: { server: string; asked: string; tool: string; args: Record<string, unknown> | undefined; ttlMs: number | undefined; timeoutMs: number },
) {
  const { session, gateway } = ctx;
  const call = async (o: RunOptions) => {
    const conn = await session.connection(c.server);
    await assertToolExists(ctx, c.server, c.tool);
    return conn.callTool(c.tool, c.args, o);
  };
  const outcome = await executeWithPromotion({
    run: runAfterConsent({
      wait: {
        credentials: () => gateway.store.credentials,
        owner: grantOwner(session.principal),
        upstream: c.server,
        clock: gateway.clock,
        timeoutMs: gateway.settings.vault.flowTtlMs,
      },
      consent,
      pending: session.pending,
      newId: gateway.newId,
      then: call,
    }),
    tasks: session.tasks,
    connection: { name: c.server, callTool: () => Promise.reject(new Error("unused")), upstreamSessionId: undefined },
    clock: gateway.clock,
    tool: c.tool,
    args: c.args,
    timeoutMs: 0,
    ttlMs: c.ttlMs ?? gateway.settings.tasks.defaultTtlMs,
    callTimeoutMs: c.timeoutMs + gateway.settings.tasks.maxTtlMs,
  });
  if (outcome.kind === "result") return outcome.result;
  const { task } = outcome;
  const elicitations = session.pending.list("elicitation", c.server);
  return promoted(
    json(
      {
        task_id: task.taskId,
        proxy_task: taskView(task),
        authorization_url: consent.url,
        pending_on_server: { elicitations_for_server: elicitations.map(elicitationSummary) },
      },
      `Server '${c.server}' needs the person's authorization before '${c.asked}' can run. Ask them to open ${consent.url} as themselves (or to connect on the console's Connections page); the call then goes on by itself as task ${task.taskId} (input_required until then). The link is also a URL elicitation in get_elicitations. Use get_task_result or await_activity to wait, cancel_task to withdraw it.`,
    ),
  );
}

/**
 * The promotion's last sentence: the action the server's pending requests
 * need — elicitations are answered with respond_to_elicitation, sampling
 * requests (an LLM completion) with respond_to_sampling.
 */
function whatTheServerWaitsFor(server: string, elicitations: number, sampling: number): string {
  const waiting = [
    ...(elicitations ? [`${elicitations} elicitation(s) (user input): answer with respond_to_elicitation (details: get_elicitations)`] : []),
    ...(sampling ? [`${sampling} sampling request(s) (an LLM completion): answer with respond_to_sampling (details: get_sampling_requests)`] : []),
  ];
  if (waiting.length) return `Server '${server}' is waiting for ${waiting.join("; and ")}.`;
  return "If the server asks for user input (an elicitation), answer with respond_to_elicitation; if it asks for an LLM completion (a sampling request), with respond_to_sampling.";
}

/**
 * Whether `server`'s tasks outlive the gateway process: not a stdio child
 * (it ends with the gateway). The rule recovery applies at start
 * (src/server/recovery.ts keeps upstream tasks of non-stdio upstreams).
 */
function keepsTasksAcrossRestart({ gateway }: MetaContext, server: string): boolean {
  const entry = gateway.registry.get(server);
  return entry !== undefined && !isStdioConfig(entry.config);
}

async function assertToolExists({ session }: MetaContext, server: string, tool: string, renamedAway = false): Promise<void> {
  const conn = await session.connection(server);
  const tools = await conn.cachedTools();
  if (!renamedAway && tools.some((t) => t.name === tool)) return;
  throw new GatewayError(
    ErrorCodes.UNKNOWN_TOOL,
    `server '${server}' has no tool '${tool}'. Call list_tools with server '${server}' to see its ${tools.length} tools.`,
    { details: { server, tool } },
  );
}
