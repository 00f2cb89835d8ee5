/**
 * src/upstream/stdio-transport.ts `parseMessage`: a well-formed result response skips the
 * message schema (issue 27), and every line is accepted or refused exactly as the SDK's
 * `deserializeMessage` accepts or refuses it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { deserializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import { parseMessage } from "../../src/upstream/stdio-transport.js";

const LINES = [
  { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "x" }] } },
  { jsonrpc: "2.0", id: "r7", result: {} },
  { jsonrpc: "2.0", id: 2, result: { _meta: { a: 1 } } },
  { jsonrpc: "2.0", id: 3, result: { _meta: 5 } },
  { jsonrpc: "2.0", id: 4, result: [] },
  { jsonrpc: "2.0", id: 5, result: null },
  { jsonrpc: "2.0", id: 6, result: {}, extra: true },
  { jsonrpc: "1.0", id: 7, result: {} },
  { jsonrpc: "2.0", id: true, result: {} },
  { jsonrpc: "2.0", id: 8, error: { code: -32601, message: "no" } },
  { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "x" } },
  { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "r1", progress: 1 } },
  5,
  null,
].map((m) => JSON.stringify(m));

test("parseMessage accepts and refuses what deserializeMessage does, with the same message", () => {
  for (const line of [...LINES, "not json"]) {
    let expected: unknown;
    let refused = false;
    try {
      expected = deserializeMessage(line);
    } catch {
      refused = true;
    }
    if (refused) assert.throws(() => parseMessage(line), line);
    else assert.deepEqual(parseMessage(line), expected, line);
  }
});
