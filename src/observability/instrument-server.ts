/**
 * The tap on a face's server transport (one per downstream connection: the
 * Streamable HTTP transport of a session in McpEndpoint, the stdio one in
 * serveStdio). Each request the gateway serves gets a `mcp.server` span
 * (SERVER kind, named `{mcp.method.name} {target}`, its parent the trace
 * context the client sent in `params._meta`), and its handler runs inside it:
 * AsyncLocalStorage carries the span into every upstream request the handler
 * makes — also a promoted task's background call. When the response with
 * that id is sent, the span ends and `mcp.server.operation.duration` is
 * observed. With tracing off, only the start time is kept per request.
 * Each message is handled with its principal's log fields, span attributes
 * and counter (principal-telemetry.ts, auth/log-fields.ts), from the
 * request's `authInfo` (stdio, and every message of an attachment, too).
 */
import { SpanKind, context, trace, type Tracer } from "@opentelemetry/api";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { principalLogFields, type PrincipalLogOptions } from "../auth/log-fields.js";
import { principalOf } from "../auth/principal.js";
import { withLogFields } from "../logging.js";
import { tapTransport } from "../mcp/transport-tap.js";
import type { GatewayMetrics } from "./metrics.js";
import { InflightOperations } from "./operations.js";
import { principalSpanAttributes } from "./principal-telemetry.js";
import { cancelledId, methodLabel, requestAttributes, requestOf, responseOf, spanName, type NetworkTransport } from "./semconv.js";
import { extractFromMeta } from "./trace-context.js";

export interface ServerTapOptions {
  metrics?: GatewayMetrics | undefined;
  tracer?: Tracer | undefined;
  transport: NetworkTransport;
  /** `mcp.session.id`: the session's hash (a session id is a bearer secret: logging.ts). */
  sessionHash?: string | undefined;
  /** `mcp.protocol.version`, when known before initialize (a resumed session). */
  protocolVersion?: string | undefined;
  /** Name each request's principal (its `authInfo`, src/auth/) in its logs, span and metrics; undefined: not. */
  principals?: PrincipalLogOptions | undefined;
}

/** Taps `transport` (connected to its face's server, or about to be). A no-op when there is nothing to record. */
export function instrumentServerTransport(transport: Transport, options: ServerTapOptions): void {
  const { metrics, tracer } = options;
  const { principals } = options;
  if (!metrics && !tracer && !principals) return;
  let protocolVersion = options.protocolVersion;
  const ops = new InflightOperations(options.transport, ({ sample, answered }) => metrics?.serverOperation(sample, answered));
  tapTransport(transport, {
    received(message, received, extra) {
      const principal = principals && principalOf(extra?.authInfo);
      const deliver = principal ? () => withLogFields(principalLogFields(principal, principals), received) : received;
      const request = requestOf(message);
      if (!request) {
        const cancelled = cancelledId(message);
        if (cancelled !== undefined) ops.finish(cancelled, "cancelled", false);
        return deliver();
      }
      if (principal) metrics?.principalRequest(principal.hash, methodLabel(request.method));
      if (request.method === "initialize") {
        const requested = (request.params as { protocolVersion?: unknown } | undefined)?.protocolVersion;
        if (typeof requested === "string") protocolVersion = requested;
      }
      if (!tracer) {
        ops.begin(request, undefined);
        return deliver();
      }
      const parent = extractFromMeta(request.params, context.active());
      const attributes = requestAttributes(request, options.transport);
      if (options.sessionHash !== undefined) attributes["mcp.session.id"] = options.sessionHash;
      if (protocolVersion !== undefined) attributes["mcp.protocol.version"] = protocolVersion;
      if (principal) Object.assign(attributes, principalSpanAttributes(principal, principals));
      const span = tracer.startSpan(spanName(request), { kind: SpanKind.SERVER, attributes }, parent);
      ops.begin(request, span);
      context.with(trace.setSpan(parent, span), deliver);
    },
    sending(message) {
      const response = responseOf(message);
      if (response) ops.finish(response.id, response.errorType, response.errorType === undefined);
      return message;
    },
    closed() {
      ops.closeAll();
    },
  });
}
