/**
 * SDK workaround — SDK 1.32's `Protocol._oncancel` returns early on a falsy `requestId`
 * (`if (!notification.params.requestId) return`), so a notifications/cancelled for request id 0 is dropped. The
 * SDK numbers a peer's requests from 0: an upstream's first elicitation or sampling request, cancelled or timed
 * out on its side, stayed pending at the gateway (listed by get_elicitations, answered into nothing). SDK v2
 * tests `=== undefined`. Here the notification handler aborts the request's handler for any id.
 *
 * Touches the private `Protocol._requestHandlerAbortControllers`. Canary: test/unit/sdk-cancel-zero.test.ts.
 */
import type { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { CancelledNotificationSchema, type RequestId } from "@modelcontextprotocol/sdk/types.js";

interface CancelInternals {
  _requestHandlerAbortControllers?: Map<RequestId, AbortController>;
}

/**
 * Makes `protocol` (an SDK Client or Server) abort the handler of any request the peer cancels, id 0 included.
 * Returns false (and changes nothing) when the SDK no longer has what this relies on.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any Protocol, whatever its request/notification/result types
export function acceptCancelOfRequestZero(protocol: Protocol<any, any, any>): boolean {
  const controllers = (protocol as unknown as CancelInternals)._requestHandlerAbortControllers;
  if (!(controllers instanceof Map)) return false;
  protocol.setNotificationHandler(CancelledNotificationSchema, (notification) => {
    const { requestId, reason } = notification.params;
    if (requestId !== undefined) controllers.get(requestId)?.abort(reason);
  });
  return true;
}
