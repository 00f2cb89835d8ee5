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

/** Every descendant of `pid` (children first), read from /proc; [] where /proc is absent. */
export function descendantsOf(pid: number): number[] {
  const parents = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Field 4 of /proc/<pid>/stat is the parent pid; the command name (field 2) may hold spaces, so parse after its ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = parents.get(ppid) ?? [];
      list.push(Number(entry));
      parents.set(ppid, list);
    } catch {
      /* the process ended while we looked */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const child of parents.get(p) ?? []) {
      out.push(child);
      walk(child);
    }
  };
  walk(pid);
  return out;
}

/** SIGTERM to each pid still alive, SIGKILL after `graceMs` to any that ignored it. */
export function reap(pids: number[], graceMs = 2000): void {
  const alive = pids.filter((p) => signal(p, "SIGTERM"));
  if (!alive.length) return;
  setTimeout(() => alive.forEach((p) => signal(p, "SIGKILL")), graceMs).unref();
}

function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}
