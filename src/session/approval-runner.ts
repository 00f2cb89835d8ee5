/**
 * What becomes of a call that waits for approval (docs/adr/0025-approvals.md):
 * a gateway task at once, `input_required` with "Awaiting approval"; after
 * the decision the task runs the call (post-approval revalidation first) or
 * fails with the reason. Decisions, expiries and cancels are found by a poll
 * of the store (every approvals.pollMs), so a decision made on another
 * replica, or before a restart, reaches the process that holds the session;
 * exactly one process acts on each (a claim in the store). Here, not in
 * governance/, because it drives sessions' tasks and upstream calls.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { ProgressCallback } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Principal } from "../auth/principal.js";
import type { Clock } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage, rpcErrorRecordOf, toToolErrorText } from "../errors.js";
import { argumentsDigest, type Approvals } from "../governance/approvals.js";
import type { Governance } from "../governance/governance.js";
import type { Logger } from "../logging.js";
import type { ApprovalRecord, DecisionRecord, TaskRecord } from "../store/contracts.js";
import { runUpstreamTaskToEnd } from "../tasks/emulation.js";
import { CallOrigin } from "../upstream/origin.js";
import type { Session } from "./session.js";
import type { SessionManager } from "./session-manager.js";

/** The task's status message while the approval is pending (seed 002: "InputRequired — awaiting approval"). */
export const AWAITING_APPROVAL = "Awaiting approval";

/** How often decided approvals past their retention are deleted. */
const SWEEP_EVERY_MS = 60_000;

export interface ApprovalRunnerDeps {
  approvals: Approvals;
  governance: Governance;
  sessions: SessionManager;
  settings: GatewaySettings;
  clock: Clock;
  logger: Logger;
}

export interface ApprovalCall {
  session: Session;
  decision: DecisionRecord;
  principal?: Principal | undefined;
  /** The face, and for a virtual server its name (revalidation decides as the call was decided). */
  face: string;
  virtualServer?: string | undefined;
  server: string;
  tool: string;
  args: Record<string, unknown> | undefined;
  ttlMs?: number | undefined;
  /** The client's name and version (initialize), shown to approvers. */
  client?: string | undefined;
}

export class ApprovalRunner {
  private timer: ReturnType<Clock["setTimeout"]> | undefined;
  private closed = false;
  private ticking: Promise<void> | undefined;
  /** Abort controllers of the tasks created here (a cancel of the task aborts the call it runs). */
  private readonly aborts = new Map<string, AbortController>();
  /** Ticks since the last retention sweep of decided approvals. */
  private sinceSweep = 0;
  /** Calls being run here (close() waits for none: their sessions' close aborts them). */
  private readonly running = new Set<string>();

  constructor(private readonly deps: ApprovalRunnerDeps) {}

  start(): void {
    if (this.closed || this.timer) return;
    this.schedule();
  }

  close(): Promise<void> {
    this.closed = true;
    this.deps.clock.clearTimeout(this.timer);
    this.timer = undefined;
    return this.ticking ?? Promise.resolve();
  }

  /** A task for the call, `input_required` / "Awaiting approval", and its pending approval. */
  async open(call: ApprovalCall): Promise<{ task: TaskRecord; approval: ApprovalRecord }> {
    const { session } = call;
    const abort = new AbortController();
    const release = session.tasks.reserveCall();
    // The task lives through the wait for the decision and then the call's own TTL (tasks.maxTtlMs bounds both).
    const { tasks: taskSettings, governance } = this.deps.settings;
    const ttlMs = (call.ttlMs ?? taskSettings.defaultTtlMs) + governance.approvals.ttlMs;
    let task: TaskRecord;
    try {
      task = await session.tasks.create({ server: call.server, toolName: call.tool, toolArgs: call.args ?? {}, ttlMs, abort, settledByCall: true });
    } finally {
      release();
    }
    this.aborts.set(task.taskId, abort);
    abort.signal.addEventListener("abort", () => this.aborts.delete(task.taskId), { once: true });
    session.tasks.setInputRequired(task.taskId, true);
    await session.tasks.noteUpstreamStatus(task.taskId, AWAITING_APPROVAL);
    let approval: ApprovalRecord;
    try {
      approval = await this.deps.approvals.request({
        decision: call.decision,
        taskId: task.taskId,
        sessionId: session.id,
        principal: call.principal,
        client: call.client,
        args: call.args,
        // An approval does not outlive its task.
        expiresAt: task.expiresAt,
      });
    } catch (err) {
      await session.tasks.fail(task.taskId, `the approval could not be stored: ${errorMessage(err)}`);
      throw err;
    }
    await session.tasks.noteUpstreamStatus(task.taskId, `${AWAITING_APPROVAL} (approval ${approval.id})`);
    return { task: await session.tasks.get(task.taskId), approval };
  }

  /**
   * A plain call (no task asked for): opened as above, then held up to
   * holdMs with progress keep-alives. Returns the result, or throws the
   * rejection, the failure, or EMCP_APPROVAL_TIMEOUT (the approval is then withdrawn).
   */
  async hold(call: ApprovalCall, signal: AbortSignal, onprogress: ProgressCallback | undefined): Promise<CallToolResult> {
    const { settings, clock } = this.deps;
    const { holdMs, keepAliveMs } = settings.governance.approvals;
    const { task, approval } = await this.open(call);
    const tasks = call.session.tasks;
    let step = 0;
    const beat = () => {
      onprogress?.({ progress: ++step, message: `${AWAITING_APPROVAL} (approval ${approval.id})` });
      keepAlive = clock.setTimeout(beat, keepAliveMs);
    };
    let keepAlive = onprogress ? clock.setTimeout(beat, keepAliveMs) : undefined;
    try {
      let done = await tasks.waitForTerminal(task.taskId, holdMs, signal);
      if (done.status === "working") {
        const now = await this.deps.approvals.get(approval.id);
        if (now?.state === "pending") {
          const why = signal.aborted ? "the client cancelled the call" : `nobody decided within ${holdMs}ms (governance.approvals.holdMs)`;
          await this.withdraw(now, "requester", why);
          await tasks.cancel(task.taskId, why).catch(() => undefined);
          if (signal.aborted) {
            throw new GatewayError(
              ErrorCodes.CANCELLED,
              `the client cancelled the call to '${call.tool}' while it waited for approval ${approval.id}; the approval is withdrawn`,
            );
          }
          throw new GatewayError(
            ErrorCodes.APPROVAL_TIMEOUT,
            `calling '${call.tool}' on server '${call.server}' needs a person's approval (approval ${approval.id}, rule ${approval.ruleId}), and nobody decided within ${holdMs}ms, so it was withdrawn. Ask an approver to watch the console, or call with a task (task-augmented tools/call, or execute_tool) to wait longer.`,
            { details: { approvalId: approval.id, taskId: task.taskId } },
          );
        }
        // Approved meanwhile: the call runs; wait for it as long as the task lives.
        done = await tasks.waitForTerminal(task.taskId, Math.max(0, done.expiresAt - clock.now()), signal);
      }
      if (done.status === "completed") return done.result as CallToolResult;
      throw new GatewayError(ErrorCodes.APPROVAL_REJECTED, done.error ?? done.statusMessage ?? `the call ${done.status}`, {
        details: { approvalId: approval.id, taskId: task.taskId, status: done.status },
      });
    } finally {
      clock.clearTimeout(keepAlive);
      keepAlive = undefined;
    }
  }

  /** Looks at the store now (the console calls it after a decision: no wait for the next poll). */
  poke(): void {
    if (this.closed) return;
    this.ticking ??= this.tick().finally(() => (this.ticking = undefined));
  }

  private schedule(): void {
    this.timer = this.deps.clock.setTimeout(() => {
      this.timer = undefined;
      if (this.closed) return;
      this.poke();
      void (this.ticking ?? Promise.resolve()).finally(() => {
        if (!this.closed && !this.timer) this.schedule();
      });
    }, this.deps.settings.governance.approvals.pollMs);
  }

  /** One look at every approval not yet acted on. Failures are logged; the next tick tries again. */
  private async tick(): Promise<void> {
    const { approvals, clock, logger } = this.deps;
    try {
      // Decided approvals past approvals.retentionMs go, once a minute or so (their decision records stay).
      if (++this.sinceSweep * this.deps.settings.governance.approvals.pollMs >= SWEEP_EVERY_MS) {
        this.sinceSweep = 0;
        await approvals.sweep();
      }
      const open = await approvals.list(["pending"]);
      const decided = (await approvals.list(["approved", "rejected", "expired"])).filter((r) => r.claimedAt === undefined && !this.running.has(r.id));
      for (const r of open) {
        if (this.closed) return;
        if (clock.now() >= r.expiresAt) {
          await approvals.end(r, "expired", "expiry", "approval expired");
          continue;
        }
        const session = this.deps.sessions.get(r.sessionId);
        if (!session) continue;
        const task = await session.tasks.get(r.taskId).catch(() => undefined);
        if (!task || task.status !== "working") await this.withdraw(r, "requester", task ? `the task was ${task.status}` : "the task is gone");
      }
      for (const r of decided) {
        if (this.closed) return;
        const session = this.deps.sessions.get(r.sessionId);
        if (!session || !(await approvals.claim(r))) continue;
        this.running.add(r.id);
        void this.settle(session, r).finally(() => this.running.delete(r.id));
      }
    } catch (err) {
      logger.warn({ err: errorMessage(err) }, "approval_poll_failed");
    }
  }

  private async withdraw(r: ApprovalRecord, by: string, reason: string): Promise<void> {
    await this.deps.approvals.end(r, "cancelled", by, reason);
  }

  /** Acts on a decided approval whose task this process holds (claimed: no other does). */
  private async settle(session: Session, r: ApprovalRecord): Promise<void> {
    const { tasks } = session;
    const task = await tasks.get(r.taskId).catch(() => undefined);
    try {
      if (!task || task.status !== "working") return;
      if (r.state === "rejected") {
        await tasks.fail(r.taskId, `approval ${r.id} was rejected by ${r.decidedBy ?? "an approver"}${r.reason ? `: ${r.reason}` : ""}`);
        return;
      }
      if (r.state === "expired") {
        await tasks.fail(r.taskId, `approval expired: nobody decided approval ${r.id} within ${this.deps.settings.governance.approvals.ttlMs}ms`);
        return;
      }
      await this.execute(session, r, task);
    } catch (err) {
      await tasks.fail(r.taskId, toToolErrorText(err), rpcErrorRecordOf(err));
    } finally {
      await this.deps.approvals.forgetArguments(r).catch(() => undefined);
    }
  }

  /** Post-approval revalidation, then the call as seed 002 says: forbidden → a plain call; optional / required → an upstream task driven to its end. */
  private async execute(session: Session, r: ApprovalRecord, task: TaskRecord): Promise<void> {
    const { tasks } = session;
    const args = task.toolArgs;
    if (argumentsDigest(args) !== r.argumentsDigest) {
      throw new GatewayError(
        ErrorCodes.POLICY_DENIED,
        `approval ${r.id} is for other arguments than the task's (digest ${r.argumentsDigest.slice(0, 12)}…): the call is refused. Make the call again to ask for a new approval.`,
        { details: { approvalId: r.id } },
      );
    }
    await this.deps.governance.recheck({
      principal: session.principal,
      face: r.face,
      sessionId: session.id,
      server: r.server,
      tool: r.tool,
      args,
    });
    tasks.setInputRequired(r.taskId, false);
    await tasks.noteUpstreamStatus(r.taskId, `Approved by ${r.decidedBy ?? "an approver"}; executing`);
    const abort = this.aborts.get(r.taskId) ?? new AbortController();
    const { settings } = this.deps;
    const conn = await session.connection(r.server);
    const timeoutMs = Math.max(1, task.expiresAt - this.deps.clock.now());
    const origin = new CallOrigin();
    origin.attachTask(r.taskId, (waiting) => tasks.setInputRequired(r.taskId, waiting));
    const onprogress: ProgressCallback = (p) => tasks.setProgress(r.taskId, p);
    const call = { name: r.tool, arguments: args };
    const result =
      (await conn.taskSupport(r.tool)) === "forbidden"
        ? await conn.callTool(r.tool, args, { signal: abort.signal, timeoutMs, onprogress, origin })
        : await runUpstreamTaskToEnd({ settings, clock: this.deps.clock }, conn, call, {
            signal: abort.signal,
            timeoutMs,
            onprogress,
            origin,
            keepAlive: false,
          });
    await tasks.complete(r.taskId, result);
  }
}
