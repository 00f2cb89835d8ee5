/**
 * Approvals (docs/adr/0025-approvals.md): the durable record of a call that
 * waits for a person's decision, the decision itself (a compare-and-set in
 * the store, so two approvers or two replicas never both win), the rule that
 * a requester may not approve their own call, the decision records of each
 * event, and the webhooks told of a new approval. What happens to the call's
 * task is src/session/approval-runner.ts.
 */
import { createHash } from "node:crypto";
import type { Principal } from "../auth/principal.js";
import type { Clock, IdGenerator } from "../clock.js";
import type { GovernanceSettings } from "../config/governance.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { sessionHash, type Logger } from "../logging.js";
import type { ApprovalRecord, ApprovalState, DecisionOutcome, DecisionRecord, Store } from "../store/contracts.js";
import type { Governance } from "./governance.js";
import { canonical } from "./match.js";

export type ApprovalSettings = GovernanceSettings["approvals"];

export interface ApprovalsDeps {
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  store: () => Store;
  governance: Governance;
  /** The console's base URL for links (settings.consoleUrl wins). */
  baseUrl: () => string | undefined;
  /** POSTs a webhook body (injectable for tests of the body's shape; default fetch). */
  post?: (url: string, body: unknown) => Promise<void>;
}

/** Who decides in the console: a person (principal) or the static token's operator (none). */
export interface Approver {
  principal?: Principal | undefined;
  /** What the records show: the person's subject, or "operator". */
  name: string;
}

/** SHA-256 (hex) of the arguments as canonical JSON: what an approval is bound to. */
export const argumentsDigest = (args: Record<string, unknown> | undefined): string =>
  createHash("sha256")
    .update(JSON.stringify(canonical(args ?? {})))
    .digest("hex");

const OUTCOME: Record<Exclude<ApprovalState, "pending">, DecisionOutcome> = {
  approved: "approval_approved",
  rejected: "approval_rejected",
  expired: "approval_expired",
  cancelled: "approval_cancelled",
};

export class Approvals {
  /** `settings` and `keepArguments` (governance.audit.storeArguments) are read at each use, so that a reload (SIGHUP) applies without a restart. */
  constructor(
    private readonly current: () => ApprovalSettings,
    private readonly keepArguments: () => boolean,
    private readonly deps: ApprovalsDeps,
  ) {}

  /** governance.approvals as in force now. */
  get settings(): ApprovalSettings {
    return this.current();
  }

  /** Stores a pending approval for the call `decision` sent to approval, owned by task `taskId`, and tells the webhooks. */
  async request(input: {
    decision: DecisionRecord;
    taskId: string;
    sessionId: string;
    principal?: Principal | undefined;
    client?: string | undefined;
    args: Record<string, unknown> | undefined;
    /** At the latest (the task's own expiry); approvals.ttlMs from now if sooner. */
    expiresAt?: number | undefined;
  }): Promise<ApprovalRecord> {
    const now = this.deps.clock.now();
    const { decision: d, principal } = input;
    const record: ApprovalRecord = {
      id: this.deps.newId(),
      taskId: input.taskId,
      sessionId: input.sessionId,
      face: d.face,
      ...(principal ? { requester: { hash: principal.hash, issuer: principal.issuer, subject: principal.subject } } : {}),
      ...(input.client !== undefined ? { client: input.client } : {}),
      server: d.server,
      tool: d.tool,
      arguments: input.args ?? {},
      argumentsDigest: d.argumentsDigest,
      policyVersion: d.policyVersion,
      ruleId: d.ruleId ?? "defaultAction",
      createdAt: now,
      expiresAt: Math.min(now + this.settings.ttlMs, input.expiresAt ?? Infinity),
      state: "pending",
    };
    await this.deps.store().approvals.create(record);
    this.deps.logger.warn(
      { approvalId: record.id, taskId: record.taskId, server: record.server, tool: record.tool, rule: record.ruleId },
      "approval_requested",
    );
    this.notify(record);
    return record;
  }

  get(id: string): Promise<ApprovalRecord | undefined> {
    return this.deps.store().approvals.get(id);
  }

  /** Approvals in these states, oldest first. */
  list(states: readonly ApprovalState[]): Promise<ApprovalRecord[]> {
    return this.deps.store().approvals.list({ states });
  }

  /** Deletes decided approvals past governance.approvals.retentionMs. */
  sweep(): Promise<number> {
    return this.deps.store().approvals.deleteEndedBefore(this.deps.clock.now() - this.settings.retentionMs);
  }

  /** Pending ones first (oldest first), then the most recent decided ones. */
  async listForConsole(recent = 50): Promise<{ pending: ApprovalRecord[]; decided: ApprovalRecord[] }> {
    const all = await this.deps.store().approvals.list();
    return {
      pending: all.filter((r) => r.state === "pending"),
      decided: all
        .filter((r) => r.state !== "pending")
        .slice(-recent)
        .reverse(),
    };
  }

  /**
   * A person decides. Throws EMCP_FORBIDDEN when they asked for the call
   * themselves (unless allowSelfApproval), EMCP_APPROVAL_DECIDED when it is
   * decided, expired or unknown already (another approver was first).
   */
  async decide(id: string, approver: Approver, verdict: "approve" | "reject", reason: string): Promise<ApprovalRecord> {
    const current = await this.get(id);
    if (!current) throw decided(id, "unknown (deleted after its retention, or never made)");
    if (!this.settings.allowSelfApproval && current.requester !== undefined && approver.principal?.hash === current.requester.hash) {
      throw new GatewayError(
        ErrorCodes.FORBIDDEN,
        `you asked for this call yourself, so another approver must decide approval ${id} (gateway.governance.approvals.allowSelfApproval is false)`,
        { details: { approvalId: id } },
      );
    }
    if (current.state === "pending" && this.deps.clock.now() >= current.expiresAt) {
      await this.end(current, "expired", "expiry", "approval expired");
      throw decided(id, "expired");
    }
    const state = verdict === "approve" ? "approved" : "rejected";
    const updated = await this.end(current, state, approver.name, reason, approver.principal?.hash);
    if (!updated) throw decided(id, `already ${(await this.get(id))?.state ?? "gone"}`);
    return updated;
  }

  /**
   * Ends a pending approval (a decision, its expiry, a cancel) exactly once,
   * with its decision record; undefined when it was not pending any more.
   */
  async end(
    current: ApprovalRecord,
    state: Exclude<ApprovalState, "pending">,
    by: string,
    reason: string,
    byHash?: string,
  ): Promise<ApprovalRecord | undefined> {
    const now = this.deps.clock.now();
    const updated = await this.deps
      .store()
      .approvals.update(current.id, { state, decidedBy: by, decidedAt: now, ...(reason ? { reason } : {}) }, { ifState: ["pending"] });
    if (!updated) return undefined;
    this.deps.logger.warn({ approvalId: current.id, taskId: current.taskId, state, by: byHash ?? by }, `approval_${state}`);
    await this.deps.governance.note({
      id: this.deps.newId(),
      at: now,
      outcome: OUTCOME[state],
      profile: "enforce",
      decidedBy: "rule",
      ...(current.requester ? { principalHash: current.requester.hash } : {}),
      face: current.face,
      sessionHash: sessionHash(current.sessionId),
      server: current.server,
      tool: current.tool,
      argumentsDigest: current.argumentsDigest,
      ...(this.keepArguments() && current.arguments ? { arguments: current.arguments } : {}),
      ruleId: current.ruleId,
      policyVersion: current.policyVersion,
      approval: { id: current.id, by: byHash ?? by, ...(reason ? { reason } : {}) },
    });
    return updated;
  }

  /** Takes the task of a decided approval to act on it: true for exactly one caller; drops the arguments unless audit.storeArguments. */
  async claim(r: ApprovalRecord): Promise<boolean> {
    const claimed = await this.deps.store().approvals.update(r.id, { claimedAt: this.deps.clock.now() }, { ifState: [r.state], ifUnclaimed: true });
    return claimed !== undefined;
  }

  /** The call ran (or will not): its arguments are not kept past it unless the operator keeps them. */
  async forgetArguments(r: ApprovalRecord): Promise<void> {
    if (!this.keepArguments()) await this.deps.store().approvals.update(r.id, {}, { ifState: [r.state], unset: ["arguments"] });
  }

  /** The console's page of the approval. */
  link(id: string): string {
    const base = (this.settings.consoleUrl ?? this.deps.baseUrl() ?? "").replace(/\/+$/, "");
    return `${base}/console/approvals#${encodeURIComponent(id)}`;
  }

  /** Each webhook is told in the background; a failure is logged and changes nothing else. */
  private notify(r: ApprovalRecord): void {
    const post = this.deps.post ?? postJson;
    for (const hook of this.settings.webhooks) {
      const body = webhookBody(r, hook.format, this.link(r.id), this.keepArguments());
      post(hook.url, body).catch((err: unknown) =>
        this.deps.logger.warn({ approvalId: r.id, webhook: new URL(hook.url).origin, err: errorMessage(err) }, "approval_webhook_failed"),
      );
    }
  }
}

/** The body a webhook gets: JSON with the approval's fields, or Slack's `{ text }`; arguments only with audit.storeArguments. */
export function webhookBody(r: ApprovalRecord, format: "json" | "slack", link: string, withArguments: boolean): unknown {
  const who = r.requester ? r.requester.subject : "an unauthenticated caller";
  if (format === "slack") {
    return { text: `Approval needed: ${who} wants to call \`${r.tool}\` on \`${r.server}\` (rule ${r.ruleId}). Approve or deny: ${link}` };
  }
  return {
    type: "approval_requested",
    approvalId: r.id,
    server: r.server,
    tool: r.tool,
    rule: r.ruleId,
    policyVersion: r.policyVersion,
    requester: r.requester ? { issuer: r.requester.issuer, subject: r.requester.subject } : null,
    argumentsDigest: r.argumentsDigest,
    ...(withArguments && r.arguments ? { arguments: r.arguments } : {}),
    createdAt: new Date(r.createdAt).toISOString(),
    expiresAt: new Date(r.expiresAt).toISOString(),
    link,
  };
}

async function postJson(url: string, body: unknown): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    redirect: "error",
    signal: AbortSignal.timeout(10_000),
  });
  await res.body?.cancel();
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
}

function decided(id: string, what: string): GatewayError {
  return new GatewayError(ErrorCodes.APPROVAL_DECIDED, `approval ${id} is ${what}; nothing to decide. Reload the approvals page to see where it stands.`, {
    details: { approvalId: id },
  });
}

/**
 * Tasks whose approval nobody has acted on yet (pending, or decided and not
 * claimed): a restart or a replica's adoption keeps them working, so that the
 * approval can still be decided and the call run (docs/adr/0025).
 */
export async function tasksAwaitingApproval(store: Store): Promise<Set<string>> {
  const open = await store.approvals.list({ states: ["pending", "approved", "rejected", "expired"] });
  return new Set(open.filter((r) => r.claimedAt === undefined).map((r) => r.taskId));
}
