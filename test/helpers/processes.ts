/** Counting processes by a marker on their command line (Linux /proc). */
import { readdirSync, readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";

export function newMarker(): string {
  return `emceepee-test-${randomUUID()}`;
}

/** Pids of live processes whose command line contains `marker` (zombies excluded). */
export function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (!cmdline.includes(marker)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      found.push(Number(entry));
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}

/** Polls until no process carries `marker` (or the deadline passes: generous, processes end slowly on a loaded machine); returns what is left. */
export async function waitForNoProcesses(marker: string, timeoutMs = 60_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  let left = processesWith(marker);
  while (left.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    left = processesWith(marker);
  }
  return left;
}
