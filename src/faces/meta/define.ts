/**
 * One definition per meta-tool; createMetaServer() registers each once, and
 * the same McpServer serves stdio and HTTP. Handlers return plain results or
 * throw GatewayError; the registrar turns errors into `isError` results and
 * appends the session envelope (events + pending client actions).
 */
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";
import type { GatewayContext } from "../../server/context.js";
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
  run(ctx: MetaContext, args: z.infer<z.ZodObject<S>>, extra: Extra): Promise<CallToolResult>;
}

export function defineTool<S extends z.ZodRawShape>(tool: MetaTool<S>): MetaTool {
  return tool;
}

/** A gateway-made result: one JSON text block (compact, as in seed 000). */
export function json(value: unknown, summary?: string): CallToolResult {
  const content: CallToolResult["content"] = [];
  if (summary) content.push({ type: "text", text: summary });
  content.push({ type: "text", text: JSON.stringify(value) });
  return { content };
}

export function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}
