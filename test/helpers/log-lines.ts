/**
 * A gateway logger whose JSON lines a test reads back: `lines` holds each
 * line parsed, in order, for assertions on what the gateway logged.
 */
import { Writable } from "node:stream";
import { createLogger, type Logger, type LogLevel } from "../../src/logging.js";

export function logLines(level: LogLevel = "info"): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger(level, sink), lines };
}
