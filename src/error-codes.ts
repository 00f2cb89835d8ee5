/** The gateway's error codes and GatewayError, without the SDK (errors.ts re-exports them; the config loader imports this alone). */
export const ErrorCodes = {
  /** A value in the config file or CLI flags is invalid. */
  CONFIG_INVALID: "EMCP_CONFIG_INVALID",
  /** No upstream server with that name is configured. */
  UNKNOWN_SERVER: "EMCP_UNKNOWN_SERVER",
  /** A server with that name already exists. */
  SERVER_EXISTS: "EMCP_SERVER_EXISTS",
  /** The upstream (or this face) has no tool with that name. */
  UNKNOWN_TOOL: "EMCP_UNKNOWN_TOOL",
  /** The upstream (or this face) has no prompt with that name. */
  UNKNOWN_PROMPT: "EMCP_UNKNOWN_PROMPT",
  /** No upstream lists a resource or template matching that URI. */
  UNKNOWN_RESOURCE: "EMCP_UNKNOWN_RESOURCE",
  /** Two upstream items end up with the same name on the aggregated face. */
  NAME_COLLISION: "EMCP_NAME_COLLISION",
  /** The upstream could not be reached or is not connected. */
  UPSTREAM_UNAVAILABLE: "EMCP_UPSTREAM_UNAVAILABLE",
  /** The upstream answered a request with a JSON-RPC error, or did not answer in time. */
  UPSTREAM_ERROR: "EMCP_UPSTREAM_ERROR",
  /** Tool arguments (of a meta-tool or an upstream tool), a cursor or another input is invalid. */
  BAD_ARGUMENTS: "EMCP_BAD_ARGUMENTS",
  /** A 2026-07-28 retry's requestState was refused: changed, expired, used already, issued for another call, or its parked request is gone. */
  BAD_REQUEST_STATE: "EMCP_BAD_REQUEST_STATE",
  /** No task with that id exists in this session. */
  UNKNOWN_TASK: "EMCP_UNKNOWN_TASK",
  /** No timer with that id exists in this session (or it already ended). */
  UNKNOWN_TIMER: "EMCP_UNKNOWN_TIMER",
  /** The task already ended: it cannot be cancelled or changed. */
  TASK_ENDED: "EMCP_TASK_ENDED",
  /** The task ended without a result (failed, cancelled, expired). */
  TASK_NOT_COMPLETED: "EMCP_TASK_NOT_COMPLETED",
  /** A wait for the task's result ended and the task is still working. */
  TASK_STILL_WORKING: "EMCP_TASK_STILL_WORKING",
  /** No pending elicitation / sampling request with that id in this session. */
  UNKNOWN_REQUEST: "EMCP_UNKNOWN_REQUEST",
  /** The gateway's settings do not let clients do that (e.g. add_server with `command`); the message names the setting. */
  FORBIDDEN: "EMCP_FORBIDDEN",
  /** A limit (tasks, pending requests, sessions, child processes) was reached. */
  LIMIT_REACHED: "EMCP_LIMIT_REACHED",
  /** The caller (an OAuth principal) holds as many sessions or tasks as one principal may (gateway.sessions/tasks.maxPerPrincipal). */
  PRINCIPAL_LIMIT: "EMCP_PRINCIPAL_LIMIT",
  /** A gateway.rateLimits bucket of the call is empty; the message names the limit, details carry retryAfterSeconds and retry_after_ms. */
  RATE_LIMITED: "EMCP_RATE_LIMITED",
  /** gateway.governance refused the call (a deny rule, a Cedar policy, or a policy evaluation error); the message names the rule or policies. */
  POLICY_DENIED: "EMCP_POLICY_DENIED",
  /** gateway.governance says a person must approve the call, and this way of calling (e.g. run_code) cannot wait for the approval, so the call is refused. */
  APPROVAL_REQUIRED: "EMCP_APPROVAL_REQUIRED",
  /** A plain tools/call held for an approval (governance.approvals.holdMs) got no decision in time; the message names the approval, which is withdrawn. */
  APPROVAL_TIMEOUT: "EMCP_APPROVAL_TIMEOUT",
  /** A person rejected the call (or its approval expired); the message says who and why. */
  APPROVAL_REJECTED: "EMCP_APPROVAL_REJECTED",
  /** The approval asked to decide is decided, expired or unknown already. */
  APPROVAL_DECIDED: "EMCP_APPROVAL_DECIDED",
  /** Sent to a shared upstream: its server→client request cannot be tied to one session's call (docs/adr/0010). */
  UNATTRIBUTABLE: "EMCP_UNATTRIBUTABLE",
  /** A server→client request that belongs to no call of the client's could not reach it: it opened no standalone GET stream within gateway.http.standaloneStreamWaitMs (docs/adr/0047). */
  CLIENT_UNREACHABLE: "EMCP_CLIENT_UNREACHABLE",
  /** An upstream message (a response, request or notification) was larger than `gateway.upstream.maxMessageBytes`; the message names the bound. */
  RESPONSE_TOO_LARGE: "EMCP_RESPONSE_TOO_LARGE",
  /** The state store (gateway.store) cannot be opened, read or written; the message names the file. */
  STORE_UNAVAILABLE: "EMCP_STORE_UNAVAILABLE",
  /** A run_code script threw, did not compile, or waited on a promise nothing could settle; the message says where. */
  CODE_ERROR: "EMCP_CODE_ERROR",
  /** A run_code script went past one of its bounds (gateway.codeMode: wall time, CPU time, memory, stack, calls, output); the message names the bound and the setting. */
  CODE_LIMIT: "EMCP_CODE_LIMIT",
  /** The client cancelled the request. */
  CANCELLED: "EMCP_CANCELLED",
  /** A console OpenID Connect login could not be completed (unknown or expired state, a refused code, a bad ID token, no role). */
  CONSOLE_LOGIN_FAILED: "EMCP_CONSOLE_LOGIN_FAILED",
  /** A stored upstream credential cannot be opened: its vault key is not configured (gateway.vault.keys), or the value was altered. */
  VAULT_UNAVAILABLE: "EMCP_VAULT_UNAVAILABLE",
  /** The upstream needs the caller's authorization (OAuth) first; details carry authorizationUrl to open. */
  CONSENT_REQUIRED: "EMCP_CONSENT_REQUIRED",
  /** Authorizing at an upstream's OAuth server failed (discovery, registration, no PKCE S256, a refused code or refresh, a bad callback). */
  UPSTREAM_AUTH_FAILED: "EMCP_UPSTREAM_AUTH_FAILED",
  /** The session or gateway is closing. */
  CLOSED: "EMCP_CLOSED",
  /** An unexpected failure: a bug. */
  INTERNAL: "EMCP_INTERNAL",
} as const;

export type ErrorCodeName = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export interface GatewayErrorOptions {
  /** Structured facts for callers (ids, names, limits); sent as JSON-RPC `data` next to `code`. */
  details?: Record<string, unknown> | undefined;
  /** The error this one wraps (an upstream's JSON-RPC error, an I/O error, ...). */
  cause?: unknown;
  /**
   * Pins the JSON-RPC code where the spec fixes one (default: by `code`, see
   * RPC_CODES). Setting it also means the gateway answers in its own words: an
   * upstream error in `cause` is then not passed through verbatim.
   */
  rpcCode?: number | undefined;
}

export class GatewayError extends Error {
  override readonly name = "GatewayError";
  readonly details: Record<string, unknown> | undefined;
  readonly rpcCode: number | undefined;

  constructor(
    readonly code: ErrorCodeName,
    message: string,
    options: GatewayErrorOptions = {},
  ) {
    super(message, "cause" in options ? { cause: options.cause } : undefined);
    this.details = options.details;
    this.rpcCode = options.rpcCode;
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return networkFailure(err) ?? err.message;
  return typeof err === "string" ? err : JSON.stringify(err);
}

/**
 * fetch() (undici) says only "fetch failed" and keeps the reason in `cause`:
 * name it (`connection refused at 127.0.0.1:9`), as an operator would ask.
 */
function networkFailure(err: Error): string | undefined {
  if (err.message !== "fetch failed" || !(err.cause instanceof Error)) return undefined;
  const cause = err.cause as Error & { code?: string; address?: string; port?: number; hostname?: string };
  const host = cause.address?.includes(":") ? `[${cause.address}]` : cause.address;
  const at = host === undefined ? "" : ` at ${host}${cause.port === undefined ? "" : `:${cause.port}`}`;
  switch (cause.code) {
    case "ECONNREFUSED":
      return `connection refused${at} (nothing listens there; is the server running?)`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `host not found: ${cause.hostname ?? cause.message} (check the URL's host name)`;
    case "ECONNRESET":
      return `connection reset${at}`;
    case "ETIMEDOUT":
    case "UND_ERR_CONNECT_TIMEOUT":
      return `connection timed out${at}`;
    default:
      return `${err.message}: ${errorMessage(cause)}`;
  }
}
