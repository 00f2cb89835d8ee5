/**
 * SDK seam — a tap on one MCP transport: sees every message it receives and
 * may replace every message it sends. Observability (src/observability) uses
 * it on both sides: a face's server transport (spans and durations of the
 * requests the gateway serves) and an upstream client transport (of the
 * requests it sends, with trace context written into `params._meta`).
 *
 * Relies on two things the SDK's Protocol does (canary:
 * test/unit/sdk-canaries.test.ts): connect() sets `transport.onmessage` and
 * `onclose` before it calls `transport.start()`, and every message goes out
 * through `transport.send` (read from the instance each time). A transport
 * not yet connected is tapped when it starts; a connected one at once.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js";

export interface TransportTap {
  /**
   * A message arrived. Returns how to dispatch it: `deliver()` runs the
   * Protocol's handler (a tap may run it inside an async context of its own).
   * `extra` is what the transport passed with it (HTTP: the request's `authInfo`).
   */
  received(message: JSONRPCMessage, deliver: () => void, extra?: MessageExtraInfo): void;
  /** A message is about to be sent: returns the message to send instead (or the same one). */
  sending(message: JSONRPCMessage): JSONRPCMessage;
  /** The transport closed. */
  closed(): void;
}

/** Installs `tap` on `transport` (see the header for when). */
export function tapTransport(transport: Transport, tap: TransportTap): void {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => send(tap.sending(message), options);
  const wrapHandlers = () => {
    const onmessage = transport.onmessage;
    if (onmessage) {
      transport.onmessage = (message: JSONRPCMessage, extra?: MessageExtraInfo) => tap.received(message, () => onmessage(message, extra), extra);
    }
    const onclose = transport.onclose;
    transport.onclose = () => {
      tap.closed();
      onclose?.();
    };
  };
  if (transport.onmessage) {
    wrapHandlers();
    return;
  }
  const start = transport.start.bind(transport);
  transport.start = () => {
    wrapHandlers();
    return start();
  };
}
