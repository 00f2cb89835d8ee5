/**
 * SDK workaround — McpServer answers some tools/call failures itself: input
 * validation, an unknown or disabled tool, a handler that throws. It builds
 * that `isError` result with its private `createToolError(message)` and
 * offers no hook, so a face that decorates every tool response (the meta
 * face's session envelope) overrides that method on its instance.
 *
 * Touches the private `McpServer.createToolError`. Canary:
 * test/unit/sdk-canaries.test.ts.
 */
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

interface ToolErrorInternals {
  /** Returns a result; ours may return a promise of one (see wrapToolErrors). */
  createToolError?: (message: string) => CallToolResult;
}

/**
 * Passes every tool-error result `server` builds itself through `decorate`,
 * which may be async: McpServer returns createToolError()'s value from its
 * async handler, so a promise is awaited (a canary checks it). Throws when
 * the SDK no longer has `createToolError` (the face would otherwise lose its
 * decoration silently).
 */
export function wrapToolErrors(server: McpServer, decorate: (result: CallToolResult) => CallToolResult | Promise<CallToolResult>): void {
  const internals = server as unknown as ToolErrorInternals;
  const original = internals.createToolError;
  if (typeof original !== "function") {
    throw new Error("McpServer.createToolError is gone from @modelcontextprotocol/sdk: update src/mcp/tool-errors.ts");
  }
  // The SDK returns this from an async handler, which awaits a promise: typed as the SDK declares it.
  internals.createToolError = (message) => decorate(original.call(server, message)) as CallToolResult;
}
