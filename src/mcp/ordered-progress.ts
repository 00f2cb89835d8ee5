/**
 * Works around modelcontextprotocol/typescript-sdk#2580 (open in 1.32): the
 * SDK Protocol dispatches notifications in a microtask but responses
 * synchronously, so a server's final progress notification that arrives in
 * the same chunk as its response finds the progress handler already retired
 * and is dropped. A gateway must forward every progress notification, so we
 * dispatch progress synchronously, in arrival order (the approach of the SDK's
 * own fix in #2378). Call after client.connect().
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ProgressNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

export function dispatchProgressInOrder(client: Client, transport: Transport): void {
  const protocol = client as unknown as { _onprogress?: (n: unknown) => void };
  const dispatch = transport.onmessage;
  if (typeof protocol._onprogress !== "function" || !dispatch) return;
  transport.onmessage = (message, extra) => {
    const progress = ProgressNotificationSchema.safeParse(message);
    if (progress.success) {
      protocol._onprogress!.call(client, progress.data);
      return;
    }
    dispatch(message, extra);
  };
}
