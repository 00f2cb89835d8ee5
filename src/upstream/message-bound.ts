/**
 * The bound on one upstream message (`gateway.upstream.maxMessageBytes`,
 * design LM-6): the error a call gets when its answer is over it, and how the
 * JSON-RPC id of an oversized message is found from its first and last bytes
 * alone (the middle was never kept).
 */
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCodes, GatewayError } from "../errors.js";

/** `gateway.upstream.maxMessageBytes` as people read it: "16 MiB", "512 KiB", "1000 bytes". */
export function formatBytes(bytes: number): string {
  if (bytes >= 1 << 20 && bytes % (1 << 20) === 0) return `${bytes / (1 << 20)} MiB`;
  if (bytes >= 1 << 10 && bytes % (1 << 10) === 0) return `${bytes / (1 << 10)} KiB`;
  return `${bytes} bytes`;
}

/**
 * EMCP_RESPONSE_TOO_LARGE for a message of `server` over `maxBytes`.
 * @param received its whole size when known (stdio reads to its end; HTTP stops at the bound)
 */
export function messageTooLarge(server: string, maxBytes: number, received?: number): GatewayError {
  const size = received === undefined ? `more than ${maxBytes} bytes` : `${received} bytes`;
  return new GatewayError(
    ErrorCodes.RESPONSE_TOO_LARGE,
    `upstream '${server}' sent a message of ${size}, over gateway.upstream.maxMessageBytes (${formatBytes(maxBytes)}); it was dropped. Ask the upstream for less (paging, a narrower query) or raise gateway.upstream.maxMessageBytes`,
    { details: { server, maxMessageBytes: maxBytes, ...(received === undefined ? {} : { bytes: received }) } },
  );
}

const ID_VALUE = String.raw`(-?\d+|"(?:[^"\\]|\\.)*")`;
/** `{"id":…` or `{"jsonrpc":"2.0","id":…` at the start (Python SDK, most servers). */
const HEAD_ID = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID_VALUE}`);
/**
 * `…"id":…}` (optionally followed by `"jsonrpc":"2.0"`) at the very end (the
 * TypeScript SDK writes `{result, jsonrpc, id}`). In valid JSON a key right
 * before the last `}` belongs to the outermost object.
 */
const TAIL_ID = new RegExp(String.raw`[{,]\s*"id"\s*:\s*${ID_VALUE}\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$`);

/** The top-level JSON-RPC id of a message known only by its first and last bytes; undefined when neither edge shows it. */
export function messageIdOf(head: string, tail: string): RequestId | undefined {
  const found = HEAD_ID.exec(head) ?? TAIL_ID.exec(tail);
  const raw = found?.[1];
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw) as RequestId;
  } catch {
    return undefined;
  }
}
