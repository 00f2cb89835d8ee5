/**
 * gateway.http.plainJsonResponses (docs/adr/0035, issue 27): a plain request
 * on a transparent face — no progress token, no task, from a client that
 * cannot be asked anything — is answered with one JSON body; a call with a
 * progress token, a task-augmented one and any request of a client with
 * elicitation/sampling/roots keep their SSE stream (their related messages
 * need it); the meta face (/mcp) likewise. Off (the default), every request gets SSE as before. Also the
 * canary of the SDK internals src/mcp/json-answers.ts relies on.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { answerPlainWithJson } from "../../src/mcp/json-answers.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import type { TestGateway } from "../helpers/gateway.js";

const LIMIT = { timeout: 60_000 };
const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

async function post(url: string, body: object, session?: string): Promise<{ type: string; text: string; session: string | null }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { ...HEADERS, ...(session ? { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" } : {}) },
    body: JSON.stringify({ jsonrpc: "2.0", ...body }),
  });
  return { type: res.headers.get("content-type") ?? "", text: await res.text(), session: res.headers.get("mcp-session-id") };
}

/** A raw session on `url` whose client declares `capabilities`; returns its id. */
async function open(url: string, capabilities: object): Promise<string> {
  const init = await post(url, {
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities, clientInfo: { name: "json-answers", version: "1" } },
  });
  assert.ok(init.session, `initialize answered ${init.text}`);
  const done = await fetch(url, {
    method: "POST",
    headers: { ...HEADERS, "mcp-session-id": init.session, "mcp-protocol-version": "2025-11-25" },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  assert.equal(done.status, 202);
  return init.session;
}

const echo = (id: number, extra: object = {}) => ({ id, method: "tools/call", params: { name: "echo", arguments: { message: `m${id}` }, ...extra } });

describe("plainJsonResponses on", () => {
  let gw: TestGateway;
  let face: string;
  before(async () => {
    gw = await startInProcessGateway({ gateway: { http: { plainJsonResponses: true } } });
    face = new URL("/servers/everything/mcp", gw.url).href;
  });
  after(() => gw.close());

  test("a plain tools/call, tools/list, resources/read and prompts/get are answered with JSON", LIMIT, async () => {
    const s = await open(face, {});
    const called = await post(face, echo(2), s);
    assert.match(called.type, /^application\/json/);
    assert.deepEqual(JSON.parse(called.text), { jsonrpc: "2.0", id: 2, result: { content: [{ type: "text", text: "Echo: m2" }] } });
    const listed = await post(face, { id: 3, method: "tools/list" }, s);
    assert.match(listed.type, /^application\/json/);
    assert.ok((JSON.parse(listed.text) as { result: { tools: Array<{ name: string }> } }).result.tools.some((t) => t.name === "echo"));
    const read = await post(face, { id: 4, method: "resources/read", params: { uri: "demo://resource/static/document/architecture.md" } }, s);
    assert.match(read.type, /^application\/json/);
    assert.equal((JSON.parse(read.text) as { id: number }).id, 4, read.text);
    const prompt = await post(face, { id: 5, method: "prompts/get", params: { name: "simple-prompt" } }, s);
    assert.match(prompt.type, /^application\/json/);
    assert.ok((JSON.parse(prompt.text) as { result: { messages: unknown[] } }).result.messages.length > 0, prompt.text);
    // An upstream error is a JSON answer too, unchanged.
    const failed = await post(face, { id: 6, method: "tools/call", params: { name: "no-such-tool", arguments: {} } }, s);
    assert.match(failed.type, /^application\/json/);
    assert.equal((JSON.parse(failed.text) as { id: number }).id, 6);
  });

  test("a call with a progress token keeps its SSE stream, with the progress on it", LIMIT, async () => {
    const s = await open(face, {});
    const r = await post(
      face,
      {
        id: 2,
        method: "tools/call",
        params: { name: "trigger-long-running-operation", arguments: { duration: 0.2, steps: 2 }, _meta: { progressToken: "t" } },
      },
      s,
    );
    assert.match(r.type, /^text\/event-stream/);
    assert.match(r.text, /notifications\/progress/);
    assert.match(r.text, /"result":\{"content".*"id":2\}/);
  });

  test("a task-augmented call keeps its SSE stream", LIMIT, async () => {
    const s = await open(face, {});
    const r = await post(face, echo(2, { task: { ttl: 60_000 } }), s);
    assert.match(r.type, /^text\/event-stream/);
    assert.match(r.text, /"taskId"/);
  });

  test("a client that can be asked (elicitation, sampling or roots) keeps SSE for every request", LIMIT, async () => {
    for (const capabilities of [{ elicitation: {} }, { sampling: {} }, { roots: {} }]) {
      const s = await open(face, capabilities);
      const r = await post(face, echo(2), s);
      assert.match(r.type, /^text\/event-stream/, JSON.stringify(capabilities));
      assert.match(r.text, /Echo: m2/);
    }
  });

  test("a client that drops a plain call's connection before the answer: the answer is dropped, the id and the session stay usable", LIMIT, async () => {
    const s = await open(face, {});
    const abort = new AbortController();
    const slow = fetch(face, {
      method: "POST",
      headers: { ...HEADERS, "mcp-session-id": s, "mcp-protocol-version": "2025-11-25" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 1 } },
      }),
      signal: abort.signal,
    });
    abort.abort();
    await slow.catch(() => undefined);
    // Once the upstream has answered (and the answer had nowhere to go), id 7 is free again and the session answers.
    const deadline = Date.now() + 30_000;
    let reused: { type: string; text: string } | undefined;
    while (Date.now() < deadline) {
      reused = await post(face, echo(7), s);
      if (!/still in use/.test(reused.text)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.match(reused!.type, /^application\/json/, reused!.text);
    assert.match(reused!.text, /Echo: m7/);
  });

  test("the meta face: a plain execute_tool is answered with JSON, one with a progress token keeps SSE", LIMIT, async () => {
    const s = await open(gw.url, {});
    const args = { server: "everything", tool: "echo", args: { message: "meta" } };
    const plain = await post(gw.url, { id: 2, method: "tools/call", params: { name: "execute_tool", arguments: args } }, s);
    assert.match(plain.type, /^application\/json/, plain.text);
    assert.match(plain.text, /Echo: meta/);
    const tracked = await post(gw.url, { id: 3, method: "tools/call", params: { name: "execute_tool", arguments: args, _meta: { progressToken: "p" } } }, s);
    assert.match(tracked.type, /^text\/event-stream/);
    assert.match(tracked.text, /Echo: meta/);
  });

  test("the SDK client works against it, concurrent calls each answered once", LIMIT, async () => {
    const client = new Client({ name: "json-answers-sdk", version: "1" });
    const transport = new StreamableHTTPClientTransport(new URL(face));
    await client.connect(transport);
    try {
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => client.callTool({ name: "echo", arguments: { message: `c${i}` } })));
      assert.deepEqual(
        results.map((r) => (r.content as Array<{ text: string }>)[0]!.text),
        Array.from({ length: 8 }, (_, i) => `Echo: c${i}`),
      );
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });
});

describe("plainJsonResponses off (the default)", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startInProcessGateway();
  });
  after(() => gw.close());

  test("a plain tools/call gets an SSE stream", LIMIT, async () => {
    const face = new URL("/servers/everything/mcp", gw.url).href;
    const s = await open(face, {});
    const r = await post(face, echo(2), s);
    assert.match(r.type, /^text\/event-stream/);
    assert.match(r.text, /Echo: m2/);
  });
});

test("canary: the SDK transport has the internals json-answers.ts relies on", () => {
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => "x" });
  assert.equal(
    answerPlainWithJson(transport, () => true),
    true,
    "SDK internals changed: src/mcp/json-answers.ts needs updating",
  );
});
