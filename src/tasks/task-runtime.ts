/**
 * What only this process knows about a session's working tool tasks (the
 * records themselves live in the TaskStore): each task's Runtime (TTL timer,
 * abort controller, waiters, the end being stored), the index of running
 * upstream tasks, and the store writes nobody awaits — kept so that field
 * updates run in the order asked and close() can wait for them. Used by
 * TaskManager (task-manager.ts) and the task ends (task-ends.ts).
 */
import type { TimerHandle } from "../clock.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { TaskRecord } from "../store/contracts.js";

/** What only this process knows about a working task. */
export interface Runtime {
  server: string;
  /**
   * An end was asked for and is being stored: later ends of the same task
   * (its aborted call failing, say) lose at once, so the first one asked wins
   * deterministically within the process (the store's compare-and-set decides across processes).
   */
  ending?: boolean;
  ttlTimer?: TimerHandle;
  abort?: AbortController;
  /** The upstream task it runs as (`byUpstream` key); a shutdown leaves it running upstream. */
  upstreamKey?: string;
  /** The last inputRequired flag asked for (status notifications only on a change). */
  inputRequired: boolean;
  /** A call of this process settles the task (execute_tool's promoted call); not so for a re-attached task. */
  settledByCall?: boolean;
  /** An end whose write failed (the store is unavailable): readers get it from memory while it is retried (task-ends.ts). */
  unstored?: TaskRecord;
  /** The record as created or re-attached here: what an end is built on when the store cannot even be read. */
  record?: TaskRecord;
  /** get_task_result waiters: the ended record, or undefined when the session closed under them (made on first use: most tasks have none). */
  waiters?: Set<(ended: TaskRecord | undefined) => void>;
}

/** The working tasks this process runs (or re-attached), and the running upstream tasks by `server` and upstream task id. */
export interface Runtimes {
  readonly runtime: Map<string, Runtime>;
  /** Sync lookups for what upstreams send. */
  readonly byUpstream: Map<string, string>;
}

export function attach(rts: Runtimes, record: TaskRecord, rt: Runtime): void {
  if (record.upstreamTaskId !== undefined) {
    rt.upstreamKey = upstreamKey(record.server, record.upstreamTaskId);
    rts.byUpstream.set(rt.upstreamKey, record.taskId);
  }
  rt.record = record;
  rts.runtime.set(record.taskId, rt);
}

export function detach(rts: Runtimes, taskId: string): Runtime | undefined {
  const rt = rts.runtime.get(taskId);
  rts.runtime.delete(taskId);
  if (rt?.upstreamKey !== undefined) rts.byUpstream.delete(rt.upstreamKey);
  return rt;
}

export function upstreamKey(server: string, upstreamTaskId: string): string {
  return `${server}\u0000${upstreamTaskId}`;
}

/** Store writes nobody awaits (progress, input_required, ends of background calls): close() waits for them. */
export class TaskWrites {
  private readonly writes = new Set<Promise<unknown>>();
  /** Field updates run one after another, so the last one asked for is the one stored. */
  private serial: Promise<unknown> = Promise.resolve();

  constructor(private readonly logger: () => Logger | undefined) {}

  /** Settles once the field updates asked for so far are stored (or failed). */
  get ordered(): Promise<unknown> {
    return this.serial;
  }

  /** Runs field updates one after another (each sees the previous); a failure is logged, never thrown. */
  inOrder(what: string, taskId: string, op: () => Promise<unknown>): Promise<void> {
    const run = this.serial.then(op).then(
      () => undefined,
      (err: unknown) => this.logger()?.error({ taskId, err: errorMessage(err) }, `task_store_write_failed: ${what}`),
    );
    this.serial = run;
    return this.track(run);
  }

  /** Remembers a write until it settles (close() waits for them). */
  track<T>(p: Promise<T>): Promise<T> {
    this.writes.add(p);
    const forget = () => this.writes.delete(p);
    p.then(forget, forget);
    return p;
  }

  /** Waits until no tracked write is in flight (including those started meanwhile). */
  async settle(): Promise<void> {
    while (this.writes.size) await Promise.allSettled([...this.writes]);
  }
}
