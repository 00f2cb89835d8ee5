/**
 * Where the audit trail goes besides the store (issue 24): a port the decision
 * pipeline and the console tell of each decision record and console action.
 * The observability floor implements it (OpenTelemetry log records,
 * src/observability/audit-logs.ts) when an exporter is set; absent, nothing
 * is told. Each call must be cheap and never throw.
 */
import type { DecisionRecord } from "../store/contracts.js";

/** A console user's action (deciding an approval, answering or cancelling for a session, accepting a pin). Ids only, never a secret. */
export interface ConsoleActionRecord {
  /** "decide", "answer", "cancel", "accept_pin". */
  action: string;
  /** When (epoch ms). */
  at: number;
  /** The person's principal hash; absent for the static token's operator. */
  principalHash?: string | undefined;
  /** The console role (admin, user, …). */
  role: string;
  /** What it was about and how it ended: approvalId, taskId, requestId, server, tool, state or outcome. */
  details: Readonly<Record<string, string>>;
}

export interface AuditSink {
  decision(record: DecisionRecord): void;
  consoleAction(action: ConsoleActionRecord): void;
}
