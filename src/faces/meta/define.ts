/**
 * One definition per meta-tool; createMetaServer() registers each once, and
 * the same McpServer serves stdio and HTTP. Handlers return plain results or
 * throw GatewayError; the registrar turns errors into `isError` results and
 * appends the session envelope (events + pending client actions).
 *
 * Gateway-made results (json()) carry their value twice: as a JSON text block
 * for LLMs and as `structuredContent` for programs (outputs.ts has the
 * schemas). Upstream payloads (payload(), an upstream tool's own result) are
 * passed on as they came.
 */
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";
import type { GatewayContext } from "../../session/gateway-context.js";
import type { Session } from "../../session/session.js";

export interface MetaContext {
  session: Session;
  gateway: GatewayContext;
}

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface MetaTool<S extends z.ZodRawShape = z.ZodRawShape> {
  name: string;
  title: string;
  description: string;
  input: S;
  annotations?: ToolAnnotations;
  /** await_activity delivers events itself. @default true */
  envelope?: boolean;
  /**
   * Whether the gateway's settings offer this tool (run_code: gateway.codeMode.enabled). The gateway's
   * alone, never a session's: each set of enabled tools has one tools/list per process (ADR 0052). @default always
   */
  enabled?: (gateway: GatewayContext) => boolean;
  run(ctx: MetaContext, args: z.infer<z.ZodObject<S>>, extra: Extra): Promise<CallToolResult>;
}

export function defineTool<S extends z.ZodRawShape>(tool: MetaTool<S>): MetaTool {
  return tool;
}

/** Results whose structuredContent the gateway wrote (the envelope may add to it). */
const gatewayMade = new WeakSet<CallToolResult>();
/** execute_tool results that promoted the call to a task (the access log's outcome). */
const promotions = new WeakSet<CallToolResult>();

/**
 * A gateway-made result: an optional summary line, the value as one compact
 * JSON text block, and the same value as `structuredContent`.
 */
export function json(value: Record<string, unknown>, summary?: string): CallToolResult {
  const content: CallToolResult["content"] = [];
  if (summary) content.push({ type: "text", text: summary });
  content.push({ type: "text", text: JSON.stringify(value) });
  const result: CallToolResult = { content, structuredContent: value };
  gatewayMade.add(result);
  return result;
}

/** An upstream's payload (a prompt, a resource's contents) as one JSON text block, unchanged and unstructured. */
export function payload(value: unknown): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value) }] };
}

export function isGatewayMade(result: CallToolResult): boolean {
  return gatewayMade.has(result);
}

/** Marks an execute_tool result as a promotion to a task. */
export function promoted(result: CallToolResult): CallToolResult {
  promotions.add(result);
  return result;
}

export function wasPromoted(result: CallToolResult): boolean {
  return promotions.has(result);
}

export function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}
