/**
 * cancel_elicitation_request, cancel_sampling_request (design MF-24), the
 * public emceepee's names: end a pending request without answering it. The
 * elicitation is answered upstream with action "cancel" (MCP's own word for
 * "dismissed"); the sampling request gets an error (sampling has no cancel
 * result). Either way it leaves the pending queue, once; the same paths as
 * respond_to_elicitation / respond_to_sampling.
 */
import { z } from "zod";
import { defineTool, json } from "../define.js";
import { answerElicitation } from "./elicitation.js";
import { answerSampling } from "./sampling.js";

const DEFAULT_REASON = "Cancelled by the client";

export const cancelElicitationRequest = defineTool({
  name: "cancel_elicitation_request",
  title: "Cancel an elicitation",
  description: "Dismiss a pending elicitation without answering its form: the server gets action 'cancel' and the request leaves the queue.",
  input: {
    request_id: z.string().min(1).describe("requestId from get_elicitations or pending_client_action"),
    reason: z.string().max(500).optional().describe("Why (kept in the gateway's log)"),
  },
  async run({ session }, { request_id, reason }) {
    const { server } = session.pending.get("elicitation", request_id);
    await answerElicitation(session, { request_id, action: "cancel" });
    session.logger.info({ requestId: request_id, server, reason: reason ?? DEFAULT_REASON }, "elicitation_cancelled_by_client");
    return json({ success: true, requestId: request_id, action: "cancel" }, `Elicitation ${request_id} cancelled.`);
  },
});

export const cancelSamplingRequest = defineTool({
  name: "cancel_sampling_request",
  title: "Cancel a sampling request",
  description:
    "Refuse a pending sampling request (an LLM completion a server asked for) without answering it, e.g. when it looks like a loop: the server gets an error with the reason and the request leaves the queue.",
  input: {
    request_id: z.string().min(1).describe("requestId from get_sampling_requests or pending_client_action"),
    reason: z.string().min(1).max(500).optional().describe(`The error the server gets (default "${DEFAULT_REASON}")`),
  },
  async run({ session }, { request_id, reason }) {
    await answerSampling(session, { request_id, model: "emceepee-client", stop_reason: "endTurn", error: reason ?? DEFAULT_REASON });
    return json({ success: true, requestId: request_id, rejected: true }, `Sampling request ${request_id} cancelled.`);
  },
});
