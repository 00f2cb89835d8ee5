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

/** The parent pid of `pid` (undefined once it is gone). */
export function parentPid(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

/**
 * The processes carrying `marker` whose parent does not: a child the marked process is spawning carries its
 * parent's command line between fork and exec (libuv forks, then execs), which on a loaded machine lasts long
 * enough for a scan to see it.
 */
export function outermostWith(marker: string): number[] {
  const found = processesWith(marker);
  return found.filter((pid) => !found.includes(parentPid(pid) ?? -1));
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

/** Pids of `pid`'s live children (/proc; a gateway's stdio upstreams each lead a process group of their own). */
export function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((child) => parentPid(child) === pid);
}

/** Until `pid`'s state is stopped (or it is gone), at most 2 s: crash() is synchronous, like the kill it stands for. */
function waitStopped(pid: number): void {
  const end = Date.now() + 2_000;
  while (Date.now() < end) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      return;
    }
    // The state follows the command in parentheses, which may itself hold spaces or parentheses.
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    if (state === "T" || state === "t" || state === "Z" || state === "X") return;
  }
}

/**
 * SIGKILLs a gateway as a crash would, and then its upstreams' process groups: a crashed gateway cannot end
 * them, and a stdio server that does not exit when its stdin closes (server-everything with an elicitation of
 * the dead gateway's still pending) would outlive the test run, re-parented to init.
 */
export function crash(child: { pid?: number | undefined; kill(signal: NodeJS.Signals): boolean }): void {
  // Stopped first (and seen stopped): a child it would spawn between the scan and the kill (a warm pool's refill) is not missed.
  child.kill("SIGSTOP");
  if (child.pid !== undefined) waitStopped(child.pid);
  const groups = child.pid === undefined ? [] : childrenOf(child.pid);
  child.kill("SIGKILL");
  for (const group of groups) {
    try {
      process.kill(-group, "SIGKILL");
    } catch {
      /* gone, or not a group leader: the kill reached what it could */
    }
  }
}
