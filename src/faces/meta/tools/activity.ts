/**
 * await_activity (design MF-14): returns at once when undelivered
 * events exist, else waits for the first event or the timeout. Delivers the
 * events itself (exactly once), with the category-3 and category-4 snapshots.
 *
 * `sinceEventId` (design MF-18; `since_event_id` too) is a
 * cursor: the events stored after it are returned whether delivered before or
 * not, so a client that lost a response can ask again; an unknown cursor
 * (evicted) returns everything stored and says so in `cursor`. Semantics in
 * docs/adr/0004-reply-shapes.md.
 *
 * Identical list_changed notifications of a server in one reply are shown
 * once with `count` (envelope.ts formatEvents); `lastEventId` is still the
 * id of the last event taken, folded or not.
 */
import { z } from "zod";
import { ErrorCodes, GatewayError } from "../../../errors.js";
import { DEFAULT_SETTINGS } from "../../../config/schema.js";
import type { StoredEvent } from "../../../session/event-system.js";
import type { Session } from "../../../session/session.js";
import { defineTool, json } from "../define.js";
import { formatEvents, type FormattedEvent } from "../envelope.js";

/** The default the description quotes, from the config schema (a config may set another). */
const DEFAULT_WAIT_MS = DEFAULT_SETTINGS.awaitActivity.defaultTimeoutMs;

/** An event id (ULID) as a cursor. */
const eventCursor = z.string().min(1).max(128).optional();

type Trigger =
  { type: "timeout" } | { type: "immediate" } | { type: "event"; server: string; eventType: string } | { type: "server_disconnected"; server: string };

export const awaitActivity = defineTool({
  name: "await_activity",
  title: "Wait for activity",
  description: `Wait up to \`timeout_ms\` (default ${DEFAULT_WAIT_MS}) for anything new: a notification, an elicitation or sampling request, a task ending, a timer firing (set_timer), a server connecting or disconnecting. Returns at once if something is already new. Returns triggers, new events grouped by server, working tasks per server and what waits for your answer. Logs never wake it (use get_logs).`,
  input: {
    timeout_ms: z.number().int().min(0).optional().describe(`Longest wait in ms (default ${DEFAULT_WAIT_MS}, capped by the gateway's maxTimeoutMs)`),
    sinceEventId: eventCursor.describe(
      "Cursor: an event id from an earlier response (its lastEventId, or an event's id). Returns the events stored after it, even ones already delivered; without it, only events not delivered yet.",
    ),
    since_event_id: eventCursor.describe("Same as sinceEventId"),
  },
  envelope: false,
  async run({ session, gateway }, { timeout_ms, sinceEventId, since_event_id }, extra) {
    if (sinceEventId !== undefined && since_event_id !== undefined && sinceEventId !== since_event_id) {
      throw new GatewayError(
        ErrorCodes.BAD_ARGUMENTS,
        "sinceEventId and since_event_id are two spellings of one cursor: give one of them, not two different ids",
      );
    }
    const cursor = sinceEventId ?? since_event_id;
    const { defaultTimeoutMs, maxTimeoutMs } = gateway.settings.awaitActivity;
    const timeoutMs = Math.min(timeout_ms ?? defaultTimeoutMs, maxTimeoutMs);
    const read = async () => (cursor === undefined ? { events: await session.events.takeNew(), found: true } : session.events.takeAfter(cursor));
    let triggers: Trigger[];
    let taken: { events: StoredEvent[]; found: boolean };
    if (await (cursor === undefined ? session.events.hasNew() : session.events.hasAfter(cursor))) {
      triggers = [{ type: "immediate" }];
      taken = await read();
    } else {
      const woke = await session.events.waitForNext(timeoutMs, extra.signal);
      taken = await read();
      triggers = woke === null ? [{ type: "timeout" }] : triggersFor(taken.events.length ? taken.events : [woke]);
    }
    const activity = await buildActivity(session, gateway.registry.names(session), triggers, taken.events);
    if (cursor === undefined) return json(activity);
    const cursorInfo = taken.found
      ? { sinceEventId: cursor, found: true }
      : {
          sinceEventId: cursor,
          found: false,
          note: "this event id is not in the session's event store (evicted, or not an id of this session): every stored event is returned, and events between it and the oldest stored one may be lost",
        };
    return json({ ...activity, cursor: cursorInfo });
  },
});

function triggersFor(events: StoredEvent[]): Trigger[] {
  const seen = new Map<string, Trigger>();
  for (const e of events) {
    const t: Trigger =
      e.type === "server_disconnected" ? { type: "server_disconnected", server: e.server } : { type: "event", server: e.server, eventType: e.type };
    seen.set(JSON.stringify(t), t);
  }
  return [...seen.values()];
}

async function buildActivity(session: Session, servers: string[], triggers: Trigger[], events: StoredEvent[]) {
  const byServer = new Map<string, FormattedEvent[]>();
  for (const e of formatEvents(events)) {
    const list = byServer.get(e.server) ?? [];
    list.push(e);
    byServer.set(e.server, list);
  }
  // One read of the session's working tasks, grouped by server in the registry's order.
  const working = await session.tasks.list({ status: "working" });
  const pending_server = servers
    .map((server) => ({
      server,
      working_tasks: working.filter((t) => t.server === server).map((t) => ({ taskId: t.taskId, toolName: t.toolName, status: t.status })),
    }))
    .filter((p) => p.working_tasks.length > 0);
  return {
    triggers,
    events: [...byServer].map(([server, list]) => ({ server, events: list })),
    pending_server,
    pending_client: {
      elicitations: session.pending.list("elicitation").map((p) => ({
        requestId: p.requestId,
        server: p.server,
        message: (p.params as { message: string }).message,
      })),
      sampling_requests: session.pending.list("sampling").map((p) => ({ requestId: p.requestId, server: p.server })),
    },
    ...(events.length ? { lastEventId: events.at(-1)!.id } : {}),
  };
}
