/**
 * The gateway's one error domain and its one boundary.
 *
 * - `GatewayError` is the only error gateway code throws: a stable string code
 *   (the catalogue below, documented in docs/errors.md and checked against it
 *   by test/unit/errors-catalog.test.ts), a message that says what was wrong and
 *   what to do, optional `details`, and the error it wraps as ES2022 `cause`.
 * - `toJsonRpcError()` is the one mapping to JSON-RPC (transparent faces, the
 *   receiver-task store the SDK answers upstreams from, HTTP error bodies);
 *   `toToolErrorText()` is the text of the meta face's `isError` results, from
 *   the same normalisation (`toGatewayError()`).
 * - This is the one module that knows the SDK's error class: what an upstream
 *   answered (`McpError` from the SDK client) is classified here.
 */
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "./logging.js";
import { ErrorCodes, GatewayError, errorMessage, type ErrorCodeName } from "./error-codes.js";

export { ErrorCodes, GatewayError, errorMessage, type ErrorCodeName, type GatewayErrorOptions } from "./error-codes.js";

/**
 * The JSON-RPC code of each gateway error: InvalidParams for bad input and
 * unknown names, ids and ended tasks (as the MCP spec has it for tasks/*),
 * InvalidRequest for what the settings forbid, InternalError otherwise. A Record over every code, so a new code must choose.
 */
const RPC_CODES: Record<ErrorCodeName, number> = {
  EMCP_CONFIG_INVALID: ErrorCode.InvalidParams,
  EMCP_UNKNOWN_SERVER: ErrorCode.InvalidParams,
  EMCP_SERVER_EXISTS: ErrorCode.InvalidParams,
  EMCP_UNKNOWN_TOOL: ErrorCode.InvalidParams,
  EMCP_UNKNOWN_PROMPT: ErrorCode.InvalidParams,
  EMCP_UNKNOWN_RESOURCE: ErrorCode.InvalidParams,
  EMCP_NAME_COLLISION: ErrorCode.InternalError,
  EMCP_UPSTREAM_UNAVAILABLE: ErrorCode.InternalError,
  EMCP_UPSTREAM_ERROR: ErrorCode.InternalError,
  EMCP_BAD_ARGUMENTS: ErrorCode.InvalidParams,
  EMCP_BAD_REQUEST_STATE: ErrorCode.InvalidParams,
  EMCP_UNKNOWN_TASK: ErrorCode.InvalidParams,
  EMCP_UNKNOWN_TIMER: ErrorCode.InvalidParams,
  EMCP_TASK_ENDED: ErrorCode.InvalidParams,
  EMCP_TASK_NOT_COMPLETED: ErrorCode.InternalError,
  EMCP_TASK_STILL_WORKING: ErrorCode.InternalError,
  EMCP_UNKNOWN_REQUEST: ErrorCode.InvalidParams,
  EMCP_FORBIDDEN: ErrorCode.InvalidRequest,
  EMCP_LIMIT_REACHED: ErrorCode.InternalError,
  EMCP_PRINCIPAL_LIMIT: ErrorCode.InternalError,
  EMCP_RATE_LIMITED: ErrorCode.InternalError,
  EMCP_POLICY_DENIED: ErrorCode.InvalidRequest,
  EMCP_APPROVAL_REQUIRED: ErrorCode.InvalidRequest,
  EMCP_APPROVAL_TIMEOUT: ErrorCode.InvalidRequest,
  EMCP_APPROVAL_REJECTED: ErrorCode.InvalidRequest,
  EMCP_APPROVAL_DECIDED: ErrorCode.InvalidRequest,
  EMCP_UNATTRIBUTABLE: ErrorCode.InvalidRequest,
  EMCP_CLIENT_UNREACHABLE: ErrorCode.InternalError,
  EMCP_RESPONSE_TOO_LARGE: ErrorCode.InternalError,
  EMCP_STORE_UNAVAILABLE: ErrorCode.InternalError,
  EMCP_CODE_ERROR: ErrorCode.InvalidParams,
  EMCP_CODE_LIMIT: ErrorCode.InternalError,
  EMCP_CANCELLED: ErrorCode.InternalError,
  EMCP_CONSOLE_LOGIN_FAILED: ErrorCode.InvalidRequest,
  EMCP_VAULT_UNAVAILABLE: ErrorCode.InternalError,
  EMCP_CONSENT_REQUIRED: ErrorCode.InvalidRequest,
  EMCP_UPSTREAM_AUTH_FAILED: ErrorCode.InternalError,
  EMCP_CLOSED: ErrorCode.InternalError,
  EMCP_INTERNAL: ErrorCode.InternalError,
};

/**
 * A JSON-RPC error as sent: `message` is the wire text exactly (McpError's
 * constructor would prefix "MCP error <code>: "). Made only by toJsonRpcError,
 * which returns it unchanged when it meets one again.
 */
class JsonRpcReply extends McpError {
  constructor(
    code: number,
    message: string,
    data: unknown,
    /** The gateway error it came from (none for an upstream's own error). */
    readonly source?: GatewayError,
  ) {
    super(code, message, data);
    this.message = message;
  }
}

/**
 * The one mapping to JSON-RPC, for everything the gateway answers with a
 * JSON-RPC error (the SDK's server handlers need an McpError thrown):
 * - an upstream's own JSON-RPC error passes through verbatim (code, message,
 *   data) as the SDK client saw it: a raw McpError, or a
 *   GatewayError(UPSTREAM_ERROR) whose `cause` is one and that pins no `rpcCode`;
 * - a GatewayError becomes `{ code: RPC_CODES[code] | rpcCode, message:
 *   "EMCP_X: message", data: { ...details, code: "EMCP_X" } }`;
 * - anything else is a bug: -32603 "EMCP_INTERNAL: ..." (logged when a logger is given).
 */
export function toJsonRpcError(err: unknown, logger?: Logger): McpError {
  if (err instanceof JsonRpcReply) return err;
  err = deliveredErrorOf(err) ?? err;
  const upstream = upstreamAnswerOf(err);
  if (upstream) return new JsonRpcReply(upstream.code, withoutSdkPrefix(upstream.message), upstream.data);
  const g = toGatewayError(err, logger);
  return new JsonRpcReply(g.rpcCode ?? RPC_CODES[g.code], `${g.code}: ${g.message}`, { ...g.details, code: g.code }, g);
}

/** The text a tool-only client reads in an `isError` result: `EMCP_X: message`. */
export function toToolErrorText(err: unknown, logger?: Logger): string {
  const g = toGatewayError(err, logger);
  return `${g.code}: ${g.message}`;
}

/**
 * Any thrown value as a GatewayError: itself; an McpError (the SDK client's
 * view of an upstream) classified as UPSTREAM_*; anything else INTERNAL.
 */
export function toGatewayError(err: unknown, logger?: Logger): GatewayError {
  const delivered = deliveredErrorOf(err);
  if (delivered) return delivered;
  if (err instanceof GatewayError) return err;
  if (err instanceof JsonRpcReply && err.source) return err.source;
  if (err instanceof McpError) return classifyUpstream(err, "the upstream");
  logger?.error({ err }, "internal_error");
  return new GatewayError(ErrorCodes.INTERNAL, `${errorMessage(err)} (an unexpected failure; please report it)`, { cause: err });
}

/** Maps a failed upstream call to a GatewayError with a stable code; the failure is its cause. */
export function upstreamCallError(server: string, tool: string, err: unknown): GatewayError {
  const delivered = deliveredErrorOf(err);
  if (delivered) return delivered;
  if (err instanceof GatewayError) return err;
  if (err instanceof McpError) return classifyUpstream(err, `upstream '${server}'`, tool, { server });
  return new GatewayError(ErrorCodes.UPSTREAM_ERROR, `calling '${tool}' on '${server}' failed: ${errorMessage(err)}`, {
    details: { server },
    cause: err,
  });
}

function classifyUpstream(err: McpError, who: string, what?: string, details: Record<string, unknown> = {}): GatewayError {
  const during = what === undefined ? "" : ` during '${what}'`;
  if (err.code === ErrorCode.ConnectionClosed) {
    return new GatewayError(ErrorCodes.UPSTREAM_UNAVAILABLE, `${who} closed the connection${during}`, { details, cause: err });
  }
  if (err.code === ErrorCode.RequestTimeout) {
    return new GatewayError(ErrorCodes.UPSTREAM_ERROR, `${who} did not answer${what === undefined ? "" : ` '${what}'`} in time: ${err.message}`, {
      details,
      cause: err,
    });
  }
  const answered = what === undefined ? "answered" : `answered '${what}'`;
  return new GatewayError(ErrorCodes.UPSTREAM_ERROR, `${who} ${answered} with error ${err.code}: ${err.message}`, {
    details: { ...details, upstreamCode: err.code },
    cause: err,
  });
}

/** The JSON-RPC code of an error the SDK raised (an upstream's answer, a timeout, a closed connection); undefined for anything else. */
export function mcpErrorCode(err: unknown): number | undefined {
  return err instanceof McpError ? err.code : undefined;
}

/** A JSON-RPC error the upstream itself answered (not a timeout or a dropped connection). */
export function isUpstreamAnswer(err: unknown): err is McpError {
  return (
    err instanceof McpError &&
    !(err instanceof JsonRpcReply) &&
    err.code !== ErrorCode.ConnectionClosed &&
    err.code !== ErrorCode.RequestTimeout &&
    deliveredErrorOf(err) === undefined
  );
}

/**
 * Gateway errors handed to the SDK client as an upstream's error response
 * (an oversized message, src/mcp/error-response.ts), keyed by the `data`
 * object the SDK passes by reference into the McpError it rejects with.
 */
const deliveredErrors = new WeakMap<object, GatewayError>();

/** The JSON-RPC `data` of a response that fails a request with `err`; the McpError the SDK makes of it maps back to `err`. */
export function deliveredErrorData(err: GatewayError): Record<string, unknown> {
  const data = { ...err.details, code: err.code };
  deliveredErrors.set(data, err);
  return data;
}

/** The gateway error an McpError stands for when the gateway delivered it (deliveredErrorData), or one wrapping it. */
function deliveredErrorOf(err: unknown): GatewayError | undefined {
  const mcp = err instanceof GatewayError && err.cause instanceof McpError ? err.cause : err;
  if (!(mcp instanceof McpError) || typeof mcp.data !== "object" || mcp.data === null) return undefined;
  return deliveredErrors.get(mcp.data);
}

/** The upstream's own error to pass through verbatim, if `err` is or wraps one. */
function upstreamAnswerOf(err: unknown): McpError | undefined {
  if (err instanceof McpError) return err;
  const cause = err instanceof GatewayError && err.code === ErrorCodes.UPSTREAM_ERROR && err.rpcCode === undefined ? err.cause : undefined;
  if (cause instanceof McpError && !(cause instanceof JsonRpcReply)) return cause;
  return undefined;
}

/** A JSON-RPC error as the upstream sent it, as plain JSON (a task record keeps it so tasks/result can return it unchanged). */
export interface RpcErrorRecord {
  code: number;
  message: string;
  data?: unknown;
}

/**
 * Keeps the JSON-RPC error the SDK client saw (its text without the client's
 * prefix) as plain JSON for a task record, so tasks/result can return it as a
 * direct call would have; undefined for anything else. (An upstream may answer
 * -32000 itself, so ConnectionClosed cannot be told apart here.)
 */
export function rpcErrorRecordOf(err: unknown): RpcErrorRecord | undefined {
  if (!(err instanceof McpError) || err instanceof JsonRpcReply) return undefined;
  return { code: err.code, message: withoutSdkPrefix(err.message), ...(err.data !== undefined ? { data: err.data } : {}) };
}

/** The upstream error a record kept, as the McpError the SDK client had made of it (a `cause` for GatewayError). */
export function rpcErrorFromRecord(record: RpcErrorRecord): McpError {
  return new McpError(record.code, record.message, record.data);
}

/** The SDK client prefixes "MCP error <code>: " to an upstream's message; the wire text is without it. */
function withoutSdkPrefix(message: string): string {
  return message.replace(/^MCP error -?\d+: /, "");
}

/** Refuses tool arguments larger than `maxBytes` (as JSON) with BAD_ARGUMENTS. */
export function assertArgumentsSize(args: Record<string, unknown> | undefined, maxBytes: number): void {
  if (!args) return;
  let json: string;
  try {
    json = JSON.stringify(args);
  } catch (err) {
    // Arguments nested thousands deep overflow the stack (over HTTP the edge refuses them first: gateway.http.maxJsonDepth).
    if (!(err instanceof RangeError)) throw err;
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      "the tool arguments are nested too deeply to be measured or forwarded; flatten them, or pass the data by reference",
    );
  }
  const size = Buffer.byteLength(json);
  if (size > maxBytes) {
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `the tool arguments are ${size} bytes of JSON, more than gateway.tools.maxArgumentsBytes (${maxBytes}); pass large data by reference (a resource URI or file path) instead`,
      { details: { size, maxBytes } },
    );
  }
}

/** An upstream's error answer, a timeout or the connection's end as the SDK client rejects a request with it, for requests sent past the client (upstream/raw-calls.ts). */
export function upstreamRejection(code: number, message: string, data?: unknown): McpError {
  return new McpError(code, message, data);
}

/** What the SDK's client rejects a cancelled request with: the reason when it is the SDK's error, else that error (RequestTimeout) with the reason's text. */
export function cancelledRejection(reason: unknown): McpError {
  return reason instanceof McpError ? reason : new McpError(ErrorCode.RequestTimeout, String(reason));
}
