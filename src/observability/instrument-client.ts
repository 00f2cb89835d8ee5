/**
 * The tap on an upstream's client transport, installed by wrapping the
 * gateway's TransportFactory (so every connection of every session, to every
 * upstream, is tapped once, whoever makes it). Each request sent upstream gets
 * a `mcp.client` span (CLIENT kind, child of the active span: the downstream
 * request being served, or the promoted task's call it started), its trace
 * context written into a copy of `params._meta` (`traceparent`, `tracestate`,
 * `baggage`), and `mcp.client.operation.duration` labelled with the upstream;
 * when the transport closes, `mcp.client.session.duration`.
 * With tracing off, a client's own `traceparent` forwarded in `_meta` passes
 * through unchanged.
 */
import { SpanKind, context, trace, type Tracer } from "@opentelemetry/api";
import { isStdioConfig } from "../config/server-entry.js";
import { tapTransport } from "../mcp/transport-tap.js";
import type { TransportFactory } from "../upstream/transport-types.js";
import type { GatewayMetrics } from "./metrics.js";
import { InflightOperations } from "./operations.js";
import { cancelledId, requestAttributes, requestOf, responseOf, spanName, type NetworkTransport } from "./semconv.js";
import { injectIntoParams } from "./trace-context.js";

export interface ClientTapOptions {
  metrics?: GatewayMetrics | undefined;
  tracer?: Tracer | undefined;
}

/** `factory` with every transport it creates tapped; `factory` itself when there is nothing to record. */
export function instrumentTransportFactory(factory: TransportFactory, options: ClientTapOptions): TransportFactory {
  const { metrics, tracer } = options;
  if (!metrics && !tracer) return factory;
  return (name, config, transportOptions) => {
    const created = factory(name, config, transportOptions);
    const network: NetworkTransport = isStdioConfig(config) ? "pipe" : "tcp";
    const ops = new InflightOperations(network, ({ sample, answered }) => metrics?.clientOperation(name, sample, answered));
    // The connection's duration (mcp.client.session.duration): from the transport's creation to its first close.
    const opened = performance.now();
    let ended = false;
    tapTransport(created.transport, {
      received(message, deliver) {
        const response = responseOf(message);
        if (response) ops.finish(response.id, response.errorType, response.errorType === undefined);
        deliver();
      },
      sending(message) {
        const request = requestOf(message);
        if (!request) {
          const cancelled = cancelledId(message);
          if (cancelled !== undefined) ops.finish(cancelled, "cancelled", false);
          return message;
        }
        if (!tracer) {
          ops.begin(request, undefined);
          return message;
        }
        const parent = context.active();
        const attributes = requestAttributes(request, network);
        attributes["emceepee.upstream"] = name;
        const span = tracer.startSpan(spanName(request), { kind: SpanKind.CLIENT, attributes }, parent);
        ops.begin(request, span);
        return { ...message, params: injectIntoParams(request.params, trace.setSpan(parent, span)) } as typeof message;
      },
      closed() {
        ops.closeAll();
        if (ended) return;
        ended = true;
        metrics?.upstreamSessionEnded(name, network, (performance.now() - opened) / 1000);
      },
    });
    return created;
  };
}
