/**
 * The relay's raw-send seam on an upstream connection (docs/adr/0037 §2): a
 * plain `tools/call` written to the upstream's transport as one JSON-RPC
 * message, past the SDK Client's `Protocol` (its zod parse of the result,
 * per-request maps and timers), and its answer taken off the transport before
 * the `Protocol` sees it. Raw calls have their own id space (strings `r<n>`,
 * never the SDK's numbers), so neither side mistakes the other's answers.
 *
 * Kept from the SDK path: progress (the call's own token, `r<n>`, reset of
 * the timeout on progress), cancel (the signal sends `notifications/cancelled`
 * with the raw id), the request timeout (on the injected clock), attribution
 * (`transport.send` gets the call's attribution options, so RequestAttribution
 * sees the id), and the connection's loss (every raw call in flight fails with
 * ConnectionClosed, which the connection turns into EMCP_UPSTREAM_UNAVAILABLE).
 * Not kept: the SDK's output-schema check — callers use it only for tools
 * the SDK would not check (src/mcp/tool-call-checks.ts).
 */
import type { ProgressCallback } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, type CallToolResult, type JSONRPCMessage, type Progress } from "@modelcontextprotocol/sdk/types.js";
import type { Clock, TimerHandle } from "../clock.js";
import { cancelledRejection, upstreamRejection } from "../errors.js";

export interface RawCallOptions {
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  onprogress?: ProgressCallback | undefined;
  resetTimeoutOnProgress?: boolean | undefined;
  /** Passed to `transport.send` (the attribution's `onresumptiontoken`). */
  sendOptions?: TransportSendOptions | undefined;
}

interface RawCall {
  resolve(result: CallToolResult): void;
  reject(err: unknown): void;
  onprogress?: ProgressCallback | undefined;
  timer?: TimerHandle | undefined;
  timeoutMs: number;
  resetOnProgress: boolean;
}

export class RawCalls {
  private readonly calls = new Map<string, RawCall>();
  private next = 0;
  private closed = false;

  constructor(
    private readonly transport: Transport,
    private readonly clock: Clock,
  ) {}

  /**
   * Takes raw answers off the transport, right above the SDK client (under the observability tap, which must see
   * every answer), and fails the raw calls when it closes. Call before the client connects: it hooks the transport's start.
   */
  install(): void {
    const transport = this.transport;
    const start = transport.start.bind(transport);
    transport.start = () => {
      const dispatch = transport.onmessage;
      const onclose = transport.onclose;
      transport.onmessage = (message, extra) => {
        if (this.calls.size > 0 && this.takeAnswer(message)) return;
        dispatch?.(message, extra);
      };
      // After the SDK's own close handling (the connection marks itself lost first), as the SDK fails its requests.
      transport.onclose = () => {
        onclose?.();
        this.close();
      };
      return start();
    };
  }

  /** Takes raw calls' progress off the transport before the SDK's progress dispatch (ordered-progress.ts) sees it: call after that is installed. */
  takeProgress(): void {
    const dispatch = this.transport.onmessage;
    this.transport.onmessage = (message, extra) => {
      if (this.calls.size > 0 && this.takeProgressOf(message)) return;
      dispatch?.(message, extra);
    };
  }

  /** Calls in flight. */
  get size(): number {
    return this.calls.size;
  }

  /** One plain tools/call; resolves with the upstream's result as sent (not parsed by a schema), rejects as the SDK's request would. */
  call(
    params: { name: string; arguments?: Record<string, unknown> | undefined; _meta?: Record<string, unknown> | undefined },
    o: RawCallOptions,
  ): Promise<CallToolResult> {
    if (this.closed) return Promise.reject(upstreamRejection(ErrorCode.ConnectionClosed, "Connection closed"));
    o.signal?.throwIfAborted();
    const id = `r${++this.next}`;
    const message = {
      jsonrpc: "2.0" as const,
      id,
      method: "tools/call",
      params: o.onprogress ? { ...params, _meta: { ...params._meta, progressToken: id } } : params,
    };
    return new Promise<CallToolResult>((resolve, reject) => {
      const onAbort = () => this.cancel(id, o.signal?.reason);
      const settle = () => {
        this.clock.clearTimeout(call.timer);
        o.signal?.removeEventListener("abort", onAbort);
      };
      const call: RawCall = {
        resolve: (r) => (settle(), resolve(r)),
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        reject: (e) => (settle(), reject(e)),
        onprogress: o.onprogress,
        timeoutMs: o.timeoutMs,
        resetOnProgress: o.resetTimeoutOnProgress ?? false,
      };
      this.calls.set(id, call);
      o.signal?.addEventListener("abort", onAbort, { once: true });
      this.arm(id, call);
      this.transport.send(message, o.sendOptions).catch((err: unknown) => {
        if (this.calls.delete(id)) call.reject(err);
      });
    });
  }

  /** The transport closed: every raw call in flight fails as the SDK fails its own (ConnectionClosed). */
  close(): void {
    this.closed = true;
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const c of calls) c.reject(upstreamRejection(ErrorCode.ConnectionClosed, "Connection closed"));
  }

  /** true: `message` was a raw call's answer, and is handled. */
  private takeAnswer(message: JSONRPCMessage): boolean {
    const m = message as { id?: unknown; method?: unknown; result?: unknown; error?: { code: number; message: string; data?: unknown } };
    if (typeof m.id !== "string" || m.method !== undefined) return false;
    const call = this.calls.get(m.id);
    if (!call) return false;
    this.calls.delete(m.id);
    if (m.error) call.reject(upstreamRejection(m.error.code, m.error.message, m.error.data));
    else call.resolve(m.result as CallToolResult);
    return true;
  }

  /** true: `message` was progress of a raw call (its token is the call's id), and is handled. */
  private takeProgressOf(message: JSONRPCMessage): boolean {
    const m = message as { method?: unknown; params?: { progressToken?: unknown } };
    if (m.method !== "notifications/progress" || typeof m.params?.progressToken !== "string") return false;
    const call = this.calls.get(m.params.progressToken);
    if (!call) return false;
    const { progressToken: _token, ...progress } = m.params as Progress & { progressToken: string; _meta?: unknown };
    if (call.resetOnProgress) this.arm(m.params.progressToken, call);
    call.onprogress?.(progress);
    return true;
  }

  private arm(id: string, call: RawCall): void {
    this.clock.clearTimeout(call.timer);
    call.timer = this.clock.setTimeout(
      () => this.cancel(id, upstreamRejection(ErrorCode.RequestTimeout, "Request timed out", { timeout: call.timeoutMs })),
      call.timeoutMs,
    );
  }

  /** Stops waiting for call `id` (a timeout or the caller's signal) and tells the upstream, as the SDK does. */
  private cancel(id: string, reason: unknown): void {
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    void this.transport.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: String(reason) } }).catch(() => undefined);
    // As the SDK rejects: its own error as given, anything else wrapped in one (RequestTimeout) with the reason's text.
    call.reject(cancelledRejection(reason));
  }
}
