/** The pin store's rules, shared by the three backends: order, quarantine and accept as pure functions over one record. */
import type { PinnedDefinition, PinRecord } from "./contracts.js";

/** By server, then tool. */
export const byServerTool = (a: PinRecord, b: PinRecord): number =>
  a.server < b.server ? -1 : a.server > b.server ? 1 : a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0;

/** The record with `seen` pending, or undefined when it is the pinned definition. */
export function withPending(r: PinRecord, seen: PinnedDefinition): PinRecord | undefined {
  if (r.pinned.digest === seen.digest) return undefined;
  if (r.pending?.digest === seen.digest) return r;
  return { ...r, pending: seen };
}

/** The record with its pending definition pinned, when that is still `digest`. */
export function accepted(r: PinRecord, digest: string, by: string, at: number): PinRecord | undefined {
  if (r.pending?.digest !== digest) return undefined;
  return { server: r.server, tool: r.tool, pinned: { digest, definition: r.pending.definition, at, by } };
}

export const matchesQuery = (r: PinRecord, q: { server?: string; quarantined?: boolean }): boolean =>
  (q.server === undefined || r.server === q.server) && (q.quarantined === undefined || (r.pending !== undefined) === q.quarantined);
