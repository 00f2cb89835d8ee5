/** Handlers for an upstream connection or client built by a test that expects no server→client request of it. */
import type { UpstreamHandlers } from "../../src/upstream/client-handlers.js";

export function unusedHandlers(): UpstreamHandlers {
  return {
    onElicit: () => Promise.reject(new Error("not asked")),
    onSample: () => Promise.reject(new Error("not asked")),
    onNotification: () => undefined,
    onLog: () => undefined,
    onStderr: () => undefined,
    onListRoots: () => Promise.resolve({ roots: [] }),
    onDisconnect: () => undefined,
  };
}
