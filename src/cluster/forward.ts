/**
 * Replica-to-replica forwarding (ADR 0013): a client's request passed to the
 * session's owner and its response piped back; call() for the replicas' own
 * requests. See docs/design/store-and-replicas.md.
 */
import http from "node:http";
import https from "node:https";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../errors.js";
import { secretEquals } from "../auth/secret.js";
import { isMediaType } from "../mcp/media-type.js";

/** The header a forwarded request carries (its value: the cluster secret). */
export const FORWARDED_HEADER = "x-emceepee-forwarded";

/** Headers that describe one hop, not the request (RFC 9110 §7.6.1), plus the ones we set. */
const HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "host",
  "content-length",
  FORWARDED_HEADER,
]);

/**
 * "refused": nothing listens at the target's address (ECONNREFUSED, before
 * anything was sent back): its process is gone, whatever its heartbeat still
 * says. "unreachable": any other failure before an answer began.
 */
export type ForwardOutcome = "answered" | "unreachable" | "refused";

/** A replica's own JSON request to another replica (not a client's request passed on). */
export interface CallOptions {
  method: "GET" | "POST";
  /** Path and query on the target, e.g. "/console/cluster/inbox". */
  path: string;
  /** Sent as JSON. */
  body?: unknown;
  /** Besides the secret (e.g. the gateway's bearer token, which the target's guards ask of every request). */
  headers?: Record<string, string>;
  /** The whole exchange, connect to last byte. */
  timeoutMs: number;
  /** Larger replies are refused. */
  maxBytes: number;
}

export interface CallReply {
  status: number;
  /** The parsed JSON reply (undefined when it was no JSON). */
  body: unknown;
}

export interface Forwarder {
  forward(req: http.IncomingMessage, res: http.ServerResponse, targetBase: string, body: string | undefined): Promise<ForwardOutcome>;
  /** A JSON request of this replica to `targetBase` over the cluster channel; rejects when it cannot be made or answered in time. */
  call(targetBase: string, options: CallOptions): Promise<CallReply>;
  close(): void;
}

/** Whether `req` carries the cluster secret (it came from another replica), compared in constant time (secretEquals: its length does not leak either). */
export function carriesSecret(req: http.IncomingMessage, secret: string): boolean {
  const value = req.headers[FORWARDED_HEADER];
  return typeof value === "string" && secretEquals(value, secret);
}

export function createForwarder(secret: string, from: string): Forwarder {
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  return {
    forward(req, res, targetBase, body) {
      const target = new URL(req.url ?? "/", targetBase);
      const headers: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(req.headers)) if (!HOP.has(name) && value !== undefined) headers[name] = value;
      headers[FORWARDED_HEADER] = secret;
      headers["x-emceepee-forwarded-by"] = from;
      if (body !== undefined) headers["content-length"] = Buffer.byteLength(body);
      const secure = target.protocol === "https:";
      return new Promise<ForwardOutcome>((resolve) => {
        const out = (secure ? https : http).request(target, { method: req.method, headers, agent: secure ? agents.https : agents.http }, (upstream) => {
          const back: http.OutgoingHttpHeaders = {};
          for (const [name, value] of Object.entries(upstream.headers)) if (!HOP.has(name) && value !== undefined) back[name] = value;
          res.writeHead(upstream.statusCode ?? 502, back);
          res.flushHeaders();
          upstream.pipe(res, { end: false });
          const sse = isMediaType(upstream.headers["content-type"], "text/event-stream");
          upstream.on("error", () => undefined);
          upstream.on("close", () => {
            if (upstream.complete || res.writableEnded) res.end();
            else if (sse && !res.destroyed) {
              // The owner died mid-stream: its requests will not be answered there, so say so here.
              for (const id of requestIds(body)) res.write(`event: message\ndata: ${JSON.stringify(ownerLost(id, targetBase))}\n\n`);
              res.end();
            } else res.destroy();
            resolve("answered");
          });
        });
        out.on("error", (err: NodeJS.ErrnoException) => {
          // Answered: the stream was under way, or the client itself went away (nothing left to answer).
          if (res.headersSent || res.destroyed) {
            res.destroy();
            resolve("answered");
          } else resolve(err.code === "ECONNREFUSED" ? "refused" : "unreachable");
        });
        // The client went away: the owner's side of this request ends too (an SSE GET closes there).
        res.on("close", () => {
          if (!res.writableFinished) out.destroy();
        });
        out.end(body);
      });
    },
    call(targetBase, o) {
      const target = new URL(o.path, targetBase);
      const secure = target.protocol === "https:";
      const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
      const headers: http.OutgoingHttpHeaders = { ...o.headers, accept: "application/json", [FORWARDED_HEADER]: secret, "x-emceepee-forwarded-by": from };
      if (payload !== undefined) {
        headers["content-type"] = "application/json";
        headers["content-length"] = Buffer.byteLength(payload);
      }
      return new Promise<CallReply>((resolve, reject) => {
        const fail = (why: string, cause?: unknown) => {
          out.destroy();
          reject(new GatewayError(ErrorCodes.UPSTREAM_UNAVAILABLE, `replica ${targetBase} ${why}`, cause === undefined ? {} : { cause }));
        };
        const out = (secure ? https : http).request(target, { method: o.method, headers, agent: secure ? agents.https : agents.http }, (reply) => {
          const chunks: Buffer[] = [];
          let size = 0;
          reply.on("data", (chunk: Buffer) => {
            size += chunk.length;
            if (size > o.maxBytes) fail(`answered ${o.path} with more than ${o.maxBytes} bytes`);
            else chunks.push(chunk);
          });
          reply.on("error", (err) => fail(`broke off its answer to ${o.path}`, err));
          reply.on("end", () => {
            let body: unknown;
            try {
              body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
            } catch {
              body = undefined;
            }
            resolve({ status: reply.statusCode ?? 0, body });
          });
        });
        // Socket inactivity, cleared with the socket: no timer outlives the request.
        out.setTimeout(o.timeoutMs, () => fail(`did not answer ${o.path} within ${o.timeoutMs} ms`));
        out.on("error", (err) => fail(`could not be reached for ${o.path}`, err));
        out.end(payload);
      });
    },
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/** The ids of the JSON-RPC requests in a forwarded POST body (one message or a batch). */
function requestIds(body: string | undefined): Array<string | number> {
  if (body === undefined) return [];
  try {
    const parsed = JSON.parse(body) as unknown;
    const messages = Array.isArray(parsed) ? (parsed as unknown[]) : [parsed];
    return messages.flatMap((m) => {
      const id = m && typeof m === "object" && "method" in m && "id" in m ? (m as { id: unknown }).id : undefined;
      return typeof id === "string" || typeof id === "number" ? [id] : [];
    });
  } catch {
    return [];
  }
}

function ownerLost(id: string | number, owner: string): Record<string, unknown> {
  const err = toJsonRpcError(
    new GatewayError(
      ErrorCodes.UPSTREAM_UNAVAILABLE,
      `the replica holding this session (${owner}) stopped while this request ran; its result is unknown. Send it again: the session continues on another replica`,
      { details: { replica: owner } },
    ),
  );
  return { jsonrpc: "2.0", id, error: { code: err.code, message: err.message, data: err.data } };
}
