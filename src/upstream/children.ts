/**
 * Child processes of stdio upstreams: a gateway-wide cap on how many run at
 * once, and reaping of a child's whole process tree. The SDK's stdio
 * transport ends only its direct child; a server started through a wrapper
 * (`npx`, `sh -c`, `uv run`) leaves grandchildren behind, so the tree is read
 * from /proc before the child is closed and whatever survives is killed
 * (Linux; elsewhere only the direct child is ended).
 */
import { readdirSync, readFileSync } from "node:fs";
import { ErrorCodes, GatewayError } from "../errors.js";

export class ChildProcessLimiter {
  private live = 0;

  constructor(private readonly max: number) {}

  /** Reserves one child slot; call the returned release() exactly when the child is gone. */
  acquire(server: string): () => void {
    if (this.live >= this.max) {
      throw new GatewayError(
        ErrorCodes.LIMIT_REACHED,
        `cannot start upstream '${server}': the gateway already runs ${this.live} stdio child processes (gateway.upstream.maxChildProcesses = ${this.max}); close idle sessions or raise the limit`,
        { server },
      );
    }
    this.live++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.live--;
    };
  }

  get count(): number {
    return this.live;
  }
}

/** A process as seen once: its pid and start time (so a reused pid is never signalled). */
export interface ProcessRef {
  pid: number;
  start: string;
}

/** Fields of /proc/<pid>/stat after the command name (which may hold spaces). */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** The process `pid` as it is now, if it exists ([1] is the parent pid, [19] the start time). */
export function processRef(pid: number): ProcessRef | undefined {
  const f = statFields(pid);
  return f?.[19] === undefined ? undefined : { pid, start: f[19] };
}

/** Every descendant of `pid` (children first), read from /proc; [] where /proc is absent. */
export function descendantsOf(pid: number): ProcessRef[] {
  const children = new Map<number, ProcessRef[]>();
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const f = statFields(Number(entry));
    if (!f || f[1] === undefined || f[19] === undefined) continue; // ended while we looked
    const ppid = Number(f[1]);
    const list = children.get(ppid) ?? [];
    list.push({ pid: Number(entry), start: f[19] });
    children.set(ppid, list);
  }
  const out: ProcessRef[] = [];
  const walk = (p: number) => {
    for (const child of children.get(p) ?? []) {
      out.push(child);
      walk(child.pid);
    }
  };
  walk(pid);
  return out;
}

/** SIGTERM to each process still alive (same pid and start time), SIGKILL after `graceMs` to any that ignored it. */
export function reap(processes: ProcessRef[], graceMs = 2000): void {
  const alive = processes.filter((p) => signal(p, "SIGTERM"));
  if (!alive.length) return;
  setTimeout(() => alive.forEach((p) => signal(p, "SIGKILL")), graceMs).unref();
}

function signal(p: ProcessRef, sig: NodeJS.Signals): boolean {
  if (processRef(p.pid)?.start !== p.start) return false; // gone, or the pid now belongs to another process
  try {
    process.kill(p.pid, sig);
    return true;
  } catch {
    return false;
  }
}
