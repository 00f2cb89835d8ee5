/**
 * SDK workaround — a server transport gives no event when a response leaves.
 * The HTTP endpoint must know when a request id is answered (an id stays "in
 * flight" until then: ADR 0003 §9), and the SDK Protocol sends every response
 * through `transport.send`, so we wrap that method on the instance. It must
 * be wrapped before the transport is connected to a server.
 *
 * Relies on the Protocol calling `transport.send` for each response (no
 * private member). Canary: test/unit/sdk-canaries.test.ts.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";

/** Calls `fn` with the id of each response (result or error) just before `transport` sends it. */
export function onResponseSent(transport: Transport, fn: (id: RequestId) => void): void {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if (("result" in message || "error" in message) && "id" in message && message.id !== undefined) fn(message.id);
    return send(message, options);
  };
}
