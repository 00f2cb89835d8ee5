/**
 * GatewayError: every failure the gateway reports on purpose carries a stable
 * string code (documented in docs/errors.md) plus a message that says what was
 * wrong and how to fix it. Unknown failures become JSON-RPC -32603 / an
 * `isError` tool result at one boundary (`toToolError`).
 */
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

export const ErrorCodes = {
  /** A value in the config file or CLI flags is invalid. */
  CONFIG_INVALID: "EMCP_CONFIG_INVALID",
  /** No upstream server with that name is configured. */
  UNKNOWN_SERVER: "EMCP_UNKNOWN_SERVER",
  /** A server with that name already exists. */
  SERVER_EXISTS: "EMCP_SERVER_EXISTS",
  /** The upstream has no tool/prompt/resource with that name. */
  UNKNOWN_TOOL: "EMCP_UNKNOWN_TOOL",
  /** The upstream could not be reached or is not connected. */
  UPSTREAM_UNAVAILABLE: "EMCP_UPSTREAM_UNAVAILABLE",
  /** The upstream answered a request with a JSON-RPC error. */
  UPSTREAM_ERROR: "EMCP_UPSTREAM_ERROR",
  /** Tool arguments (of a meta-tool or an upstream tool) are invalid. */
  BAD_ARGUMENTS: "EMCP_BAD_ARGUMENTS",
  /** No task with that id exists in this session. */
  UNKNOWN_TASK: "EMCP_UNKNOWN_TASK",
  /** The task ended without a result (failed, cancelled, expired). */
  TASK_NOT_COMPLETED: "EMCP_TASK_NOT_COMPLETED",
  /** get_task_result waited timeout_ms and the task is still working. */
  TASK_STILL_WORKING: "EMCP_TASK_STILL_WORKING",
  /** No pending elicitation / sampling request with that id in this session. */
  UNKNOWN_REQUEST: "EMCP_UNKNOWN_REQUEST",
  /** A per-session limit (tasks, pending requests) was reached. */
  LIMIT_REACHED: "EMCP_LIMIT_REACHED",
  /** The client cancelled the request. */
  CANCELLED: "EMCP_CANCELLED",
  /** The session or gateway is closing. */
  CLOSED: "EMCP_CLOSED",
} as const;

export type ErrorCodeName = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export class GatewayError extends Error {
  override readonly name = "GatewayError";
  constructor(
    readonly code: ErrorCodeName,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === "string" ? err : JSON.stringify(err);
}

/** Maps any thrown value to the JSON-RPC error a downstream client sees. */
export function toMcpError(err: unknown): McpError {
  if (err instanceof McpError) return err;
  if (err instanceof GatewayError) {
    const code =
      err.code === ErrorCodes.BAD_ARGUMENTS ||
      err.code === ErrorCodes.UNKNOWN_SERVER ||
      err.code === ErrorCodes.UNKNOWN_TOOL ||
      err.code === ErrorCodes.UNKNOWN_TASK
        ? ErrorCode.InvalidParams
        : ErrorCode.InternalError;
    return new McpError(code, `${err.code}: ${err.message}`, { code: err.code, ...err.details });
  }
  return new McpError(ErrorCode.InternalError, errorMessage(err));
}

/** Refuses tool arguments larger than `maxBytes` (as JSON) with BAD_ARGUMENTS. */
export function assertArgumentsSize(args: Record<string, unknown> | undefined, maxBytes: number): void {
  if (!args) return;
  const size = Buffer.byteLength(JSON.stringify(args));
  if (size > maxBytes) {
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `the tool arguments are ${size} bytes of JSON, more than gateway.tools.maxArgumentsBytes (${maxBytes}); pass large data by reference (a resource URI or file path) instead`,
      { size, maxBytes },
    );
  }
}

/** The text a tool-only client reads in an `isError` result. */
export function describeError(err: unknown): string {
  if (err instanceof GatewayError) return `${err.code}: ${err.message}`;
  if (err instanceof McpError) return `${ErrorCodes.UPSTREAM_ERROR}: ${err.message}`;
  return `EMCP_INTERNAL: ${errorMessage(err)}`;
}
