/**
 * What the OpenTelemetry MCP semantic conventions (gen-ai/mcp.md, status
 * "development") call the parts of one JSON-RPC request: the span name
 * `{mcp.method.name} {target}`, its attributes, and `error.type` of its
 * response. Shared by the server tap (requests the gateway serves) and the
 * client tap (requests it sends upstream).
 */
import type { Attributes } from "@opentelemetry/api";
import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";

/** Histogram buckets (seconds) the conventions recommend for MCP operation and session durations. */
export const DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

/** `network.transport`: stdio is a pipe, HTTP is TCP. */
export type NetworkTransport = "pipe" | "tcp";

/** The MCP request methods; any other method is labelled "other" in metrics (a client chooses method names). */
const KNOWN_METHODS = new Set([
  "initialize",
  "ping",
  "tools/list",
  "tools/call",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "resources/subscribe",
  "resources/unsubscribe",
  "prompts/list",
  "prompts/get",
  "completion/complete",
  "logging/setLevel",
  "tasks/get",
  "tasks/result",
  "tasks/cancel",
  "tasks/list",
  "sampling/createMessage",
  "elicitation/create",
  "roots/list",
]);

/** `mcp.method.name` as a metric label: the method when MCP defines it, else "other". */
export function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : "other";
}

/** A JSON-RPC request, as a tap sees it. */
export interface RequestInfo {
  id: RequestId;
  method: string;
  params: unknown;
}

/** A request (method and id), else undefined (a notification or a response). */
export function requestOf(message: JSONRPCMessage): RequestInfo | undefined {
  if (!("method" in message) || !("id" in message)) return undefined;
  const id = message.id;
  if (typeof id !== "string" && typeof id !== "number") return undefined;
  return { id, method: message.method, params: "params" in message ? message.params : undefined };
}

/** A response's id and `error.type` (undefined when it succeeded), else undefined. */
export function responseOf(message: JSONRPCMessage): { id: RequestId; errorType: string | undefined; errorCode?: number } | undefined {
  if (!("id" in message) || "method" in message) return undefined;
  const id = message.id;
  if (typeof id !== "string" && typeof id !== "number") return undefined;
  if ("error" in message) return { id, errorType: String(message.error.code), errorCode: message.error.code };
  if ("result" in message) {
    const isError = (message.result as { isError?: unknown }).isError === true;
    return { id, errorType: isError ? "tool_error" : undefined };
  }
  return undefined;
}

/** The id of the request a `notifications/cancelled` names, else undefined. */
export function cancelledId(message: JSONRPCMessage): RequestId | undefined {
  if (!("method" in message) || message.method !== "notifications/cancelled" || "id" in message) return undefined;
  const id = (message.params as { requestId?: unknown } | undefined)?.requestId;
  return typeof id === "string" || typeof id === "number" ? id : undefined;
}

function stringParam(params: unknown, key: string): string | undefined {
  const value = params && typeof params === "object" ? (params as Record<string, unknown>)[key] : undefined;
  return typeof value === "string" ? value : undefined;
}

/** The tool a tools/call names. */
export function toolNameOf(request: RequestInfo): string | undefined {
  return request.method === "tools/call" ? stringParam(request.params, "name") : undefined;
}

/** `{mcp.method.name} {target}`: the tool, prompt or resource a request is about, when it names one. */
export function spanName(request: RequestInfo): string {
  const target = targetOf(request);
  return target === undefined ? request.method : `${request.method} ${target}`;
}

function targetOf(request: RequestInfo): string | undefined {
  switch (request.method) {
    case "tools/call":
    case "prompts/get":
      return stringParam(request.params, "name");
    case "resources/read":
    case "resources/subscribe":
    case "resources/unsubscribe":
      return stringParam(request.params, "uri");
    default:
      return undefined;
  }
}

/** The span attributes a request has from the start. */
export function requestAttributes(request: RequestInfo, transport: NetworkTransport): Attributes {
  const attributes: Attributes = {
    "mcp.method.name": request.method,
    "jsonrpc.request.id": String(request.id),
    "network.transport": transport,
  };
  switch (request.method) {
    case "tools/call": {
      const tool = stringParam(request.params, "name");
      if (tool !== undefined) attributes["gen_ai.tool.name"] = tool;
      attributes["gen_ai.operation.name"] = "execute_tool";
      break;
    }
    case "prompts/get": {
      const prompt = stringParam(request.params, "name");
      if (prompt !== undefined) attributes["gen_ai.prompt.name"] = prompt;
      break;
    }
    case "resources/read":
    case "resources/subscribe":
    case "resources/unsubscribe": {
      const uri = stringParam(request.params, "uri");
      if (uri !== undefined) attributes["mcp.resource.uri"] = uri;
      break;
    }
  }
  return attributes;
}
