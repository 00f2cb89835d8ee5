/** Reading another process's CPU time and RSS from /proc (Linux), and finding its children. */
import { execFileSync } from "node:child_process";
import fs from "node:fs";

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** Fields of /proc/<pid>/stat after the `(comm)` field, 0-based from `state`. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** User + system CPU time of `pid` in ms (all its threads, not its children). 0 if it is gone. */
export function cpuMs(pid: number): number {
  const f = statFields(pid);
  if (!f) return 0;
  // stat fields 14 (utime) and 15 (stime) are at 11 and 12 after `state` (field 3).
  return ((Number(f[11]) + Number(f[12])) * 1000) / clockTicks();
}

/** Resident set size of `pid` in bytes (VmRSS), or 0 if it is gone. */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Pids whose parent is `pid`. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const f = statFields(Number(entry));
    if (f && Number(f[1]) === pid) out.push(Number(entry));
  }
  return out;
}

/** Pids of `pid`'s children, their children and so on (one /proc scan). */
export function descendantPids(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const f = statFields(Number(entry));
    if (f) parentOf.set(Number(entry), Number(f[1]));
  }
  const out: number[] = [];
  const wanted = new Set([pid]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [child, parent] of parentOf) {
      if (wanted.has(parent) && !wanted.has(child)) {
        wanted.add(child);
        out.push(child);
        grew = true;
      }
    }
  }
  return out;
}

/** Total CPU ms of several processes. */
export function totalCpuMs(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return statFields(pid)?.[0] !== "Z";
  } catch {
    return false;
  }
}

/** CPU time of every thread of `pid` in ms, with nanosecond resolution (schedstat's first field; /proc/<pid>/stat counts 10 ms ticks). 0 if it is gone. */
export function threadCpuMs(pid: number): number {
  let ns = 0;
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const tid of tids) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // the thread ended meanwhile: its time is lost from both readings alike
    }
  }
  return ns / 1e6;
}
