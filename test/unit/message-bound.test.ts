/**
 * The linear readers behind gateway.upstream.maxMessageBytes (design LM-6):
 * LineReader (stdio), SseEventFramer (Streamable HTTP), and finding the
 * JSON-RPC id of a message known only by its edges.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EDGE_BYTES, LineReader, type OversizedLine } from "../../src/upstream/line-reader.js";
import { messageEdgesOf, messageIdOf, messageTooLarge } from "../../src/upstream/message-bound.js";
import { SseEventFramer, concat } from "../../src/mcp/sse-events.js";
import { toJsonRpcError, toToolErrorText, upstreamCallError } from "../../src/errors.js";
import { errorResponseFor } from "../../src/mcp/error-response.js";
import { McpError, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import { SseRequestTap } from "../../src/mcp/sse-request-tap.js";
import { createParser } from "eventsource-parser";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { createTransportFactory } from "../../src/upstream/transports.js";

function reader(maxLineBytes: number) {
  const lines: string[] = [];
  const oversized: OversizedLine[] = [];
  const r = new LineReader({ maxLineBytes, onLine: (l) => lines.push(l), onOversized: (o) => oversized.push(o) });
  return { r, lines, oversized };
}

/** Splits `text` into chunks of `size` bytes. */
function chunks(text: string, size: number): Buffer[] {
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size));
  return out;
}

describe("LineReader", () => {
  test("lines split over many chunks, several lines per chunk, CRLF and blank lines", () => {
    const { r, lines, oversized } = reader(1000);
    const input = 'one\n{"a":1}\r\n\nthree-is-longer\n' + "é".repeat(50) + "\n";
    for (const size of [1, 2, 3, 7, 64]) {
      lines.length = 0;
      for (const c of chunks(input, size)) r.push(c);
      assert.deepEqual(lines, ["one", '{"a":1}', "", "three-is-longer", "é".repeat(50)], `chunk size ${size}`);
      assert.equal(r.pending, 0);
    }
    assert.equal(oversized.length, 0);
  });

  test("a long line in many small chunks is joined once, whole", () => {
    const { r, lines } = reader(4_000_000);
    const long = "x".repeat(3_000_000);
    for (const c of chunks(long + "\nafter\n", 1024)) r.push(c);
    assert.equal(lines.length, 2);
    assert.equal(lines[0]!.length, 3_000_000);
    assert.equal(lines[1], "after");
  });

  test("a line over the bound is dropped with its size and edges; the next line is read as usual", () => {
    const { r, lines, oversized } = reader(10_000);
    const big = '{"result":{"text":"' + "y".repeat(50_000) + '"},"jsonrpc":"2.0","id":7}';
    for (const c of chunks("small\n" + big + "\nnext\n", 999)) r.push(c);
    assert.deepEqual(lines, ["small", "next"]);
    assert.equal(oversized.length, 1);
    assert.equal(oversized[0]!.bytes, Buffer.byteLength(big));
    assert.equal(oversized[0]!.head, big.slice(0, EDGE_BYTES));
    assert.equal(oversized[0]!.tail, big.slice(-EDGE_BYTES));
    assert.equal(messageIdOf(oversized[0]!.head, oversized[0]!.tail), 7);
  });

  test("while skipping, nothing of the line is held", () => {
    const { r } = reader(1000);
    for (let i = 0; i < 1000; i++) r.push(Buffer.alloc(1000, 0x61));
    assert.equal(r.pending, 1_000_000); // counted
    // The only bytes held are the edges: a line under the bound afterwards comes through.
    r.push(Buffer.from("\nok\n"));
  });

  test("at exactly the bound the line is kept; one byte more is dropped", () => {
    const { r, lines, oversized } = reader(10);
    r.push(Buffer.from("0123456789\n01234567890\n"));
    assert.deepEqual(lines, ["0123456789"]);
    assert.equal(oversized.length, 1);
    assert.equal(oversized[0]!.bytes, 11);
  });
});

describe("messageIdOf", () => {
  test("finds the top-level id at either edge, in the TypeScript and Python SDKs' key orders", () => {
    assert.equal(messageIdOf('{"jsonrpc":"2.0","id":3,"result":{"content":[{"te', ""), 3);
    assert.equal(messageIdOf('{"id": "abc", "jsonrpc": "2.0", "result": {"x', ""), "abc");
    assert.equal(messageIdOf('{"result":{"content":[{"te', 'xxxx"}]},"jsonrpc":"2.0","id":12}'), 12);
    assert.equal(messageIdOf('{"result":{"content":[{"te', 'xx"}]},"id":"r-1","jsonrpc":"2.0"}\r'), "r-1");
    // An id alone does not make an answer: the upstream's requests have ids too.
    assert.equal(messageIdOf('{"id": "abc", "jsonrpc"', ""), undefined);
  });

  test("ignores ids that are not top-level or only inside strings", () => {
    assert.equal(messageIdOf('{"result":{"id":5,"x":', 'xx"}}'), undefined);
    assert.equal(messageIdOf("", 'xx","y":{"id":5}}'), undefined);
    assert.equal(messageIdOf("", '"text":"\\"id\\":5}"}'), undefined);
    assert.equal(messageIdOf("not json", "either"), undefined);
  });
});

describe("messageIdOf: answers only, never the upstream's own requests", () => {
  /** The edges LineReader keeps of `message` when its middle is over the bound. */
  const edges = (message: string): [string, string] => [message.slice(0, EDGE_BYTES), message.slice(-EDGE_BYTES)];
  const big = "z".repeat(3 * EDGE_BYTES);

  test("an oversized request of the upstream's (sampling, elicitation) is not an answer, in either key order", () => {
    const methodFirst = `{"method":"sampling/createMessage","jsonrpc":"2.0","id":0,"params":{"messages":[{"text":"${big}"}]}}`;
    const idFirst = `{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"${big}"}}`;
    const methodLast = `{"jsonrpc":"2.0","id":4,"params":{"message":"${big}"},"method":"elicitation/create"}`;
    const idLast = `{"params":{"message":"${big}"},"method":"sampling/createMessage","jsonrpc":"2.0","id":5}`;
    for (const [message, id] of [
      [methodFirst, 0],
      [idFirst, 3],
      [methodLast, 4],
      [idLast, 5],
    ] as const) {
      assert.equal(messageIdOf(...edges(message)), undefined, message.slice(0, 60));
      assert.deepEqual(messageEdgesOf(...edges(message)), { id, request: true, response: false }, message.slice(0, 60));
    }
  });

  test("an oversized answer is one in either key order; a nested or quoted method does not count", () => {
    const python = `{"jsonrpc":"2.0","id":3,"result":{"method":"x","content":[{"text":"${big}"}]}}`;
    const typescript = `{"result":{"content":[{"text":"${big}","method":"y"}]},"jsonrpc":"2.0","id":0}`;
    const error = `{"jsonrpc":"2.0","id":"e-1","error":{"code":-1,"message":"\\"method\\":${big}"}}`;
    const quoted = `{"result":{"text":"${big}\\",\\"method\\":1"},"jsonrpc":"2.0","id":9}`;
    assert.equal(messageIdOf(...edges(python)), 3);
    assert.equal(messageIdOf(...edges(typescript)), 0);
    assert.equal(messageIdOf(...edges(error)), "e-1");
    assert.equal(messageIdOf(...edges(quoted)), 9);
  });

  test("an id with nothing to tell an answer from a request is not attributed", () => {
    // Its keys are in the middle, never kept.
    const hidden = `{"id":2,"params":{"a":"${big}"},"x":"${big}","y":{"b":"${big}"}}`;
    assert.equal(messageIdOf(...edges(hidden)), undefined);
    assert.deepEqual(messageEdgesOf(...edges(hidden)), { id: 2, request: false, response: false });
    // A tail that starts inside a string: the scan stops rather than guess.
    assert.equal(messageIdOf("", 'abc","id":4}'), undefined);
  });
});

describe("SseEventFramer", () => {
  function framer(maxBytes: number, stopOnOversized = false) {
    const events: string[] = [];
    const skipped: { head: string; bytes: number }[] = [];
    let oversizedCalls = 0;
    const f = new SseEventFramer(maxBytes, {
      event: (pieces) => events.push(new TextDecoder().decode(concat(pieces))),
      oversized: () => {
        oversizedCalls++;
        return !stopOnOversized;
      },
      skipped: (head, bytes) => skipped.push({ head, bytes }),
    });
    return { f, events, skipped, oversized: () => oversizedCalls };
  }

  test("hands on whole events byte for byte, whatever the chunking and line ends", () => {
    const input = 'id: 1\ndata: a\n\n: keep-alive\r\n\r\nid: 2\rdata: b\r\rdata: {"x":1}\r\n\r\n';
    for (const size of [1, 2, 5, 100]) {
      const { f, events } = framer(1000);
      for (const c of chunks(input, size)) f.feed(c);
      // A CRLF split over two chunks: its LF comes with what follows (here: the stream's rest).
      const rest = new TextDecoder().decode(concat(f.rest()));
      assert.equal(events.join("") + rest, input, `chunk size ${size}`);
      assert.equal(events.length, 4, `chunk size ${size}: ${JSON.stringify(events)}`);
    }
  });

  test("an event over the bound is skipped to its end; its head keeps its id; the stream goes on", () => {
    const big = "id: 9\ndata: " + "z".repeat(20_000) + "\n\n";
    const { f, events, skipped } = framer(5000);
    for (const c of chunks("data: before\n\n" + big + "data: after\n\n", 333)) f.feed(c);
    assert.deepEqual(events, ["data: before\n\n", "data: after\n\n"]);
    assert.equal(skipped.length, 1);
    assert.equal(skipped[0]!.bytes, Buffer.byteLength(big));
    assert.match(skipped[0]!.head, /^id: 9\ndata: z/);
  });

  test("a handler that stops on an oversized event ends the framing", () => {
    const { f, events, oversized } = framer(100, true);
    f.feed(Buffer.from("data: " + "q".repeat(200) + "\n\ndata: later\n\n"));
    f.feed(Buffer.from("data: more\n\n"));
    assert.equal(oversized(), 1);
    assert.deepEqual(events, []);
  });
});

describe("EMCP_RESPONSE_TOO_LARGE through the SDK client", () => {
  test("the error response delivered for a request maps back to the gateway error on both faces", () => {
    const error = messageTooLarge("big", 16 * 1024 * 1024, 20_000_123);
    const response = errorResponseFor(4, error);
    // What Protocol._onresponse makes of it (the canary checks the SDK really does this).
    const seen = new McpError(response.error.code, response.error.message, response.error.data);
    assert.equal(upstreamCallError("big", "tool", seen), error);
    assert.match(
      toToolErrorText(seen),
      /^EMCP_RESPONSE_TOO_LARGE: upstream 'big' sent a message of 20000123 bytes, over gateway\.upstream\.maxMessageBytes \(16 MiB\)/,
    );
    const wire = toJsonRpcError(seen);
    assert.equal(wire.code, -32603);
    assert.match(wire.message, /^EMCP_RESPONSE_TOO_LARGE: /);
    assert.deepEqual(wire.data, { server: "big", maxMessageBytes: 16 * 1024 * 1024, bytes: 20_000_123, code: "EMCP_RESPONSE_TOO_LARGE" });
    // An upstream's own error with the same text is not mistaken for it.
    const forged = new McpError(response.error.code, response.error.message, { ...(response.error.data as object) });
    assert.equal(upstreamCallError("big", "tool", forged).code, "EMCP_UPSTREAM_ERROR");
  });
});

describe("SseRequestTap's bound (Streamable HTTP)", () => {
  const encoder = new TextEncoder();
  /** A response whose body streams `parts` (each a chunk) as `type`. */
  const respond = (parts: string[], type: string) =>
    new Response(
      new ReadableStream<Uint8Array>({
        start(controller) {
          for (const part of parts) controller.enqueue(encoder.encode(part));
          controller.close();
        },
      }),
      { status: 200, headers: { "content-type": type } },
    );
  const post = (id: number): RequestInit => ({ method: "POST", body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: {} }) });
  const read = async (response: Response) => await response.text();

  function tap(answer: (init: RequestInit | undefined) => Response) {
    const failed: (RequestId | undefined)[] = [];
    const fetched: string[] = [];
    const t = new SseRequestTap(
      async (_url, init) => {
        fetched.push(init?.method ?? "GET");
        return answer(init);
      },
      {
        maxBytes: 1000,
        oversized: (owner) => {
          failed.push(owner);
          return messageTooLarge("s", 1000);
        },
      },
    );
    return { t, failed, fetched };
  }

  test("an oversized event on a request's stream fails that request and ends the stream; its resumption is refused with 405 without asking the server", async () => {
    const { t, failed, fetched } = tap(() =>
      respond(["id: e1\ndata: \n\n", "id: e2\ndata: " + "x".repeat(600), "y".repeat(600) + "\n\n", "data: never\n\n"], "text/event-stream"),
    );
    const text = await read(await t.fetch("http://u/mcp", post(7)));
    assert.equal(text, "id: e1\ndata: \n\n"); // the priming event only
    assert.deepEqual(failed, [7]);
    const resumed = await t.fetch("http://u/mcp", { method: "GET", headers: { "last-event-id": "e1" } });
    assert.equal(resumed.status, 405);
    assert.deepEqual(fetched, ["POST"]);
  });

  test("an oversized event on the standalone stream is dropped, its id passed on, and the stream goes on", async () => {
    // 2000 bytes: the whole event is its head; 10 000: its head (the first 4 KiB) is cut inside its data line.
    for (const size of [2000, 10_000]) {
      const { t, failed } = tap(() =>
        respond(["id: a\ndata: {}\n\n", "id: b\ndata: " + "x".repeat(size) + "\n\n", "id: c\ndata: {}\n\n"], "text/event-stream"),
      );
      const text = await read(await t.fetch("http://u/mcp", { method: "GET" }));
      assert.equal(text, "id: a\ndata: {}\n\nid: b\ndata:\n\nid: c\ndata: {}\n\n");
      assert.deepEqual(failed, [undefined]);
      // What the SDK's transport reads the stream with (eventsource-parser) sees b's id, so a resumption starts after it, and no data of b.
      const seen: { id: string | undefined; data: string }[] = [];
      createParser({ onEvent: ({ id, data }) => seen.push({ id, data }) }).feed(text);
      assert.deepEqual(seen, [
        { id: "a", data: "{}" },
        { id: "b", data: "" },
        { id: "c", data: "{}" },
      ]);
    }
  });

  test("on a request's stream the SDK's parser decides ids and requests: CR line ends, a BOM, id-only and comment events", async () => {
    const request = JSON.stringify({ jsonrpc: "2.0", id: "s1", method: "elicitation/create", params: {} });
    const { t } = tap(() => respond(["\uFEFFid: p\rdata:\r\r", ": keep-alive\n\n", "id: only\n\n", `id: q\r\ndata: ${request}\r\n\r\n`], "text/event-stream"));
    await read(await t.fetch("http://u/mcp", post(3)));
    // The upstream's request s1 came on request 3's stream.
    assert.equal(t.take("s1"), 3);
    // Its last event id (q) resumes it.
    const resumed = await t.fetch("http://u/mcp", { method: "GET", headers: { "last-event-id": "q" } });
    assert.equal(resumed.status, 200);
  });

  test("a JSON body is counted as it arrives: over the bound its stream errors and the request fails; within it, it passes whole", async () => {
    const big = tap(() => respond(['{"jsonrpc":"2.0","id":3,"result":{"t":"', "x".repeat(800), "x".repeat(800), '"}}'], "application/json"));
    await assert.rejects((await big.t.fetch("http://u/mcp", post(3))).json(), /EMCP_RESPONSE_TOO_LARGE|over gateway\.upstream\.maxMessageBytes/);
    assert.deepEqual(big.failed, [3]);
    const small = tap(() => respond(['{"jsonrpc":"2.0","id":4,', '"result":{}}'], "application/json"));
    assert.deepEqual(await (await small.t.fetch("http://u/mcp", post(4))).json(), { jsonrpc: "2.0", id: 4, result: {} });
    assert.deepEqual(small.failed, []);
  });
});

describe("the legacy HTTP+SSE transport's bound", () => {
  /** A real legacy HTTP+SSE MCP server (the SDK's SSEServerTransport) on a local port, with a tool answering `bytes` bytes. */
  async function legacyServer() {
    const transports = new Map<string, SSEServerTransport>();
    const http = createServer((req, res) => {
      void (async () => {
        if (req.method === "GET" && req.url === "/sse") {
          const transport = new SSEServerTransport("/messages", res);
          transports.set(transport.sessionId, transport);
          const server = new McpServer({ name: "legacy", version: "1.0.0" });
          server.registerTool("big", { description: "a text result of `bytes` bytes", inputSchema: { bytes: z.number().int().min(0) } }, ({ bytes }) => ({
            content: [{ type: "text", text: "x".repeat(bytes) }],
          }));
          await server.connect(transport);
          return;
        }
        const sessionId = new URL(req.url ?? "/", "http://localhost").searchParams.get("sessionId") ?? "";
        const transport = transports.get(sessionId);
        if (req.method === "POST" && transport) return transport.handlePostMessage(req, res);
        res.writeHead(404).end();
      })();
    });
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const { port } = http.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}/sse`,
      close: async () => {
        for (const t of transports.values()) await t.close();
        http.closeAllConnections();
        await new Promise((resolve) => http.close(resolve));
      },
    };
  }

  test("an answer over the bound on the SSE stream fails the waiting call with EMCP_RESPONSE_TOO_LARGE and ends the connection; one under it passes", async () => {
    const server = await legacyServer();
    const factory = createTransportFactory({ killGraceMs: 1000, maxMessageBytes: 64 * 1024 });
    const { transport } = factory("legacy", { transport: "sse", url: server.url });
    const client = new Client({ name: "t", version: "1.0.0" });
    let closed = false;
    client.onclose = () => (closed = true);
    try {
      await client.connect(transport);
      const small = await client.callTool({ name: "big", arguments: { bytes: 1000 } });
      assert.equal((small.content as { text: string }[])[0]!.text.length, 1000);
      const err = await client.callTool({ name: "big", arguments: { bytes: 2 * 1024 * 1024 } }).then(
        () => assert.fail("an answer over the bound was delivered"),
        (e: unknown) => e,
      );
      const mapped = upstreamCallError("legacy", "big", err);
      assert.equal(mapped.code, "EMCP_RESPONSE_TOO_LARGE", String(err));
      assert.match(mapped.message, /maxMessageBytes \(64 KiB\)/);
      const deadline = Date.now() + 30_000;
      while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.ok(closed, "the connection ended");
    } finally {
      await client.close().catch(() => undefined);
      await server.close();
    }
  });
});
