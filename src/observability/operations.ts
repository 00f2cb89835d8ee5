/**
 * The requests in flight on one tapped transport, from the request to its
 * response: each may have a span (tracing on) and always has its start time;
 * finish() ends the span with `error.type` and reports one OperationSample.
 * A request ends with its response, with a `notifications/cancelled` naming
 * it (no response follows one), or with the transport (`transport_closed`).
 */
import { SpanStatusCode, type Span } from "@opentelemetry/api";
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { OperationSample } from "./metrics.js";
import { methodLabel, toolNameOf, type NetworkTransport, type RequestInfo } from "./semconv.js";

interface Inflight {
  method: string;
  tool: string | undefined;
  started: number;
  span: Span | undefined;
}

export interface Finished {
  sample: OperationSample;
  /** The call got a successful result (its tool exists: its name may be a metric label). */
  answered: boolean;
}

export class InflightOperations {
  private readonly inflight = new Map<RequestId, Inflight>();

  constructor(
    private readonly transport: NetworkTransport,
    private readonly report: (finished: Finished) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  begin(request: RequestInfo, span: Span | undefined): void {
    this.inflight.set(request.id, { method: methodLabel(request.method), tool: toolNameOf(request), started: this.now(), span });
  }

  /** Ends the request with id `id` (if it is in flight); `errorType` undefined means it succeeded. */
  finish(id: RequestId, errorType: string | undefined, answered: boolean): void {
    const op = this.inflight.get(id);
    if (!op) return;
    this.inflight.delete(id);
    const seconds = (this.now() - op.started) / 1000;
    if (op.span) {
      if (errorType !== undefined) {
        op.span.setAttribute("error.type", errorType);
        op.span.setStatus({ code: SpanStatusCode.ERROR });
      }
      op.span.end();
    }
    this.report({ sample: { method: op.method, tool: op.tool, errorType, transport: this.transport, seconds }, answered });
  }

  /** The transport closed: whatever is still in flight ends unanswered. */
  closeAll(): void {
    for (const id of [...this.inflight.keys()]) this.finish(id, "transport_closed", false);
  }
}
