/**
 * Structured logs (pino) always go to stderr: in stdio mode stdout carries the
 * MCP protocol. JSON lines for machines (the default when stderr is not a
 * terminal), or `pretty` lines for people (pino-pretty; the default on a TTY).
 * Secrets (tokens, upstream headers and env) are redacted.
 * Session ids are bearer secrets (an id is enough to `?session=` attach to a
 * session), so logs carry sessionHash(id) instead, never the id itself
 * (session loggers add it: Session.logger). A line logged while a traced
 * request is handled carries its `trace_id` and `span_id` (the active span),
 * and the fields withLogFields() set for it (the principal it is served for).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import { isSpanContextValid, trace } from "@opentelemetry/api";
import { pino, type DestinationStream, type Logger } from "pino";
import type PinoPretty from "pino-pretty";

// pino-pretty (CommonJS) is required only when a pretty logger is made: JSON logs do not pay for it (docs/adr/0017-lazy-start.md).
const require = createRequire(import.meta.url);

export type { Logger };

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";

/** `json`: one JSON object per line; `pretty`: coloured, human-readable lines (pino-pretty). */
export type LogFormat = "json" | "pretty";

/** The default format: pretty on a terminal, else JSON. */
export function defaultLogFormat(stream: { isTTY?: boolean } = process.stderr): LogFormat {
  return stream.isTTY === true ? "pretty" : "json";
}

/** The active span's ids, for every log line written inside a traced request (nothing otherwise). */
function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const ids = span.spanContext();
  return isSpanContextValid(ids) ? { trace_id: ids.traceId, span_id: ids.spanId } : {};
}

const scopedFields = new AsyncLocalStorage<Readonly<Record<string, string>>>();

/** Runs `fn` so that every line logged inside it (and in the work it starts) carries `fields`, e.g. who a request is served for. */
export function withLogFields<T>(fields: Readonly<Record<string, string>>, fn: () => T): T {
  return scopedFields.run(fields, fn);
}

/** What every line carries: the scope's fields, then the active span's ids. */
function contextFields(): Record<string, string> {
  const scoped = scopedFields.getStore();
  return scoped ? { ...scoped, ...traceFields() } : traceFields();
}

/**
 * The gateway's logger.
 * @param destination where the lines go (default: stderr, written synchronously)
 * @param format @default "json"
 */
export function createLogger(level: LogLevel = "info", destination?: DestinationStream, format: LogFormat = "json"): Logger {
  const target = destination ?? pino.destination({ dest: 2, sync: true });
  return pino(
    {
      name: "emceepee",
      level,
      redact: {
        paths: ["token", "*.token", "headers", "*.headers", "env", "*.env", "config.headers", "config.env"],
        censor: "[redacted]",
      },
      mixin: contextFields,
    },
    format === "pretty"
      ? (require("pino-pretty") as typeof PinoPretty)({
          destination: target,
          sync: true,
          colorize: process.stderr.isTTY === true,
          translateTime: "SYS:HH:MM:ss.l",
        })
      : target,
  );
}

export const silentLogger: Logger = pino({ level: "silent" });

/**
 * What logs say instead of a session id: the first 8 hex digits of its
 * SHA-256 — enough to follow one session through a log, useless to attach to it.
 */
export function sessionHash(sessionId: string): string {
  // Asked on every call (activity log, governance, metrics): remembered for the last sessions (issue 27).
  let hash = sessionHashes.get(sessionId);
  if (hash === undefined) {
    hash = createHash("sha256").update(sessionId).digest("hex").slice(0, 8);
    if (sessionHashes.size >= SESSION_HASHES_KEPT) sessionHashes.clear();
    sessionHashes.set(sessionId, hash);
  }
  return hash;
}

/** Bounded: ids of sessions long gone are forgotten by the next clear. */
const SESSION_HASHES_KEPT = 4096;
const sessionHashes = new Map<string, string>();
