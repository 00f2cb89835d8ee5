/**
 * The HTTP edge against hostile bodies (issue 20): JSON nested far too deep,
 * an empty batch, and a body over http.maxBodyBytes followed by a pipelined
 * request on the same connection. Real gateway over HTTP; server-everything's
 * own code in process (test/helpers/in-process.ts).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { assertArgumentsSize, ErrorCodes, GatewayError } from "../../src/errors.js";
import { jsonNestingDepth } from "../../src/http/json-rpc.js";
import type { TestGateway } from "../helpers/gateway.js";
import { startInProcessGateway } from "../helpers/in-process.js";

const LIMIT = { timeout: 120_000 };
const PROTOCOL = "2025-11-25";
const deep = (n: number) => "[".repeat(n) + "]".repeat(n);

interface Reply {
  status: number;
  sessionId: string | null;
  connection: string | null;
  text: string;
}

async function post(url: string, body: string, sessionId?: string): Promise<Reply> {
  const res = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(sessionId ? { "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL } : {}),
    },
    body,
  });
  return { status: res.status, sessionId: res.headers.get("mcp-session-id"), connection: res.headers.get("connection"), text: await res.text() };
}

/** A session on `url`, initialized. */
async function open(url: string): Promise<string> {
  const init = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "edge", version: "1" } },
  };
  const r = await post(url, JSON.stringify(init));
  assert.equal(r.status, 200, r.text);
  const sessionId = r.sessionId!;
  assert.equal((await post(url, JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }), sessionId)).status, 202);
  return sessionId;
}

/** The JSON-RPC error of an HTTP-level reply. */
function errorOf(r: Reply): { code: number; message: string } {
  return (JSON.parse(r.text) as { error: { code: number; message: string } }).error;
}

describe("HTTP edge", () => {
  let gw: TestGateway;
  let base: string;
  before(async () => {
    gw = await startInProcessGateway();
    base = gw.url.replace(/\/mcp$/, "");
  });
  after(() => gw.close());

  const faces = [
    { path: "/mcp", call: (d: string) => `{"name":"execute_tool","arguments":{"server":"everything","tool":"echo","args":{"message":"x","d":${d}}}}` },
    { path: "/all/mcp", call: (d: string) => `{"name":"everything__echo","arguments":{"message":"x","d":${d}}}` },
    { path: "/servers/everything/mcp", call: (d: string) => `{"name":"echo","arguments":{"message":"x","d":${d}}}` },
  ];

  for (const face of faces) {
    test(`${face.path}: tool arguments nested 10,000 deep get 400 naming the depth bound, and the session goes on`, LIMIT, async () => {
      const url = base + face.path;
      const sessionId = await open(url);
      const r = await post(url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":${face.call(deep(10_000))}}`, sessionId);
      assert.equal(r.status, 400, r.text);
      const error = errorOf(r);
      assert.equal(error.code, -32602);
      assert.match(error.message, /^EMCP_BAD_ARGUMENTS: the JSON body is nested more than 2048 levels deep \(gateway\.http\.maxJsonDepth\)/);
      // Nesting within the bound still reaches the tool.
      const ok = await post(url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":${face.call(deep(20))}}`, sessionId);
      assert.equal(ok.status, 200, ok.text);
      assert.doesNotMatch(ok.text, /EMCP_INTERNAL|"error"/);
    });

    test(`${face.path}: an empty batch gets 400 Invalid Request`, LIMIT, async () => {
      const url = base + face.path;
      const sessionId = await open(url);
      const r = await post(url, "[]", sessionId);
      assert.equal(r.status, 400, r.text);
      assert.equal(errorOf(r).code, -32600);
      assert.match(errorOf(r).message, /empty batch/);
      // Without a session too (it is no initialize).
      const bare = await post(url, "[]");
      assert.equal(bare.status, 400);
      assert.equal(errorOf(bare).code, -32600);
    });
  }

  test("a body over http.maxBodyBytes gets a whole 413 with Connection: close, and the connection closes cleanly, not reset", LIMIT, async () => {
    const small = await startInProcessGateway({ gateway: { http: { maxBodyBytes: 1024 } } });
    try {
      const { port } = new URL(small.url);
      const init = (name: string) =>
        JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name, version: "1" } },
        });
      const request = (body: string) =>
        `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const socket = net.connect(Number(port), "127.0.0.1");
      let received = "";
      const outcome = await new Promise<{ error?: string; ended: boolean }>((resolve) => {
        let ended = false;
        socket.on("data", (d: Buffer) => (received += d.toString("utf8")));
        socket.on("end", () => (ended = true));
        socket.on("error", (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message, ended }));
        socket.on("close", () => resolve({ ended }));
        // 200 KB over the bound, then a second request pipelined behind it.
        socket.write(request(init("x".repeat(200_000))) + request(init("second")));
      });
      assert.equal(outcome.error, undefined, `the connection was reset; got: ${received.slice(0, 300)}`);
      assert.ok(outcome.ended, "the gateway closed its side (FIN)");
      assert.match(received, /^HTTP\/1\.1 413 /);
      assert.match(received, /\r\nConnection: close\r\n/i);
      assert.match(received, /request body exceeds gateway\.http\.maxBodyBytes \(1024 bytes\)/);
      // A new connection works.
      const r = await post(small.url, init("after"));
      assert.equal(r.status, 200, r.text);
    } finally {
      await small.close();
    }
  });
});

test("an error answered before the request body arrived says Connection: close (the unread body cannot be told from a next request)", LIMIT, async () => {
  const gw = await startInProcessGateway();
  const socket = net.connect(Number(new URL(gw.url).port), "127.0.0.1");
  try {
    let received = "";
    await new Promise<void>((resolve, reject) => {
      socket.on("data", (d: Buffer) => {
        received += d.toString("utf8");
        if (received.includes("\r\n\r\n")) resolve();
      });
      socket.on("error", reject);
      // A Host the guard refuses (403), and a body that never comes.
      socket.write(`POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`);
    });
    assert.match(received, /^HTTP\/1\.1 403 /);
    assert.match(received, /\r\nConnection: close\r\n/i);
  } finally {
    socket.destroy();
    await gw.close();
  }
});

test("jsonNestingDepth counts arrays and objects, not brackets inside strings", () => {
  assert.equal(jsonNestingDepth('{"a":[1,{"b":"[[[{{{"}]}'), 3);
  assert.equal(jsonNestingDepth('"\\"[["'), 0);
  assert.equal(jsonNestingDepth(deep(100_000), 2048), 2049, "stops counting past the bound");
});

test("tool arguments too deep to stringify are EMCP_BAD_ARGUMENTS, not a stack overflow (stdio face, in-process callers)", () => {
  let args: unknown = [];
  for (let i = 0; i < 100_000; i++) args = [args];
  assert.throws(
    () => assertArgumentsSize({ d: args }, 1_000_000),
    (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.BAD_ARGUMENTS && /nested too deeply/.test(err.message),
  );
});
