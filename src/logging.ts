/**
 * Structured logs (pino, JSON lines) always go to stderr: in stdio mode stdout
 * carries the MCP protocol. Secrets (tokens, upstream headers and env) are redacted.
 * Session ids are bearer secrets (an id is enough to `?session=` attach to a
 * session), so logs carry sessionHash(id) instead, never the id itself.
 */
import { createHash } from "node:crypto";
import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";

/**
 * The gateway's logger.
 * @param destination where the JSON lines go (default: stderr, written synchronously)
 */
export function createLogger(level: LogLevel = "info", destination?: DestinationStream): Logger {
  return pino(
    {
      name: "emceepee",
      level,
      redact: {
        paths: ["token", "*.token", "headers", "*.headers", "env", "*.env", "config.headers", "config.env"],
        censor: "[redacted]",
      },
    },
    destination ?? pino.destination({ dest: 2, sync: true }),
  );
}

export const silentLogger: Logger = pino({ level: "silent" });

/**
 * What logs say instead of a session id: the first 8 hex digits of its
 * SHA-256 — enough to follow one session through a log, useless to attach to it.
 */
export function sessionHash(sessionId: string): string {
  return createHash("sha256").update(sessionId).digest("hex").slice(0, 8);
}
