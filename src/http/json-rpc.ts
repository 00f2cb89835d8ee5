/** Small helpers for HTTP-level JSON-RPC error replies. */
import type { ServerResponse } from "node:http";
import { toJsonRpcError } from "../errors.js";
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
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error, id: null }));
}

export class BodyTooLargeError extends Error {}

/** Reads a request body up to maxBytes. */
export async function readBody(req: NodeJS.ReadableStream, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > maxBytes) throw new BodyTooLargeError(`request body exceeds ${maxBytes} bytes`);
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString("utf8");
}
