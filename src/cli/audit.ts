/**
 * `emceepee audit export`: the governance decision records (docs/adr/0022)
 * of a state store as JSON lines on stdout, oldest first. Opens the store the
 * config (or --store) names, as `serve` would, and closes it again.
 */
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import { openStore } from "../store/open.js";

/** `--since`: an ISO date-time or epoch milliseconds. */
export function parseSince(value: string): number {
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms)) {
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `--since ${JSON.stringify(value)} is neither an ISO date-time (2026-11-26T12:00:00Z) nor epoch milliseconds`,
    );
  }
  return ms;
}

/** Writes each record with `at >= since` as one JSON line; returns how many. */
export async function exportDecisions(
  store: GatewaySettings["store"],
  query: { since?: number; limit?: number },
  out: (line: string) => void,
): Promise<number> {
  const opened = await openStore(store);
  try {
    const records = await opened.decisions.list(query);
    for (const r of records) out(`${JSON.stringify(r)}\n`);
    return records.length;
  } finally {
    await opened.close();
  }
}
