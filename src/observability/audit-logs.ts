/**
 * The audit trail as OpenTelemetry log records (issue 24, docs/adr/0022 §audit
 * export): each decision record and console action, besides the store, goes
 * out as one LogRecord when the OTEL_* environment sets a logs exporter —
 * OTEL_LOGS_EXPORTER=otlp, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (used as given) or
 * OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/logs), as tracing.ts decides for traces;
 * OTEL_LOGS_EXPORTER=none turns it off. OTLP/HTTP with JSON bodies
 * (exporter-logs-otlp-http; a collector's OTLP/HTTP receiver takes both
 * encodings), batched (OTEL_BLRP_*); headers and timeout from OTEL_EXPORTER_OTLP_(LOGS_)*
 * (the exporter reads those from process.env).
 * The SDK is required only then (docs/adr/0017-lazy-start.md). Attributes name
 * the principal by its hash and the arguments by their digest; the arguments
 * only when the record carries them (governance.audit.storeArguments).
 */
import { createRequire } from "node:module";
import type { AnyValueMap, Logger, SeverityNumber } from "@opentelemetry/api-logs";
import type * as OtlpLogs from "@opentelemetry/exporter-logs-otlp-http";
import type * as Resources from "@opentelemetry/resources";
import type * as SdkLogs from "@opentelemetry/sdk-logs";
import type { AuditSink, ConsoleActionRecord } from "../governance/audit-sink.js";
import type { DecisionRecord } from "../store/contracts.js";

const require = createRequire(import.meta.url);

/** SeverityNumber.INFO and .WARN (api-logs' enum is a value: not loaded for two numbers). */
const INFO = 9 as SeverityNumber;
const WARN = 13 as SeverityNumber;

export interface AuditLogs extends AuditSink {
  /** Flushes what is batched and stops the exporter. */
  shutdown(): Promise<void>;
}

/** Whether the OTEL_* environment asks for log records. */
export function auditLogsConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  const exporter = env.OTEL_LOGS_EXPORTER?.trim();
  if (exporter) return exporter !== "none";
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_LOGS_ENDPOINT?.trim());
}

/** Where the records go: the logs endpoint as given, else the base endpoint's /v1/logs; undefined: the exporter's default (localhost:4318). */
export function logsEndpoint(env: NodeJS.ProcessEnv): string | undefined {
  const own = env.OTEL_EXPORTER_OTLP_LOGS_ENDPOINT?.trim();
  if (own) return own;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, "")}/v1/logs` : undefined;
}

/** The audit log exporter the environment asks for, or undefined (then nothing is loaded). */
export function setUpAuditLogs(options: {
  version: string;
  env?: NodeJS.ProcessEnv | undefined;
  warn?: ((message: string) => void) | undefined;
}): AuditLogs | undefined {
  const env = options.env ?? process.env;
  if (!auditLogsConfigured(env)) return undefined;
  const exporterName = env.OTEL_LOGS_EXPORTER?.trim();
  if (exporterName && exporterName !== "otlp") {
    options.warn?.(`OTEL_LOGS_EXPORTER=${exporterName} is not supported by emceepee; audit log records go over OTLP/HTTP. Set otlp or none.`);
  }
  const protocol = (env.OTEL_EXPORTER_OTLP_LOGS_PROTOCOL ?? "").trim();
  if (protocol && protocol !== "http/json") {
    options.warn?.(`OTEL_EXPORTER_OTLP_LOGS_PROTOCOL=${protocol} is not supported by emceepee; audit log records go over http/json (port 4318).`);
  }
  const { detectResources, envDetector, resourceFromAttributes } = require("@opentelemetry/resources") as typeof Resources;
  const { BatchLogRecordProcessor, LoggerProvider } = require("@opentelemetry/sdk-logs") as typeof SdkLogs;
  const { OTLPLogExporter } = require("@opentelemetry/exporter-logs-otlp-http") as typeof OtlpLogs;
  const url = logsEndpoint(env);
  const resource = resourceFromAttributes({ "service.name": "emceepee" }).merge(detectResources({ detectors: [envDetector] }));
  const exporter = new OTLPLogExporter(url ? { url } : {});
  const provider = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor({ exporter, ...batchOptions(env) })] });
  const logger = provider.getLogger("emceepee.audit", options.version);
  let done = false;
  return {
    decision: (record) => emit(logger, () => decisionLogRecord(record)),
    consoleAction: (action) => emit(logger, () => consoleActionLogRecord(action)),
    async shutdown() {
      if (done) return;
      done = true;
      await provider.shutdown();
    },
  };
}

/** OTEL_BLRP_* (the batch processor no longer reads them itself); a value that is not a positive integer is the default. */
function batchOptions(env: NodeJS.ProcessEnv): Omit<SdkLogs.BatchLogRecordProcessorOptions, "exporter"> {
  const n = (key: string) => {
    const v = Number(env[key]);
    return Number.isInteger(v) && v > 0 ? v : undefined;
  };
  const options = {
    scheduledDelayMillis: n("OTEL_BLRP_SCHEDULE_DELAY"),
    exportTimeoutMillis: n("OTEL_BLRP_EXPORT_TIMEOUT"),
    maxQueueSize: n("OTEL_BLRP_MAX_QUEUE_SIZE"),
    maxExportBatchSize: n("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE"),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}

type Emitted = Parameters<Logger["emit"]>[0];

/** Never throws: the audit trail in the store is the record; the export is a copy. */
function emit(logger: Logger, build: () => Emitted): void {
  try {
    logger.emit(build());
  } catch {
    /* an exporter problem must not fail a call */
  }
}

/** One decision record as a LogRecord: event `emceepee.governance.decision`. */
export function decisionLogRecord(r: DecisionRecord): Emitted {
  const attributes: AnyValueMap = {
    "emceepee.decision.id": r.id,
    "emceepee.decision.outcome": r.outcome,
    "emceepee.decision.decided_by": r.decidedBy,
    "emceepee.governance.profile": r.profile,
    "emceepee.face": r.face,
    "emceepee.server": r.server,
    "gen_ai.tool.name": r.tool,
    "emceepee.arguments.digest": r.argumentsDigest,
    "emceepee.policy.version": r.policyVersion,
  };
  const optional: Record<string, string | string[] | undefined> = {
    "emceepee.governance.profile_name": r.profileName,
    "enduser.pseudo.id": r.principalHash,
    "emceepee.session.hash": r.sessionHash,
    "emceepee.rule.id": r.ruleId,
    "emceepee.policy.ids": r.policyIds,
    "emceepee.decision.error": r.error,
    "emceepee.approval.id": r.approval?.id,
    "emceepee.approval.by": r.approval?.by,
    "emceepee.approval.reason": r.approval?.reason,
    // Present only when governance.audit.storeArguments kept them in the record.
    "emceepee.arguments": r.arguments === undefined ? undefined : JSON.stringify(r.arguments),
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) attributes[k] = v;
  const by = r.ruleId ?? (r.policyIds ? `cedar ${r.policyIds.join(",")}` : r.decidedBy);
  return {
    eventName: "emceepee.governance.decision",
    timestamp: r.at,
    severityNumber: r.outcome === "allow" || r.outcome === "approval_approved" ? INFO : WARN,
    severityText: r.outcome === "allow" || r.outcome === "approval_approved" ? "INFO" : "WARN",
    body: `${r.outcome} ${r.server}/${r.tool} (${by})`,
    attributes,
  };
}

/** One console action as a LogRecord: event `emceepee.console.action`. */
export function consoleActionLogRecord(a: ConsoleActionRecord): Emitted {
  const attributes: AnyValueMap = { "emceepee.console.action": a.action, "emceepee.console.role": a.role };
  attributes["enduser.pseudo.id"] = a.principalHash ?? "operator";
  for (const [k, v] of Object.entries(a.details)) attributes[`emceepee.console.${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`] = v;
  return {
    eventName: "emceepee.console.action",
    timestamp: a.at,
    severityNumber: INFO,
    severityText: "INFO",
    body: `console ${a.action}${(a.details.approvalId ?? a.details.taskId ?? a.details.requestId) ? ` ${a.details.approvalId ?? a.details.taskId ?? a.details.requestId}` : ""}`,
    attributes,
  };
}
