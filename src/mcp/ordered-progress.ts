/**
 * SDK workaround — modelcontextprotocol/typescript-sdk#2580 (open in 1.32):
 * the SDK Protocol dispatches notifications in a microtask but responses
 * synchronously, so a server's final progress notification that arrives in
 * the same chunk as its response finds the progress handler already retired
 * and is dropped. A gateway must forward every progress notification, so we
 * dispatch progress synchronously, in arrival order (the approach of the
 * SDK's own fix in #2378).
 *
 * Touches the private `Protocol._onprogress`. Canary: test/unit/sdk-canaries.test.ts.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ProgressNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

interface ProgressInternals {
  _onprogress?: (notification: unknown) => void;
}

/**
 * Makes `client` handle progress notifications from `transport` as they
 * arrive. Call after client.connect(transport). Returns false (and changes
 * nothing) when the SDK no longer has what this relies on.
 */
export function installOrderedProgress(client: Client, transport: Transport): boolean {
  const protocol = client as unknown as ProgressInternals;
  const onprogress = protocol._onprogress;
  const dispatch = transport.onmessage;
  if (typeof onprogress !== "function" || !dispatch) return false;
  transport.onmessage = (message, extra) => {
    // Only a progress notification can pass the schema: the others skip its zod parse (issue 27: every upstream message came here).
    if ((message as { method?: unknown }).method === "notifications/progress") {
      const progress = ProgressNotificationSchema.safeParse(message);
      if (progress.success) {
        onprogress.call(client, progress.data);
        return;
      }
    }
    dispatch(message, extra);
  };
  return true;
}
