/** What the decision backends share: which records an audit query matches, and the (at, id) order. */
import type { DecisionQuery, DecisionRecord } from "./contracts.js";

/** Whether `r` matches every field `q` gives (the page cursor `before` included). */
export function decisionMatches(r: DecisionRecord, q: DecisionQuery): boolean {
  if (q.principalHash !== undefined && r.principalHash !== q.principalHash) return false;
  if (q.server !== undefined && r.server !== q.server) return false;
  if (q.tool !== undefined && r.tool !== q.tool) return false;
  if (q.outcome !== undefined && r.outcome !== q.outcome) return false;
  if (q.since !== undefined && r.at < q.since) return false;
  if (q.until !== undefined && r.at >= q.until) return false;
  if (q.before !== undefined && compareDecisions(r, q.before) >= 0) return false;
  return true;
}

/** Oldest first by (at, id); negate for newest first. */
export function compareDecisions(a: { at: number; id: string }, b: { at: number; id: string }): number {
  return a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
