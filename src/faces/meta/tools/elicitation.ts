/**
 * get_elicitations, respond_to_elicitation. Accepted form content is checked
 * against the server's requestedSchema first: a bad answer is an error to the
 * client and the elicitation stays pending (nothing is lost). answerElicitation
 * is that one path, shared with the web console (src/console/), which answers
 * as "console" so that the client is told who answered first.
 */
import type { JsonSchemaType } from "@modelcontextprotocol/sdk/validation/types.js";
import type { ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { ErrorCodes, GatewayError } from "../../../errors.js";
import type { Session } from "../../../session/session.js";
import type { AnsweredBy } from "../../../session/pending-requests.js";
import { defineTool, iso, json } from "../define.js";
import { jsonSchemaValidator as validator } from "../../../mcp/json-schema-validator.js";

export const getElicitations = defineTool({
  name: "get_elicitations",
  title: "List pending elicitations",
  description:
    "List elicitations (requests for user input) that upstream servers sent this session and that wait for an answer, with their full form schema or URL. Answer with respond_to_elicitation.",
  input: { server: z.string().optional().describe("Server name; omit for all") },
  annotations: { readOnlyHint: true },
  async run({ session }, { server }) {
    const elicitations = session.pending.list("elicitation", server).map((p) => ({
      requestId: p.requestId,
      server: p.server,
      received_at: iso(p.receivedAt),
      expires_at: iso(p.expiresAt),
      ...p.params,
      mode: (p.params as { mode?: string }).mode ?? "form",
    }));
    return json({ elicitations });
  },
});

export const respondToElicitation = defineTool({
  name: "respond_to_elicitation",
  title: "Answer an elicitation",
  description:
    "Answer a pending elicitation: action 'accept' (with `content` matching the requested schema for form mode; no content for URL mode, meaning the user completed the URL flow), 'decline' or 'cancel'.",
  input: {
    request_id: z.string().min(1).describe("requestId from get_elicitations or pending_client_action"),
    action: z.enum(["accept", "decline", "cancel"]),
    content: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.array(z.string())]))
      .optional()
      .describe("Form values (action 'accept', form mode)"),
  },
  async run({ session }, { request_id, action, content }) {
    await answerElicitation(session, { request_id, action, content });
    return json({ success: true, requestId: request_id, action }, `Elicitation ${request_id} answered (${action}).`);
  },
});

/** What respond_to_elicitation takes (and the console's form, once parsed). */
export interface ElicitationAnswer {
  request_id: string;
  action: "accept" | "decline" | "cancel";
  content?: Record<string, string | number | boolean | string[]> | undefined;
}

/**
 * Checks an answer against the pending elicitation (accepted form content
 * against its requestedSchema) and delivers it. Throws EMCP_BAD_ARGUMENTS
 * (still pending) or EMCP_UNKNOWN_REQUEST (gone, or answered by the other side).
 */
export async function answerElicitation(session: Session, { request_id, action, content }: ElicitationAnswer, by: AnsweredBy = "client"): Promise<void> {
  const pending = session.pending.get("elicitation", request_id);
  const params = pending.params as { mode?: string; requestedSchema?: JsonSchemaType };
  const mode = params.mode ?? "form";
  let result: ElicitResult = { action };
  if (action === "accept" && mode === "form") {
    if (!content) {
      throw new GatewayError(
        ErrorCodes.BAD_ARGUMENTS,
        "action 'accept' on a form elicitation needs `content` matching its requestedSchema (see get_elicitations); the elicitation is still pending",
      );
    }
    if (params.requestedSchema) {
      const check = validator.getValidator(params.requestedSchema)(content);
      if (!check.valid) {
        throw new GatewayError(
          ErrorCodes.BAD_ARGUMENTS,
          `content does not match the requested schema: ${check.errorMessage}. The elicitation is still pending; fix the content and answer again.`,
        );
      }
    }
    result = { action, content };
  } else if (content && action !== "accept") {
    throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `\`content\` is only allowed with action 'accept'; the elicitation is still pending`);
  }
  await session.pending.respond("elicitation", request_id, result, by);
}
