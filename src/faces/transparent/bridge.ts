/**
 * The transparent face's DownstreamBridge: forwards an upstream's
 * server→client requests and notifications to this session's own client.
 * Requests ride the stream of an in-flight client request to the same
 * upstream when there is one (so clients without a standalone GET stream
 * still get them), else the standalone stream.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListRootsResultSchema,
  type ClientCapabilities,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";
import type { DownstreamBridge } from "../../session/bridge.js";
import type { Catalog } from "./catalog.js";

export class InflightRequests {
  private readonly byServer = new Map<string, RequestId[]>();

  track(server: string, id: RequestId): () => void {
    const list = this.byServer.get(server) ?? [];
    list.push(id);
    this.byServer.set(server, list);
    return () => {
      const i = list.indexOf(id);
      if (i >= 0) list.splice(i, 1);
      if (!list.length) this.byServer.delete(server);
    };
  }

  latest(server: string): RequestId | undefined {
    return this.byServer.get(server)?.at(-1);
  }
}

export function createBridge(
  server: Server,
  clientCapabilities: ClientCapabilities,
  catalog: Catalog,
  inflight: InflightRequests,
  requestTimeoutMs: number,
  /** Resolves once the client has sent `initialized`; nothing is sent to it before (see whenInitialized). */
  initialized: Promise<void> = Promise.resolve(),
): DownstreamBridge {
  let ready = false;
  void initialized.then(() => (ready = true));
  const send = (upstream: string, method: string, params: Record<string, unknown> | undefined) => {
    let forwarded = params;
    if (method === "notifications/message" && catalog.target.kind === "all" && params) {
      forwarded = {
        ...params,
        logger: params.logger ? `${upstream}/${typeof params.logger === "string" ? params.logger : JSON.stringify(params.logger)}` : upstream,
      };
    }
    // Capabilities the client was not offered make the SDK throw: such notifications are not for it.
    try {
      void server.notification({ method, ...(forwarded ? { params: forwarded } : {}) }).catch(() => undefined);
    } catch {
      /* not advertised on this face */
    }
  };
  const related = (upstream: string) => {
    const id = inflight.latest(upstream);
    return id === undefined ? {} : { relatedRequestId: id };
  };
  return {
    clientCapabilities,
    aggregate: catalog.target.kind === "all",
    serves: (upstream) => (catalog.target.kind === "all" ? catalog.servers().includes(upstream) : catalog.target.server === upstream),
    whenInitialized: (signal, timeoutMs) => (ready ? Promise.resolve(true) : waitInitialized(initialized, signal, timeoutMs)),
    elicit: async (upstream, params, signal) => {
      return server.request({ method: "elicitation/create", params }, ElicitResultSchema, { signal, timeout: requestTimeoutMs, ...related(upstream) });
    },
    sample: async (upstream, params, signal) => {
      return server.request({ method: "sampling/createMessage", params }, CreateMessageResultSchema, {
        signal,
        timeout: requestTimeoutMs,
        ...related(upstream),
      });
    },
    listRoots: async (signal) => {
      return server.request({ method: "roots/list" }, ListRootsResultSchema, { signal });
    },
    notify(upstream, method, params) {
      // Nothing goes to a client before it is initialized (the session's buffers still have it).
      if (ready) send(upstream, method, params);
    },
  };
}

/** true once `initialized` resolves, false after `timeoutMs`; rejects if `signal` aborts first. */
function waitInitialized(initialized: Promise<void>, signal: AbortSignal, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const done = (fn: () => void) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      fn();
    };
    const onAbort = () => done(() => reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? "cancelled"))));
    const timer = setTimeout(() => done(() => resolve(false)), timeoutMs);
    timer.unref();
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    void initialized.then(() => done(() => resolve(true)));
  });
}
