/**
 * Child processes of stdio upstreams: the gateway-wide cap, and ending each
 * one's whole process group. See docs/design/upstreams-and-reliability.md,
 * "How the code keeps it".
 */
import { readdirSync, readFileSync } from "node:fs";
import { ErrorCodes, GatewayError } from "../errors.js";

export class ChildProcessLimiter {
  private live = 0;
  /**
   * At the cap, asked to free a slot that is only waiting (the warm pool's processes) for `server`: a waiting process
   * of `server` hands its slot over (returned: the caller's release from now on), else one is ended and the promise
   * settles once it is gone; undefined when nothing waits.
   */
  reclaim: ((server: string) => (() => void) | Promise<void> | undefined) | undefined;

  constructor(private readonly max: number) {}

  /** A slot if one is free now — never reclaiming one (the warm pool fills itself with these). */
  tryAcquire(server: string): (() => void) | undefined {
    return this.live < this.max ? this.acquire(server) : undefined;
  }

  /** acquire(), at the cap once a waiting process's slot is free (reclaim): never more children than the cap, even briefly. */
  async reserve(server: string): Promise<() => void> {
    if (this.live < this.max) return this.acquire(server);
    const freed = this.reclaim?.(server);
    // Handed over in this tick: no other reserve can take a slot freed for `server` in between.
    if (typeof freed === "function") return freed;
    await freed;
    return this.acquire(server);
  }

  /** Reserves one child slot; call the returned release() exactly when the child is gone. */
  acquire(server: string): () => void {
    if (this.live >= this.max) {
      throw new GatewayError(
        ErrorCodes.LIMIT_REACHED,
        `cannot start upstream '${server}': the gateway already runs ${this.live} stdio child processes (gateway.upstream.maxChildProcesses = ${this.max}); close idle sessions or raise the limit`,
        { details: { server } },
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

  /** The cap (gateway.upstream.maxChildProcesses). */
  get limit(): number {
    return this.max;
  }
}

/** The leader of a process group we started (pgid = its pid), as its ChildProcess reports it. */
export interface GroupLeader {
  readonly pgid: number;
  /** True once Node has reaped the leader ('exit' was emitted): from then on only members hold the pgid. */
  hasExited(): boolean;
}

/** How often reapGroup looks whether the group is gone while it waits (no event exists for that). */
const POLL_MS = 25;

const isWindows = process.platform === "win32";

/**
 * Whether any live member of the group is left. While the leader is not yet
 * reaped it holds the pgid itself; after that, members are read from /proc
 * (field pgrp of /proc/<pid>/stat; zombies do not count: nothing can end them
 * and an init that does not reap must not stall us), or, without /proc,
 * `kill(-pgid, 0)` answers.
 */
export function groupAlive(leader: GroupLeader): boolean {
  if (!leader.hasExited()) return true;
  if (isWindows) return false;
  try {
    process.kill(-leader.pgid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  const members = groupMembers(leader.pgid);
  return members === undefined || members.length > 0;
}

/** Live (non-zombie) pids whose process group is `pgid`; undefined where /proc cannot be read. */
export function groupMembers(pgid: number): number[] | undefined {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return undefined;
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // ended while we looked
    }
    // After the command name (which may hold spaces): [0] state, [1] ppid, [2] pgrp.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (f[0] !== "Z" && Number(f[2]) === pgid) found.push(Number(entry));
  }
  return found;
}

/**
 * Sends `signal` to every member of the group, if it still exists. Safe
 * against pid reuse: the pgid cannot name another group while the unreaped
 * leader or any member holds it, and that is checked first.
 */
export function signalGroup(leader: GroupLeader, signal: NodeJS.Signals): boolean {
  if (!groupAlive(leader)) return false;
  try {
    // Windows has no process groups: only the leader can be signalled.
    process.kill(isWindows ? leader.pgid : -leader.pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Ends a process group: SIGTERM to every member, up to `graceMs` for all of
 * them to go, then SIGKILL to the group and up to `graceMs` more for it to be
 * gone (SIGKILL cannot be ignored; the bound only covers a process stuck in
 * the kernel). Every timer it starts has fired or been cleared when it resolves.
 */
export async function reapGroup(leader: GroupLeader, graceMs: number): Promise<void> {
  const gone = () => !groupAlive(leader);
  if (!signalGroup(leader, "SIGTERM")) return;
  if (await waitUntil(gone, graceMs)) return;
  signalGroup(leader, "SIGKILL");
  await waitUntil(gone, graceMs);
}

/** Polls until `done()` (true) or until `ms` passed (false). */
export async function waitUntil(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (done()) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    // A ref'd timer on purpose: an awaited grace must keep the process alive until it ends.
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, left)));
  }
}

/** A running process group as ProcessGroups sees it. */
export interface ProcessGroupOwner {
  /** Ends the group gracefully; idempotent, resolves when it is gone. */
  terminate(): Promise<void>;
  /** SIGKILL to the whole group, now (synchronous). */
  kill(): void;
}

/**
 * The process groups one gateway started and that may still have members:
 * close() ends them all gracefully (including those whose leader crashed and
 * that are being reaped in the background); killAll() is the synchronous
 * "destroy" path for a forced exit and `process.on('exit')`.
 */
export class ProcessGroups {
  private readonly live = new Set<ProcessGroupOwner>();

  /** Registers a group; call the returned function once the group is gone. */
  track(owner: ProcessGroupOwner): () => void {
    this.live.add(owner);
    return () => this.live.delete(owner);
  }

  get size(): number {
    return this.live.size;
  }

  /** Ends every tracked group (awaited; each bounded by its grace). */
  async terminateAll(): Promise<void> {
    await Promise.allSettled([...this.live].map((owner) => owner.terminate()));
  }

  /** SIGKILL to every tracked group, synchronously. */
  killAll(): void {
    for (const owner of this.live) owner.kill();
  }
}
