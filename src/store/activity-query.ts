/** What the activity backends share: which records a query matches, and the newest-first order (at, then id). */
import type { ActivityQuery, ActivityRecord } from "./contracts.js";

/** Whether `r` matches every field `q` gives (the page cursor `before` included). */
export function activityMatches(r: ActivityRecord, q: ActivityQuery): boolean {
  if (q.kind !== undefined && r.kind !== q.kind) return false;
  if (q.server !== undefined && r.server !== q.server) return false;
  if (q.sessionHash !== undefined && r.sessionHash !== q.sessionHash) return false;
  if (q.principalHash !== undefined && r.principalHash !== q.principalHash) return false;
  if (q.outcome !== undefined && r.outcome !== q.outcome) return false;
  if (q.taskId !== undefined && r.taskId !== q.taskId) return false;
  if (q.since !== undefined && r.at < q.since) return false;
  if (q.before !== undefined && compareActivity(r, q.before) >= 0) return false;
  return true;
}

/** Oldest first by (at, id); negate for newest first. */
export function compareActivity(a: { at: number; id: string }, b: { at: number; id: string }): number {
  return a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
