/**
 * Structured logs (pino, JSON lines) always go to stderr: in stdio mode stdout
 * carries the MCP protocol. Secrets (tokens, upstream headers and env) are redacted.
 */
import { pino, type Logger } from "pino";

export type { Logger };

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";

export function createLogger(level: LogLevel = "info"): Logger {
  return pino(
    {
      name: "emceepee",
      level,
      redact: {
        paths: ["token", "*.token", "headers", "*.headers", "env", "*.env", "config.headers", "config.env"],
        censor: "[redacted]",
      },
    },
    pino.destination({ dest: 2, sync: true }),
  );
}

export const silentLogger: Logger = pino({ level: "silent" });
