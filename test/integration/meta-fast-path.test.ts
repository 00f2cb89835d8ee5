/**
 * The meta face on the relay fast path (docs/adr/0043, 0037 §1b): a plain
 * `execute_tool` on /mcp is answered by the endpoint without the SDK's HTTP
 * transport, as on the transparent faces. What must hold there: the answer is
 * one stored SSE event after a priming event, the session envelope included;
 * a call promoted to a task answers with the promotion and its result is
 * fetched as before; a cancelled call reaches the upstream and its answer
 * ends with -32800 (through the SDK transport the stream stayed open until
 * the client gave up); a session's end answers what still waits.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, inProcessTransportFactory } from "../helpers/in-process.js";
import { pollFor } from "../helpers/core-extra.js";
import { readUntil } from "../helpers/sse-read.js";

const LIMIT = { timeout: 120_000 };
const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };
const VERSION = { "mcp-protocol-version": "2025-11-25" };

type Message = { id?: unknown; result?: { content: Array<{ text: string }>; isError?: boolean }; error?: { code: number; message: string } };

function post(url: string, body: object, session: string): Promise<Response> {
  return fetch(url, { method: "POST", headers: { ...HEADERS, ...VERSION, "mcp-session-id": session }, body: JSON.stringify({ jsonrpc: "2.0", ...body }) });
}

/** A raw meta session whose client declares no capabilities (so its plain requests take the fast path). */
async function open(url: string): Promise<string> {
  const init = await fetch(url, {
    method: "POST",
    headers: HEADERS,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "meta-fast-path", version: "1" } },
    }),
  });
  const session = init.headers.get("mcp-session-id");
  const text = await init.text();
  assert.ok(session, `initialize answered ${text}`);
  assert.equal((await post(url, { method: "notifications/initialized" }, session)).status, 202);
  return session;
}

const call = (id: number, tool: string, args: Record<string, unknown>, timeoutMs?: number) => ({
  id,
  method: "tools/call",
  params: { name: "execute_tool", arguments: { server: "slow", tool, args, ...(timeoutMs !== undefined ? { timeout_ms: timeoutMs } : {}) } },
});

describe("the meta face on the relay fast path (SSE answers, the default)", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway(
      { mcpServers: { slow: inProcess("slow") }, gateway: { http: { sseKeepAliveMs: 200 } } },
      { transportFactory: inProcessTransportFactory() },
    );
  });
  after(() => gw.close());

  test(
    "an execute_tool answered in time is one stored SSE event after a priming event, with the session envelope; a GET with the priming id replays it",
    LIMIT,
    async () => {
      const s = await open(gw.url);
      const res = await post(gw.url, call(1, "slow", { ms: 0 }), s);
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
      const text = await res.text();
      const primingId = /^id: ?(\S+)\ndata: ?\n/m.exec(text)?.[1];
      assert.ok(primingId, `a priming event first: ${text}`);
      const [answer, ...rest] = events(text);
      assert.equal(rest.length, 0, text);
      assert.equal(answer?.id, 1);
      assert.equal(answer?.result?.content[0]?.text, "slept 0ms");
      assert.match(JSON.stringify(answer?.result?.content.slice(1)), /events_since_last_response.*server_connected/, "the envelope's events");
      const replayed = await fetch(gw.url, { headers: { accept: "text/event-stream", ...VERSION, "mcp-session-id": s, "last-event-id": primingId } });
      assert.equal(replayed.status, 200);
      assert.match(await readUntil(replayed, /"id":1/, "the replayed answer"), /slept 0ms/);
    },
  );

  test("a call past timeout_ms answers with its promotion; get_task_result gives the result", LIMIT, async () => {
    const s = await open(gw.url);
    const promoted = events(await (await post(gw.url, call(2, "slow", { ms: 800 }, 50), s)).text()).at(-1);
    const taskId = /Promoted to task (\S+)\./.exec(promoted?.result?.content[0]?.text ?? "")?.[1];
    assert.ok(taskId, JSON.stringify(promoted));
    const result = await post(
      gw.url,
      { id: 3, method: "tools/call", params: { name: "get_task_result", arguments: { task_id: taskId, timeout_ms: 60_000 } } },
      s,
    );
    assert.match(JSON.stringify(events(await result.text()).at(-1)), /slept 800ms/);
  });

  test(
    "a waiting answer gets keep-alive comments; a cancelled one ends with -32800 and the upstream call is cancelled; a session's end answers what waits",
    LIMIT,
    async () => {
      const s = await open(gw.url);
      const waiting = await post(gw.url, call(4, "slow", { ms: 60_000 }, 120_000), s);
      assert.match(await readUntil(waiting, /: keepalive\n\n/, "a keep-alive comment", true), /^id: /m);
      assert.equal((await post(gw.url, { method: "notifications/cancelled", params: { requestId: 4 } }, s)).status, 202);
      const cancelled = events(await readUntil(waiting, /"id":4/, "the cancel's answer"));
      assert.equal(cancelled.at(-1)?.error?.code, -32800);
      await pollFor(async () => {
        const calls = events(await (await post(gw.url, call(5, "slow-calls", {}), s)).text()).at(-1);
        const counts = JSON.parse(calls?.result?.content[0]?.text ?? "{}") as { cancelled?: number };
        return (counts.cancelled ?? 0) >= 1 ? counts : undefined;
      }, "the upstream's cancelled slow call");
      const pending = await post(gw.url, call(6, "slow", { ms: 60_000 }, 120_000), s);
      const ended = await fetch(gw.url, { method: "DELETE", headers: { ...VERSION, "mcp-session-id": s } });
      assert.equal(ended.status, 200);
      const last = events(await pending.text()).at(-1);
      assert.equal(last?.id, 6);
      assert.ok(last?.error, JSON.stringify(last));
    },
  );
});

/** The JSON-RPC messages of an SSE text's `data:` lines (the priming event's empty data left out). */
const events = (text: string): Message[] => [...text.matchAll(/^data: ?(\S.*)$/gm)].map((m) => JSON.parse(m[1]!) as Message);
