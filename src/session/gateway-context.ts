/**
 * What the faces, the HTTP endpoint and the console need from the gateway:
 * shared, read-mostly services. Built by the composition root (src/server/);
 * it stands here, below its users, so they never import the root
 * (docs/design/layers.md).
 */
import type { Clock, IdGenerator } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import type { RateLimiter } from "../governance/rate-limits.js";
import type { Governance } from "../governance/governance.js";
import type { Approvals } from "../governance/approvals.js";
import type { ApprovalRunner } from "./approval-runner.js";
import type { Curation } from "../governance/curation.js";
import type { AuditSink } from "../governance/audit-sink.js";
import type { Logger } from "../logging.js";
import type { SessionManager } from "../session/session-manager.js";
import type { Store } from "../store/contracts.js";
import type { ServerRegistry } from "../upstream/registry.js";
import type { KnownServers } from "../upstream/known-servers.js";
import type { ToolViews } from "./tool-views.js";
import type { ActivityLog } from "./activity-log.js";

export interface GatewayContext {
  registry: ServerRegistry;
  sessions: SessionManager;
  settings: GatewaySettings;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  version: string;
  /**
   * The state store (docs/adr/0007), opened by the gateway's start (listen()
   * or serveStdio()) and closed last by close(); reading it before start
   * throws EMCP_CLOSED.
   */
  readonly store: Store;
  /** Token buckets on tool calls (gateway.rateLimits, docs/adr/0023); undefined when none are configured. */
  readonly rateLimits?: RateLimiter | undefined;
  /** The decision pipeline of tool calls (docs/adr/0022); undefined when gateway.governance is not set. */
  readonly governance?: Governance | undefined;
  /** The audit trail's export (OpenTelemetry log records) besides the store; undefined unless an exporter is set. */
  readonly auditLog?: AuditSink | undefined;
  /** Calls waiting for a person's approval: their tasks (docs/adr/0025); with governance only. */
  readonly approvals?: ApprovalRunner | undefined;
  /** The approval records (the console decides through them); with governance only. */
  readonly approvalRecords?: Approvals | undefined;
  /** Curated tools and virtual servers (gateway.governance.curation / virtualServers, docs/adr/0024), whatever the profile. */
  readonly curation?: Curation | undefined;
  /** The faces' tool views, compared across a reload to send list_changed (tool-views.ts). */
  readonly toolViews?: ToolViews | undefined;
  /** What happened, for the console's Activity and Upstreams pages (activity-log.ts); absent in library uses that build their own context. */
  readonly activity?: ActivityLog | undefined;
  /** What each upstream answered when last connected: a transparent session's initialize answers from it (docs/adr/0034). */
  readonly knownServers?: KnownServers | undefined;
}
