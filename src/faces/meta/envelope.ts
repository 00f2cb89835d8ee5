/**
 * The session envelope (seed 000 "Response Formats"): every meta-tool
 * response carries the category-1 events not yet delivered (exactly once) and
 * the category-4 pending client actions (every time, while they exist).
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Session } from "../../session/session.js";
import type { StoredEvent } from "../../session/event-system.js";
import type { PendingInfo } from "../../session/pending-requests.js";
import { iso } from "./define.js";

export function formatEvent(e: StoredEvent) {
  const createdAt = iso(e.createdAt);
  // `createdAt` is seed 003's StoredEvent name; `created_at` the project's.
  return { id: e.id, type: e.type, server: e.server, created_at: createdAt, createdAt, data: e.data };
}

export function elicitationSummary(p: PendingInfo<"elicitation">) {
  const params = p.params as Record<string, unknown>;
  return {
    requestId: p.requestId,
    server: p.server,
    mode: (params.mode as string | undefined) ?? "form",
    message: params.message as string,
    ...(params.url ? { url: params.url as string } : {}),
    expires_at: iso(p.expiresAt),
  };
}

export function samplingSummary(p: PendingInfo<"sampling">) {
  return { requestId: p.requestId, server: p.server, expires_at: iso(p.expiresAt) };
}

export function pendingClientAction(session: Session) {
  return {
    elicitations: session.pending.list("elicitation").map(elicitationSummary),
    sampling_requests: session.pending.list("sampling").map(samplingSummary),
  };
}

export function withEnvelope(session: Session, result: CallToolResult): CallToolResult {
  const events = session.events.takeNew();
  const pending = pendingClientAction(session);
  const extra: CallToolResult["content"] = [];
  if (events.length) extra.push({ type: "text", text: JSON.stringify({ events_since_last_response: events.map(formatEvent) }) });
  if (pending.elicitations.length || pending.sampling_requests.length) {
    extra.push({ type: "text", text: JSON.stringify({ pending_client_action: pending }) });
  }
  if (!extra.length) return result;
  return { ...result, content: [...result.content, ...extra] };
}
