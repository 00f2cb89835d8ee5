/**
 * The access log: one pino line at info per tool call, on every face —
 * `{ msg: "tool_call", face, server, tool, durationMs, outcome, sessionHash, principalHash }`
 * (meta face: `tool` is the meta-tool, and execute_tool adds `upstreamTool`).
 * Off with `gateway.accessLog: false` (CLI `--no-access-log`). The session is
 * named by its hash only: its id is a bearer secret (logging.ts). A call
 * that reached an upstream is also recorded for the console's Activity page
 * (gateway.activity, session/activity-log.ts), whatever accessLog says.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { sessionHash } from "../logging.js";
import type { GatewayContext } from "../session/gateway-context.js";
import type { Session } from "../session/session.js";

export type ToolCallOutcome = "ok" | "error" | "promoted" | "cancelled";

export interface ToolCallEntry {
  /** "meta" for /mcp, "server" for /servers/<name>/mcp, "all" for /all/mcp, "virtual" for /v/<name>/mcp. */
  face: "meta" | "server" | "all" | "virtual";
  /** The upstream the call went to, when there is one. */
  server?: string | undefined;
  tool: string;
  upstreamTool?: string | undefined;
  /** The caller's principal hash (src/auth/principal.ts), when the request carried one. */
  principalHash?: string | undefined;
}

/**
 * Runs one tool call and logs its line when it ends, however it ends.
 * `outcome` classifies a returned result; a throw is "error" (or "cancelled"
 * when the client cancelled the request).
 */
export async function logToolCall<T>(
  gateway: GatewayContext,
  session: Session,
  entry: ToolCallEntry,
  signal: AbortSignal,
  run: () => Promise<T>,
  outcome: (result: T) => ToolCallOutcome,
): Promise<T> {
  const activity = gateway.activity?.enabled ? gateway.activity : undefined;
  if (!gateway.settings.accessLog && !activity) return run();
  const started = gateway.clock.now();
  let result: ToolCallOutcome = "error";
  try {
    const value = await run();
    result = outcome(value);
    return value;
  } finally {
    if (signal.aborted && result !== "promoted") result = "cancelled";
    const durationMs = gateway.clock.now() - started;
    // The console's Activity page (session/activity-log.ts): calls that reached an upstream, queued, never awaited.
    if (entry.server !== undefined)
      activity?.record({
        kind: "tool_call",
        outcome: result,
        server: entry.server,
        tool: entry.upstreamTool ?? entry.tool,
        sessionHash: sessionHash(session.id),
        ...(entry.principalHash !== undefined ? { principalHash: entry.principalHash } : {}),
        durationMs,
        summary: `${entry.face} face${entry.upstreamTool !== undefined ? ` (${entry.tool})` : ""}`,
      });
    if (gateway.settings.accessLog)
      gateway.logger.info(
        {
          face: entry.face,
          ...(entry.server !== undefined ? { server: entry.server } : {}),
          tool: entry.tool,
          ...(entry.upstreamTool !== undefined ? { upstreamTool: entry.upstreamTool } : {}),
          durationMs,
          outcome: result,
          sessionHash: sessionHash(session.id),
          ...(entry.principalHash !== undefined ? { principalHash: entry.principalHash } : {}),
        },
        "tool_call",
      );
  }
}

/** A CallToolResult's outcome: an `isError` result is an error. */
export function resultOutcome(result: CallToolResult): ToolCallOutcome {
  return result.isError === true ? "error" : "ok";
}
