/**
 * What only this process knows about a session's working tool tasks (the
 * records live in the TaskStore): TaskRuntimes, each task's timer, abort and
 * waiters with the index of running upstream tasks; and TaskWrites, the store
 * writes nobody awaits. See docs/design/tasks.md, "How the code keeps it".
 */
import type { Clock, TimerHandle } from "../clock.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
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
  /** The upstream task it runs as (the index key); a shutdown leaves it running upstream. */
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

/**
 * The working tasks this process runs (or re-attached) and the running
 * upstream tasks by `server` and upstream task id (sync lookups for what
 * upstreams send), and the session's calls that are no task (yet). Once
 * closed it holds nothing and takes nothing.
 */
export class TaskRuntimes {
  private readonly byTask = new Map<string, Runtime>();
  private readonly byUpstream = new Map<string, string>();
  /** Upstream calls in flight that are no task (yet): close() aborts them too. */
  private readonly calls = new Set<AbortController>();
  private isClosed = false;

  constructor(private readonly clock: Clock) {}

  get closed(): boolean {
    return this.isClosed;
  }

  get size(): number {
    return this.byTask.size;
  }

  get(taskId: string): Runtime | undefined {
    return this.byTask.get(taskId);
  }

  has(taskId: string): boolean {
    return this.byTask.has(taskId);
  }

  /** The ids of the tasks running on `server`. */
  runningOn(server: string): string[] {
    return [...this.byTask].flatMap(([taskId, rt]) => (rt.server === server ? [taskId] : []));
  }

  /** The running task mapped onto `upstreamTaskId` of `server`. */
  byUpstreamTask(server: string, upstreamTaskId: string): string | undefined {
    return this.byUpstream.get(upstreamKey(server, upstreamTaskId));
  }

  /** Aborts `abort` on close() (at once when closed already); returns the release. */
  abortOnClose(abort: AbortController): () => void {
    if (this.isClosed) {
      abort.abort(sessionClosed());
      return () => undefined;
    }
    this.calls.add(abort);
    return () => this.calls.delete(abort);
  }

  attach(record: TaskRecord, rt: Runtime): void {
    if (record.upstreamTaskId !== undefined) this.index(record.taskId, rt, record.upstreamTaskId);
    rt.record = record;
    this.byTask.set(record.taskId, rt);
  }

  /** Maps a running task onto the upstream task it runs as; false when it is not running here or is mapped already. */
  mapUpstream(taskId: string, upstreamTaskId: string): boolean {
    const rt = this.byTask.get(taskId);
    if (!rt || rt.upstreamKey !== undefined) return false;
    this.index(taskId, rt, upstreamTaskId);
    return true;
  }

  detach(taskId: string): Runtime | undefined {
    const rt = this.byTask.get(taskId);
    this.byTask.delete(taskId);
    if (rt?.upstreamKey !== undefined) this.byUpstream.delete(rt.upstreamKey);
    return rt;
  }

  /**
   * Aborts the calls that are no task, then clears every task's timer, aborts
   * its call (except an upstream task's with `keepUpstreamTasks`: a shutdown
   * leaves it running upstream), wakes its waiters with undefined; forgets all.
   */
  close(keepUpstreamTasks: boolean): void {
    this.isClosed = true;
    for (const abort of [...this.calls]) abort.abort(sessionClosed());
    this.calls.clear();
    for (const rt of this.byTask.values()) {
      this.clock.clearTimeout(rt.ttlTimer);
      if (!(keepUpstreamTasks && rt.upstreamKey !== undefined)) rt.abort?.abort("session closed");
      for (const w of [...(rt.waiters ?? [])]) w(undefined);
    }
    this.byTask.clear();
    this.byUpstream.clear();
  }

  /** Number of live TTL timers (for leak tests). */
  get timerCount(): number {
    let n = 0;
    for (const rt of this.byTask.values()) n += rt.ttlTimer ? 1 : 0;
    return n;
  }

  private index(taskId: string, rt: Runtime, upstreamTaskId: string): void {
    rt.upstreamKey = upstreamKey(rt.server, upstreamTaskId);
    this.byUpstream.set(rt.upstreamKey, taskId);
  }
}

/** Why close() aborts a call that is no task: callers answer with it (EMCP_CLOSED). */
function sessionClosed(): GatewayError {
  return new GatewayError(ErrorCodes.CLOSED, "the session closed while the call was running; nothing of it is kept");
}

function upstreamKey(server: string, upstreamTaskId: string): string {
  return `${server}\u0000${upstreamTaskId}`;
}

/** Store writes nobody awaits (progress, input_required, ends of background calls): close() waits for them. */
export class TaskWrites {
  private readonly writes = new Set<Promise<unknown>>();
  /** Field updates run one after another, so the last one asked for is the one stored. */
  private serial: Promise<unknown> = Promise.resolve();

  constructor(private readonly logger: Logger | undefined) {}

  /** Settles once the field updates asked for so far are stored (or failed). */
  get ordered(): Promise<unknown> {
    return this.serial;
  }

  /** Runs field updates one after another (each sees the previous); a failure is logged, never thrown. */
  inOrder(what: string, taskId: string, op: () => Promise<unknown>): Promise<void> {
    const run = this.serial.then(op).then(
      () => undefined,
      (err: unknown) => this.logger?.error({ taskId, err: errorMessage(err) }, `task_store_write_failed: ${what}`),
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
