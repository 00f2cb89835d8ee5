/**
 * SDK boundary — what the SDK Client checks on a plain tools/call: it refuses
 * a tool listed as task-required and checks the structured content of a tool
 * listed with an output schema, both from caches its last tools/list filled
 * (private in 1.32). A call it would do neither to may go raw, past the
 * Client (src/upstream/raw-calls.ts). Canary: test/unit/sdk-canaries.test.ts.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";

interface ClientToolCaches {
  getToolOutputValidator?: (name: string) => unknown;
  isToolTaskRequired?: (name: string) => boolean;
}

/** Whether `client` would pass a plain tools/call of `tool` through unchecked. false when the SDK lacks what this reads. */
export function sdkLeavesCallUnchecked(client: Client, tool: string): boolean {
  const caches = client as unknown as ClientToolCaches;
  if (typeof caches.getToolOutputValidator !== "function" || typeof caches.isToolTaskRequired !== "function") return false;
  return !caches.isToolTaskRequired.call(client, tool) && caches.getToolOutputValidator.call(client, tool) === undefined;
}
