/**
 * The SDK client transport's failure to open the optional standalone GET stream (a POST-only server answers it with
 * 404; src/upstream/connection.ts checks such a 404 with a ping instead of losing the session). The SDK's
 * `StreamableHTTPError` carries the HTTP status as `code` but nothing saying which request failed, so the message is
 * the only mark of the GET stream; test/integration/upstream-post-only.test.ts is the canary for both.
 */
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/** Whether `err` is the SDK's failure to open the standalone GET stream. */
export function isStandaloneStreamError(err: unknown): boolean {
  return err instanceof StreamableHTTPError && err.message.includes(": Failed to open SSE stream: ");
}
