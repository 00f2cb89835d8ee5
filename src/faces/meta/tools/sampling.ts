/**
 * get_sampling_requests, respond_to_sampling. answerSampling is the one path
 * that answers or rejects a sampling request, shared with the web console
 * (src/console/), which answers as "console".
 */
import { CreateMessageResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { ErrorCodes, GatewayError } from "../../../errors.js";
import type { AnsweredBy } from "../../../session/pending-requests.js";
import type { Session } from "../../../session/session.js";
import { defineTool, iso, json } from "../define.js";

export const getSamplingRequests = defineTool({
  name: "get_sampling_requests",
  title: "List pending sampling requests",
  description:
    "List sampling requests (asks for an LLM completion) that upstream servers sent this session, with their messages and preferences. Answer with respond_to_sampling.",
  input: { server: z.string().optional().describe("Server name; omit for all") },
  annotations: { readOnlyHint: true },
  async run({ session }, { server }) {
    const sampling_requests = session.pending.list("sampling", server).map((p) => ({
      requestId: p.requestId,
      server: p.server,
      received_at: iso(p.receivedAt),
      expires_at: iso(p.expiresAt),
      ...p.params,
    }));
    return json({ sampling_requests });
  },
});

export const respondToSampling = defineTool({
  name: "respond_to_sampling",
  title: "Answer a sampling request",
  description:
    "Answer a pending sampling request with the completion text (or full `content`), or reject it with `error` so the server gets an error instead of waiting.",
  input: {
    request_id: z.string().min(1).describe("requestId from get_sampling_requests or pending_client_action"),
    text: z.string().optional().describe("The completion text (shortcut for content {type:'text', text})"),
    content: z.record(z.string(), z.unknown()).optional().describe("A full MCP content block (text, image or audio) instead of `text`"),
    model: z.string().default("emceepee-client").describe("Name of the model that produced the answer"),
    stop_reason: z.string().default("endTurn").describe("endTurn, stopSequence, maxTokens or another reason"),
    error: z.string().optional().describe("Reject the request with this message instead of answering"),
  },
  async run({ session }, args) {
    const { request_id } = args;
    if ((await answerSampling(session, args)) === "rejected") {
      return json({ success: true, requestId: request_id, rejected: true }, `Sampling request ${request_id} rejected.`);
    }
    return json({ success: true, requestId: request_id }, `Sampling request ${request_id} answered.`);
  },
});

/** What respond_to_sampling takes (and the console's reply form). */
export interface SamplingAnswer {
  request_id: string;
  text?: string | undefined;
  content?: Record<string, unknown> | undefined;
  model: string;
  stop_reason: string;
  error?: string | undefined;
}

/**
 * Rejects (with `error`) or answers a pending sampling request, the answer
 * checked as a CreateMessageResult first. Throws EMCP_BAD_ARGUMENTS (still
 * pending) or EMCP_UNKNOWN_REQUEST (gone, or answered by the other side).
 */
export async function answerSampling(
  session: Session,
  { request_id, text, content, model, stop_reason, error }: SamplingAnswer,
  by: AnsweredBy = "client",
): Promise<"answered" | "rejected"> {
  session.pending.get("sampling", request_id);
  if (error !== undefined) {
    await session.pending.reject("sampling", request_id, error, by);
    return "rejected";
  }
  if ((text === undefined) === (content === undefined)) {
    throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, "give exactly one of `text` or `content` (or `error` to reject); the request is still pending");
  }
  const parsed = CreateMessageResultSchema.safeParse({
    role: "assistant",
    content: content ?? { type: "text", text },
    model,
    stopReason: stop_reason,
  });
  if (!parsed.success) {
    throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `invalid sampling answer: ${parsed.error.message}; the request is still pending`);
  }
  await session.pending.respond("sampling", request_id, parsed.data, by);
  return "answered";
}
