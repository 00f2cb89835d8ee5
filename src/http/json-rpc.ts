/**
 * The HTTP edge's request bodies and the errors it words itself: bounded
 * reads that drain what is over the bound (so a 413 reaches the client and
 * the connection closes cleanly, docs/design/limits.md LM-1), JSON-RPC bodies
 * checked for nesting depth and empty batches before anything recursive
 * touches them, and HTTP-level JSON-RPC error replies.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../errors.js";
import type { Logger } from "../logging.js";

/** An HTTP-level JSON-RPC error the HTTP layer words itself (bad session header, parse error, guards). */
export function sendJsonRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  send(res, status, { code, message }, headers);
}

/** Answers with the JSON-RPC error the one boundary (toJsonRpcError) makes of `err`. */
export function sendErrorReply(res: ServerResponse, status: number, err: unknown, logger?: Logger): void {
  const { code, message, data } = toJsonRpcError(err, logger);
  send(res, status, { code, message, ...(data !== undefined ? { data } : {}) });
}

function send(res: ServerResponse, status: number, error: { code: number; message: string; data?: unknown }, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  // A body left unread (or cut off) cannot be told from the next request on the connection: close it after this reply.
  const close = status === 413 || (status >= 400 && (res.req as IncomingMessage | undefined)?.complete === false);
  res.writeHead(status, { "Content-Type": "application/json", ...(close ? { Connection: "close" } : {}), ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error, id: null }));
}

export class BodyTooLargeError extends Error {}

/**
 * Reads a request body up to maxBytes. Beyond it, the rest is read and thrown
 * away (up to drainLimit(maxBytes) in all, then the request is destroyed)
 * before BodyTooLargeError: destroying a request mid-body resets the
 * connection, and the client never sees the 413.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const tooLarge = () => new BodyTooLargeError(`request body exceeds gateway.http.maxBodyBytes (${maxBytes} bytes); send less, or raise the bound`);
    const declared = Number(req.headers["content-length"]);
    const drainBytes = drainLimit(maxBytes);
    if (Number.isFinite(declared) && declared > drainBytes) {
      // Not worth draining: refuse at once (the reply closes the connection).
      req.resume();
      return reject(tooLarge());
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else if (chunks.length > 0) chunks.length = 0;
      if (size > drainBytes) {
        cleanup();
        req.resume();
        reject(tooLarge());
      }
    };
    const onEnd = () => {
      cleanup();
      if (size > maxBytes) reject(tooLarge());
      else resolve(Buffer.concat(chunks).toString("utf8"));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onClose = () => {
      cleanup();
      if (!req.complete) reject(new Error("the client closed the connection before its request body was complete"));
    };
    const cleanup = () => {
      req.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose);
    };
    req.on("data", onData).on("end", onEnd).on("error", onError).on("close", onClose);
  });
}

/** How much of an oversized body is read and thrown away before the request is destroyed instead: 4 × the bound, at least 16 MiB. */
function drainLimit(maxBytes: number): number {
  return Math.max(4 * maxBytes, 16 * 1024 * 1024);
}

/** A POST body the edge refuses before it reaches an MCP transport: the HTTP status, JSON-RPC code and message (or the gateway error to answer with). */
export class BodyRejected extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
    readonly gatewayError?: GatewayError,
  ) {
    super(message);
  }
}

/**
 * Parses a JSON-RPC POST body. Refuses (BodyRejected) what is not JSON
 * (-32700), JSON nested deeper than `maxDepth` (EMCP_BAD_ARGUMENTS, -32602:
 * recursive code later on — schema validation, JSON.stringify — would
 * overflow the stack), and an empty batch (-32600, JSON-RPC 2.0 §6).
 */
export function parseJsonRpcBody(text: string, maxDepth: number): unknown {
  const depth = jsonNestingDepth(text, maxDepth);
  if (depth > maxDepth) {
    const error = new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `the JSON body is nested more than ${maxDepth} levels deep (gateway.http.maxJsonDepth); flatten the data, or pass it by reference (a resource URI or file path)`,
      { details: { maxJsonDepth: maxDepth } },
    );
    throw new BodyRejected(400, -32602, error.message, error);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new BodyRejected(400, -32700, `Parse error: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (Array.isArray(body) && body.length === 0) {
    throw new BodyRejected(400, -32600, "Invalid Request: an empty batch ([]); send one JSON-RPC message or a non-empty array of them");
  }
  return body;
}

/**
 * The deepest nesting of arrays and objects in JSON text, counted in one pass
 * over the characters (strings skipped); stops counting once past `stopAbove`.
 * Not a validator: JSON.parse decides what is well-formed.
 */
export function jsonNestingDepth(text: string, stopAbove = Infinity): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max && (max = depth) > stopAbove) return max;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}
