/**
 * The relay fast path (docs/adr/0037, issue 27): with gateway.transparent.fastPath
 * and http.plainJsonResponses, a transparent face answers a plain request without
 * the SDK's HTTP transport. What it must not break, each with the fast path in use:
 * a cancel reaches the upstream (and the cancelled POST is not left open); progress
 * and an elicitation of calls running beside fast-path calls reach their own
 * sessions; two sessions' concurrent calls with the same ids do not cross; a session
 * that ends with a fast-path call pending answers it.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { hasResumedStreams } from "../../src/mcp/direct-answers.js";
import { systemClock } from "../../src/clock.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, inProcessTransportFactory, recordingTransportFactory } from "../helpers/in-process.js";
import { pollFor } from "../helpers/core-extra.js";
import { readUntil } from "../helpers/sse-read.js";

const LIMIT = { timeout: 120_000 };
const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };
type Sent = { method?: string; id?: unknown; params?: Record<string, unknown> };

function post(url: string, body: object, session: string): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { ...HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" },
    body: JSON.stringify({ jsonrpc: "2.0", ...body }),
  });
}

/** A raw session on `url` whose client declares no capabilities (so its plain requests take the fast path). */
async function open(url: string, initializeId: string | number = 0): Promise<string> {
  const init = await fetch(url, {
    method: "POST",
    headers: HEADERS,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: initializeId,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "fast-path", version: "1" } },
    }),
  });
  const session = init.headers.get("mcp-session-id");
  const text = await init.text();
  assert.ok(session, `initialize answered ${text}`);
  assert.equal((await post(url, { method: "notifications/initialized" }, session)).status, 202);
  return session;
}

describe("relay fast path on", () => {
  let gw: TestGateway;
  const sent: Sent[] = [];
  const faceOf = (server: string) => new URL(`/servers/${server}/mcp`, gw.url).href;
  before(async () => {
    gw = await startGateway(
      {
        mcpServers: { everything: inProcess("everything"), slow: inProcess("slow") },
        gateway: { http: { plainJsonResponses: true }, transparent: { fastPath: true } },
      },
      { transportFactory: recordingTransportFactory(sent) },
    );
  });
  after(() => gw.close());

  test("a cancelled fast-path call: notifications/cancelled reaches the upstream and the POST is answered, not left open", LIMIT, async () => {
    const face = faceOf("slow");
    const s = await open(face);
    const before = sent.length;
    const call = post(face, { id: 41, method: "tools/call", params: { name: "slow", arguments: { ms: 60_000 } } }, s);
    const upstreamCall = await pollFor(async () => sent.slice(before).find((m) => m.method === "tools/call"), "the upstream tools/call");
    const cancel = await post(face, { method: "notifications/cancelled", params: { requestId: 41, reason: "changed my mind" } }, s);
    assert.equal(cancel.status, 202);
    const cancelled = await pollFor(async () => sent.slice(before).find((m) => m.method === "notifications/cancelled"), "notifications/cancelled upstream");
    assert.equal(cancelled.params?.requestId, upstreamCall.id, "the cancel names the upstream's id of the call");
    const answered = await call;
    assert.match(answered.headers.get("content-type") ?? "", /^application\/json/);
    const body = (await answered.json()) as { id: unknown; error?: { code: number } };
    assert.equal(body.id, 41);
    assert.equal(body.error?.code, -32800);
    // The id is free again: the session answers a new call with it.
    const again = await post(face, { id: 41, method: "tools/call", params: { name: "slow", arguments: { ms: 0 } } }, s);
    assert.match(await again.text(), /slept 0ms/);
  });

  test("a call numbered 0 is cancelled too (SDK 1.32 drops a cancel of request id 0: src/mcp/cancel-request-zero.ts)", LIMIT, async () => {
    const face = faceOf("slow");
    const s = await open(face, "init");
    const before = sent.length;
    const call = post(face, { id: 0, method: "tools/call", params: { name: "slow", arguments: { ms: 60_000 } } }, s);
    const upstreamCall = await pollFor(async () => sent.slice(before).find((m) => m.method === "tools/call"), "the upstream tools/call");
    assert.equal((await post(face, { method: "notifications/cancelled", params: { requestId: 0 } }, s)).status, 202);
    const cancelled = await pollFor(async () => sent.slice(before).find((m) => m.method === "notifications/cancelled"), "notifications/cancelled upstream");
    assert.equal(cancelled.params?.requestId, upstreamCall.id, "the cancel names the upstream's id of the call");
    const body = (await (await call).json()) as { id: unknown; error?: { code: number } };
    assert.equal(body.id, 0);
    assert.equal(body.error?.code, -32800);
  });

  test("progress and an elicitation of other sessions' calls reach their own sessions while fast-path calls run", LIMIT, async () => {
    const face = faceOf("slow");
    const plain = await open(face);
    // A client that can be asked (elicitation): its requests keep the SDK path and their streams.
    const asked = new Client({ name: "asked", version: "1" }, { capabilities: { elicitation: {} } });
    const questions: string[] = [];
    asked.setRequestHandler(ElicitRequestSchema, async (req) => {
      questions.push(req.params.message);
      return { action: "accept", content: { answer: `a${questions.length}` } };
    });
    const askedTransport = new StreamableHTTPClientTransport(new URL(face));
    await asked.connect(askedTransport);
    // A client that asks for progress.
    const tracked = new Client({ name: "tracked", version: "1" });
    const trackedTransport = new StreamableHTTPClientTransport(new URL(face));
    await tracked.connect(trackedTransport);
    try {
      const progress: string[] = [];
      const fast = Promise.all(
        Array.from({ length: 6 }, async (_, i) => {
          const r = await post(face, { id: 100 + i, method: "tools/call", params: { name: "slow", arguments: { ms: 200 } } }, plain);
          assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
          return (await r.json()) as { id: number; result?: { content: Array<{ text: string }> } };
        }),
      );
      const [fastAnswers, elicited, slept] = await Promise.all([
        fast,
        asked.callTool({ name: "elicit-twice", arguments: {} }),
        tracked.callTool({ name: "slow", arguments: { ms: 300 } }, undefined, { onprogress: (p) => void progress.push(p.message ?? "") }),
      ]);
      assert.deepEqual(
        fastAnswers.map((a) => [a.id, a.result?.content[0]?.text]),
        Array.from({ length: 6 }, (_, i) => [100 + i, "slept 200ms"]),
      );
      assert.deepEqual(questions, ["first question", "second question"]);
      assert.equal((elicited.content as Array<{ text: string }>)[0]!.text, "a1,a2");
      assert.deepEqual(progress, ["started"], "the progress of the tracked call reached its own session");
      assert.equal((slept.content as Array<{ text: string }>)[0]!.text, "slept 300ms");
    } finally {
      await askedTransport.terminateSession().catch(() => undefined);
      await trackedTransport.terminateSession().catch(() => undefined);
      await asked.close();
      await tracked.close();
    }
  });

  test("two sessions' concurrent calls with the same ids each get their own answers", LIMIT, async () => {
    const face = faceOf("everything");
    const [a, b] = await Promise.all([open(face), open(face)]);
    const calls = [a, b].flatMap((s, k) =>
      Array.from({ length: 8 }, async (_, i) => {
        const r = await post(face, { id: i + 1, method: "tools/call", params: { name: "echo", arguments: { message: `${k}-${i}` } } }, s);
        assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
        return { k, i, answer: (await r.json()) as { id: number; result?: { content: Array<{ text: string }> } } };
      }),
    );
    for (const { k, i, answer } of await Promise.all(calls)) {
      assert.equal(answer.id, i + 1);
      assert.equal(answer.result?.content[0]?.text, `Echo: ${k}-${i}`);
    }
  });

  test("a malformed call gets the face's own JSON-RPC error; a session ended with a call pending answers it", LIMIT, async () => {
    const face = faceOf("slow");
    const s = await open(face);
    const bad = await post(face, { id: 7, method: "tools/call", params: { arguments: {} } }, s);
    const body = (await bad.json()) as { id: number; error?: { message: string } };
    assert.equal(body.id, 7);
    assert.match(body.error?.message ?? "", /params.*name/s, JSON.stringify(body));
    const before = sent.length;
    const pending = post(face, { id: 8, method: "tools/call", params: { name: "slow", arguments: { ms: 60_000 } } }, s);
    await pollFor(async () => sent.slice(before).find((m) => m.method === "tools/call"), "the upstream tools/call");
    const ended = await fetch(face, { method: "DELETE", headers: { "mcp-session-id": s, "mcp-protocol-version": "2025-11-25" } });
    assert.equal(ended.status, 200);
    const answer = (await (await pending).json()) as { id: number; error?: { message: string } };
    assert.equal(answer.id, 8);
    assert.match(answer.error?.message ?? "", /session ended/);
  });
});

/** The JSON-RPC messages of an SSE text's `data:` lines (the priming event's empty data left out). */
const events = (text: string): Array<{ id?: unknown; result?: { content: Array<{ text: string }> }; error?: { code: number; message: string } }> =>
  [...text.matchAll(/^data: ?(\S.*)$/gm)].map((m) => JSON.parse(m[1]!));

describe("relay fast path with SSE answers (the default)", () => {
  let gw: TestGateway;
  const store = createMemoryStore(systemClock);
  const faceOf = () => new URL("/servers/slow/mcp", gw.url).href;
  before(async () => {
    gw = await startGateway(
      { mcpServers: { slow: inProcess("slow") }, gateway: { http: { sseKeepAliveMs: 200 } } },
      { transportFactory: inProcessTransportFactory(), store },
    );
  });
  after(() => gw.close());

  test("a plain call is one SSE event after a priming event, stored: a GET with the priming id replays the answer", LIMIT, async () => {
    const face = faceOf();
    const s = await open(face);
    const res = await post(face, { id: 1, method: "tools/call", params: { name: "slow", arguments: { ms: 0 } } }, s);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.equal(res.headers.get("mcp-session-id"), s);
    const text = await res.text();
    const primingId = /^id: ?(\S+)\ndata: ?\n/m.exec(text)?.[1];
    assert.ok(primingId, `a priming event first: ${text}`);
    assert.deepEqual(
      events(text).map((e) => [e.id, e.result?.content[0]?.text]),
      [[1, "slept 0ms"]],
    );
    assert.match(text, /^event: message\nid: ?\S+\ndata: /m, "the answer has an event id");
    const replayed = await fetch(face, {
      headers: { accept: "text/event-stream", "mcp-session-id": s, "mcp-protocol-version": "2025-11-25", "last-event-id": primingId },
    });
    assert.equal(replayed.status, 200);
    assert.match(await readUntil(replayed, /"id":1/, "the replayed answer"), /slept 0ms/);
  });

  test("a POST stream cut after its priming event and resumed with GET while the call runs gets the answer on the resumed stream", LIMIT, async () => {
    const face = faceOf();
    const s = await open(face);
    const abort = new AbortController();
    const cut = await fetch(face, {
      method: "POST",
      signal: abort.signal,
      headers: { ...HEADERS, "mcp-session-id": s, "mcp-protocol-version": "2025-11-25" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "slow", arguments: { ms: 1_500 } } }),
    });
    const primingId = /^id: ?(\S+)$/m.exec(await readUntil(cut, /^id: ?\S+$/m, "the priming event"))![1]!;
    abort.abort();
    const resumed = await fetch(face, {
      headers: { accept: "text/event-stream", "mcp-session-id": s, "mcp-protocol-version": "2025-11-25", "last-event-id": primingId },
    });
    assert.equal(resumed.status, 200);
    const text = await readUntil(resumed, /"id":2/, "the answer on the resumed stream");
    assert.deepEqual(
      events(text).map((e) => [e.id, e.result?.content[0]?.text]),
      [[2, "slept 1500ms"]],
    );
  });

  test("a waiting SSE answer gets keep-alive comments; a cancelled one ends with -32800; a session's end answers what waits", LIMIT, async () => {
    const face = faceOf();
    const s = await open(face);
    const waiting = await post(face, { id: 3, method: "tools/call", params: { name: "slow", arguments: { ms: 60_000 } } }, s);
    assert.match(await readUntil(waiting, /: keepalive\n\n/, "a keep-alive comment", true), /^id: /m);
    assert.equal((await post(face, { method: "notifications/cancelled", params: { requestId: 3 } }, s)).status, 202);
    const cancelled = events(await readUntil(waiting, /"id":3/, "the cancel's answer"));
    assert.equal(cancelled.at(-1)?.error?.code, -32800);
    // The id is free again: the session answers a new call with it.
    const again = await post(face, { id: 3, method: "tools/call", params: { name: "slow", arguments: { ms: 0 } } }, s);
    assert.match(await again.text(), /slept 0ms/);
    const pending = await post(face, { id: 4, method: "tools/call", params: { name: "slow", arguments: { ms: 60_000 } } }, s);
    const ended = await fetch(face, { method: "DELETE", headers: { "mcp-session-id": s, "mcp-protocol-version": "2025-11-25" } });
    assert.equal(ended.status, 200);
    const last = events(await pending.text()).at(-1);
    assert.equal(last?.id, 4);
    assert.match(last?.error?.message ?? "", /session ended/);
  });

  test(
    "a request the SDK's schema refuses (unsafe or fractional id, a non-object _meta, null) is answered by the SDK transport, not left open; a cancel inside a batch ends its call's stream",
    LIMIT,
    async () => {
      const face = faceOf();
      const s = await open(face);
      // Each once taken by the fast path and then dropped by the SDK's schema: the POST stayed open with keep-alives (fuzz).
      for (const body of [
        '{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}',
        '{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}',
        '{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":5}}',
        "null",
      ]) {
        const res = await fetch(face, {
          method: "POST",
          signal: AbortSignal.timeout(60_000),
          headers: { ...HEADERS, "mcp-session-id": s, "mcp-protocol-version": "2025-11-25" },
          body,
        });
        const text = await res.text();
        assert.ok(res.status >= 400 && res.status < 500, `${body}: a 4xx answer, got ${res.status} ${text}`);
        assert.match(text, /"error"/, `${body}: a JSON-RPC error`);
      }
      const waiting = await post(face, { id: 5, method: "tools/call", params: { name: "slow", arguments: { ms: 60_000 } } }, s);
      await readUntil(waiting, /^id: /m, "the priming event", true);
      const batch = await fetch(face, {
        method: "POST",
        headers: { ...HEADERS, "mcp-session-id": s, "mcp-protocol-version": "2025-11-25" },
        body: JSON.stringify([{ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 5 } }]),
      });
      assert.ok(batch.status < 500, `the batch was taken (${batch.status})`);
      assert.equal(events(await readUntil(waiting, /"id":5/, "the cancel's answer")).at(-1)?.error?.code, -32800);
    },
  );

  test("a client before 2025-11-25 gets no priming event and nothing is stored for replay (it has no cursor to resume with)", LIMIT, async () => {
    const face = faceOf();
    const s = await open(face);
    const stored = await store.replay.size(s); // the initialize's stream (through the SDK transport)
    const res = await fetch(face, {
      method: "POST",
      headers: { ...HEADERS, "mcp-session-id": s, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "slow", arguments: { ms: 0 } } }),
    });
    // Keep-alive comments (every 200 ms here) come before the answer when the machine is slow (seen at load 47): not events.
    const text = (await res.text()).replaceAll(": keepalive\n\n", "");
    assert.equal(text, `event: message\ndata: ${JSON.stringify({ result: { content: [{ type: "text", text: "slept 0ms" }] }, jsonrpc: "2.0", id: 5 })}\n\n`);
    assert.deepEqual(await store.replay.size(s), stored);
  });

  test("the SDK client gets every answer of concurrent calls once", LIMIT, async () => {
    const client = new Client({ name: "sdk", version: "1" });
    const transport = new StreamableHTTPClientTransport(new URL(faceOf()));
    await client.connect(transport);
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => client.callTool({ name: "slow", arguments: { ms: i * 10 } })));
      assert.deepEqual(
        answers.map((a) => (a.content as Array<{ text: string }>)[0]!.text),
        Array.from({ length: 8 }, (_, i) => `slept ${i * 10}ms`),
      );
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });
});

test("canary: the SDK transport has the members a resumed stream is reached through (direct-answers.ts)", () => {
  assert.ok(hasResumedStreams(new StreamableHTTPServerTransport({ sessionIdGenerator: () => "x" })));
});
