/**
 * Forwards an upstream call's progress to the downstream request that asked
 * for it, under the client's own progress token. Sends are chained and must
 * be flushed before the result is returned: otherwise the response can
 * overtake the last notification and the client drops it.
 */
import type { ProgressCallback, RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { ProgressToken, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";

export interface ProgressForwarder {
  onprogress: ProgressCallback | undefined;
  flush(): Promise<void>;
}

export function forwardProgress(extra: RequestHandlerExtra<ServerRequest, ServerNotification>, token: ProgressToken | undefined): ProgressForwarder {
  if (token === undefined) return { onprogress: undefined, flush: async () => undefined };
  let chain: Promise<void> = Promise.resolve();
  return {
    onprogress: (p) => {
      chain = chain.then(() => extra.sendNotification({ method: "notifications/progress", params: { ...p, progressToken: token } })).catch(() => undefined);
    },
    flush: () => chain,
  };
}
