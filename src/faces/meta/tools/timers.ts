/**
 * set_timer, list_timers, get_timer, delete_timer (design MF-22), with the
 * public emceepee's names and arguments: a timer fires a `timer_expired`
 * event (server "emceepee") that wakes await_activity and shows in the next
 * response's events. The session's timers: src/session/timers.ts.
 */
import { z } from "zod";
import type { TimerRecord } from "../../../session/timers.js";
import { MIN_INTERVAL_MS } from "../../../session/timers.js";
import { defineTool, iso, json } from "../define.js";

const MAX_DURATION_MS = 86_400_000;

/** A timer as replies show it (camelCase, as the public emceepee; times as ISO strings). */
function timerView(t: TimerRecord) {
  return {
    id: t.id,
    timerId: t.id,
    message: t.message,
    durationMs: t.durationMs,
    interval: t.interval,
    status: t.status,
    fireCount: t.fireCount,
    createdAt: iso(t.createdAt),
    expiresAt: iso(t.expiresAt),
  };
}

const timerId = z.string().min(1).max(100).describe("The timer's id (from set_timer or list_timers)");

export const setTimer = defineTool({
  name: "set_timer",
  title: "Set a timer",
  description: `Set a timer that fires after duration_ms. When it fires, a timer_expired event (server "emceepee") with your message wakes await_activity and appears in the next tool response's events. interval: true repeats it every duration_ms (at least ${MIN_INTERVAL_MS}) until delete_timer. Timers end with the session.`,
  input: {
    duration_ms: z.number().int().min(1).max(MAX_DURATION_MS).describe("Milliseconds until the timer fires (at most 24 hours)"),
    message: z.string().min(1).max(500).describe("Text carried by the timer_expired event"),
    interval: z.boolean().default(false).describe("Repeat every duration_ms instead of firing once (default false)"),
  },
  async run({ session }, { duration_ms, message, interval }) {
    const timer = session.timers.set(duration_ms, message, interval);
    return json(timerView(timer), `Timer ${timer.id} fires at ${iso(timer.expiresAt)}.`);
  },
});

export const listTimers = defineTool({
  name: "list_timers",
  title: "List timers",
  description: "List this session's running timers; include_inactive adds the ones that fired or were deleted recently.",
  input: {
    include_inactive: z.boolean().default(false).describe("Also timers that expired or were deleted (default false)"),
  },
  annotations: { readOnlyHint: true },
  async run({ session }, { include_inactive }) {
    return json({ timers: session.timers.list(include_inactive).map(timerView) });
  },
});

export const getTimer = defineTool({
  name: "get_timer",
  title: "Get a timer",
  description: "One timer of this session: its message, status (active, expired, deleted), how often it fired and when it fires next.",
  input: { timer_id: timerId },
  annotations: { readOnlyHint: true },
  async run({ session }, { timer_id }) {
    return json(timerView(session.timers.get(timer_id)));
  },
});

export const deleteTimer = defineTool({
  name: "delete_timer",
  title: "Delete a timer",
  description: "Stop a running timer before it fires (a repeating one fires no more). Returns the timer as it was.",
  input: { timer_id: timerId },
  async run({ session }, { timer_id }) {
    return json({ deleted: true, timer: timerView(session.timers.delete(timer_id)) }, `Timer ${timer_id} deleted.`);
  },
});
