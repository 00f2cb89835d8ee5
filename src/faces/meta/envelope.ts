/**
 * The session envelope (design MF-13, EV-2): every meta-tool
 * response carries the category-1 events not yet delivered (exactly once) and
 * the category-4 pending client actions (every time, while they exist). In
 * gateway-made replies both go into `structuredContent` too.
 *
 * Identical `list_changed` notifications of one server in one reply (an
 * upstream that sends six in a row) are shown once, with `count`.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Session } from "../../session/session.js";
import type { StoredEvent } from "../../session/event-system.js";
import type { PendingInfo } from "../../session/pending-requests.js";
import { isGatewayMade, iso } from "./define.js";

export function formatEvent(e: StoredEvent) {
  const createdAt = iso(e.createdAt);
  // Both spellings (design MF-19): the project's `created_at` and its camelCase alias `createdAt`.
  return { id: e.id, type: e.type, server: e.server, created_at: createdAt, createdAt, data: e.data };
}

export type FormattedEvent = ReturnType<typeof formatEvent> & { count?: number };

/**
 * The events of one reply, formatted, in order; a `list_changed` notification
 * identical to an earlier one of this reply (same server, method and params)
 * is folded into that one, whose `count` says how many arrived.
 */
export function formatEvents(events: readonly StoredEvent[]): FormattedEvent[] {
  const out: FormattedEvent[] = [];
  const folded = new Map<string, FormattedEvent>();
  for (const e of events) {
    const key = listChangedKey(e);
    const first = key === undefined ? undefined : folded.get(key);
    if (first) {
      first.count = (first.count ?? 1) + 1;
      continue;
    }
    const formatted: FormattedEvent = formatEvent(e);
    if (key !== undefined) folded.set(key, formatted);
    out.push(formatted);
  }
  return out;
}

function listChangedKey(e: StoredEvent): string | undefined {
  const method = e.data.method;
  if (e.type !== "notification" || typeof method !== "string" || !method.endsWith("/list_changed")) return undefined;
  return JSON.stringify([e.server, method, e.data.params ?? null]);
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

export async function withEnvelope(session: Session, result: CallToolResult): Promise<CallToolResult> {
  const events = await session.events.takeNew();
  const pending = pendingClientAction(session);
  const added: Record<string, unknown> = {};
  if (events.length) added.events_since_last_response = formatEvents(events);
  if (pending.elicitations.length || pending.sampling_requests.length) added.pending_client_action = pending;
  const keys = Object.keys(added);
  if (!keys.length) return result;
  const extra: CallToolResult["content"] = keys.map((key) => ({ type: "text", text: JSON.stringify({ [key]: added[key] }) }));
  // An upstream's own structuredContent (execute_tool's verbatim result) is never touched.
  const structured = isGatewayMade(result) && result.structuredContent ? { structuredContent: { ...result.structuredContent, ...added } } : {};
  return { ...result, content: [...result.content, ...extra], ...structured };
}
