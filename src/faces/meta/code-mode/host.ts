/**
 * The host side of the guest's `mcp` object: each function is the meta-tool
 * of the same job (execute_tool, read_resource, get_prompt, list_tools, search_tools) run
 * for the script's session and principal, with its own input validation and
 * access-log line, so governance, rate limits, decision records, tracing and
 * metrics apply to a script's call exactly as to the agent's own. Every call
 * is recorded for the reply's `calls`.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { principalOf } from "../../../auth/principal.js";
import { ErrorCodes, GatewayError, toGatewayError } from "../../../errors.js";
import { logToolCall, resultOutcome } from "../../access-log.js";
import { wasPromoted, type Extra, type MetaContext, type MetaTool } from "../define.js";
import { getPrompt } from "../tools/prompts.js";
import { readResource } from "../tools/resources.js";
import { searchToolsTool } from "../tools/search.js";
import { executeTool, listTools } from "../tools/tools.js";
import type { HostOps } from "./sandbox.js";

/** One mcp.* call of a run, as the reply lists it. */
export interface CallRecord {
  fn: string;
  server?: string | undefined;
  /** The tool, URI or prompt the call named. */
  target?: string | undefined;
  outcome: "ok" | "error" | "promoted";
  /** The failure's EMCP_* code. */
  code?: string | undefined;
  duration_ms: number;
}

/**
 * A script's tool call is not promoted on its own (the run is what gets promoted): it waits up to
 * execute_tool's largest timeout_ms, past the run's wall time (at most 30 min), where the run stops and cancels it.
 */
const CALL_TIMEOUT_MS = 3_600_000;
/** list_tools' largest page. */
const LIST_PAGE = 500;

export interface HostOptions {
  ctx: MetaContext;
  /** The run_code request's extra (its principal); its progress token is not used after the reply. */
  extra: Extra;
  calls: CallRecord[];
}

export function mcpHostOps(o: HostOptions): HostOps {
  return {
    call: ([server, tool, args], signal) => invoke(o, executeTool, { server, tool, args, timeout_ms: CALL_TIMEOUT_MS }, signal, "call", tool),
    readResource: async ([server, uri], signal) => unwrap(await invoke(o, readResource, { server, uri }, signal, "readResource", uri)),
    getPrompt: async ([server, name, args], signal) =>
      unwrap(await invoke(o, getPrompt, { server, name, ...(isEmpty(args) ? {} : { arguments: args }) }, signal, "getPrompt", name)),
    search: async ([query, options], signal) => {
      const extra = options !== null && typeof options === "object" && !Array.isArray(options) ? options : {};
      return unwrap(await invoke(o, searchToolsTool, { query, ...extra }, signal, "search", query));
    },
    listTools: async ([server], signal) => {
      const rows: unknown[] = [];
      let cursor: string | undefined;
      do {
        const page = await invoke(
          o,
          listTools,
          { ...(server == null ? {} : { server }), limit: LIST_PAGE, ...(cursor ? { cursor } : {}) },
          signal,
          "listTools",
        );
        const sc = page.structuredContent as { servers?: unknown[]; next_cursor?: string } | undefined;
        rows.push(...(sc?.servers ?? []));
        cursor = sc?.next_cursor;
      } while (cursor !== undefined);
      return rows;
    },
  };
}

/**
 * Runs one meta-tool for the script as the registrar would for the agent:
 * strict input, the access-log line, the tool's own run. A gateway error is
 * thrown (the guest gets it as an Error with `code`); an upstream tool's own
 * `isError` result is returned as it came.
 */
async function invoke(
  o: HostOptions,
  tool: MetaTool,
  raw: Record<string, unknown>,
  signal: AbortSignal,
  fn: string,
  target?: unknown,
): Promise<CallToolResult> {
  const { ctx } = o;
  const started = ctx.gateway.clock.now();
  const server = typeof raw.server === "string" ? raw.server : undefined;
  const record: CallRecord = {
    fn,
    ...(server !== undefined ? { server } : {}),
    ...(typeof target === "string" ? { target } : {}),
    outcome: "error",
    duration_ms: 0,
  };
  o.calls.push(record);
  try {
    const parsed = z.strictObject(tool.input).safeParse(raw);
    if (!parsed.success) {
      throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `mcp.${fn}: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`);
    }
    // The request's extra without its progress token (the run_code reply may be long gone) and with the run's signal.
    const { _meta: _unused, ...rest } = o.extra;
    const extra: Extra = { ...rest, signal };
    const entry = {
      face: "meta" as const,
      server,
      tool: tool.name,
      upstreamTool: tool === executeTool && typeof target === "string" ? target : undefined,
      principalHash: principalOf(o.extra.authInfo)?.hash,
    };
    const result = await logToolCall(
      ctx.gateway,
      ctx.session,
      entry,
      signal,
      () => tool.run(ctx, parsed.data as never, extra),
      (r) => (wasPromoted(r) ? "promoted" : resultOutcome(r)),
    );
    record.outcome = wasPromoted(result) ? "promoted" : "ok";
    return result;
  } catch (err) {
    const g = toGatewayError(err, ctx.session.logger);
    record.code = g.code;
    throw g;
  } finally {
    record.duration_ms = ctx.gateway.clock.now() - started;
  }
}

/** An upstream payload (payload(): one JSON text block) or a gateway-made value, as a plain value. */
function unwrap(result: CallToolResult): unknown {
  if (result.structuredContent !== undefined) return result.structuredContent;
  const first = result.content[0];
  return first?.type === "text" ? (JSON.parse(first.text) as unknown) : null;
}

function isEmpty(value: unknown): boolean {
  return value == null || (typeof value === "object" && Object.keys(value).length === 0);
}
