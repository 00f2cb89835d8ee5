/**
 * The relay fast path, stage 2 (docs/adr/0037 §2, issue 27): with
 * gateway.transparent.fastPath a plain tools/call goes upstream as one raw
 * JSON-RPC message (its own string ids `r<n>`, past the SDK Client). What it
 * must keep, each checked on the upstream's side of the pipe: the answer,
 * progress under the client's own token, a client's cancel and a session's
 * close as the upstream's notifications/cancelled, the request timeout on
 * the gateway's clock, an elicitation during the call reaching its session,
 * the call failing when the upstream's process dies, and the SDK path (and
 * its output-schema check) for a tool with an output schema.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, recordingTransportFactory } from "../helpers/in-process.js";
import { pollFor } from "../helpers/core-extra.js";

const LIMIT = { timeout: 120_000 };
type Sent = { method?: string; id?: unknown; params?: Record<string, unknown> & { _meta?: { progressToken?: unknown } } };

async function connect(url: string, capabilities: Record<string, unknown> = {}): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: "raw", version: "1" }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

const text = (r: CallToolResult) => (r.content[0] as { text?: string } | undefined)?.text;
const rawId = (id: unknown) => typeof id === "string" && /^r\d+$/.test(id);

describe("relay raw forwarding (fast path on)", () => {
  let gw: TestGateway;
  const sent: Sent[] = [];
  const face = (server: string) => new URL(`/servers/${server}/mcp`, gw.url).href;
  const upstreamCall = (from: number, tool: string) =>
    pollFor(async () => sent.slice(from).find((m) => m.method === "tools/call" && m.params?.name === tool), `the upstream tools/call of ${tool}`);
  before(async () => {
    gw = await startGateway(
      { mcpServers: { everything: inProcess("everything"), slow: inProcess("slow") }, gateway: { transparent: { fastPath: true } } },
      { transportFactory: recordingTransportFactory(sent) },
    );
  });
  after(() => gw.close());

  test("a plain call goes upstream with a raw id and is answered; a tool with an output schema keeps the SDK path and its check", LIMIT, async () => {
    const { client } = await connect(face("everything"));
    try {
      const tools = (await client.listTools()).tools;
      const before = sent.length;
      assert.equal(text((await client.callTool({ name: "echo", arguments: { message: "hi" } })) as CallToolResult), "Echo: hi");
      assert.ok(rawId((await upstreamCall(before, "echo")).id), "echo went raw");
      const structured = tools.find((t) => t.outputSchema);
      assert.ok(structured, "server-everything lists a tool with an output schema");
      const mark = sent.length;
      const args = structured.name === "get-structured-content" ? { location: "New York" } : {};
      const result = (await client.callTool({ name: structured.name, arguments: args })) as CallToolResult;
      assert.ok(result.structuredContent, "its structured content came back");
      assert.equal(typeof (await upstreamCall(mark, structured.name)).id, "number", "the SDK client sent it (it checks the output schema)");
    } finally {
      await client.close();
    }
  });

  test("progress reaches the client under its own token; the upstream saw the raw call's token", LIMIT, async () => {
    const { client } = await connect(face("slow"));
    try {
      const before = sent.length;
      const progress: string[] = [];
      const result = await client.callTool({ name: "slow", arguments: { ms: 10 } }, undefined, { onprogress: (p) => void progress.push(String(p.message)) });
      assert.equal(text(result as CallToolResult), "slept 10ms");
      assert.deepEqual(progress, ["started"]);
      const up = await upstreamCall(before, "slow");
      assert.ok(rawId(up.id));
      assert.equal(up.params?._meta?.progressToken, up.id, "the raw call asked for progress with its own id as token");
    } finally {
      await client.close();
    }
  });

  test("a client's cancel and a session's close reach the upstream as notifications/cancelled of the raw id", LIMIT, async () => {
    const { client, transport } = await connect(face("slow"));
    let before = sent.length;
    const ac = new AbortController();
    const started = new Promise<void>((resolve) => {
      void client.callTool({ name: "slow", arguments: { ms: 60_000 } }, undefined, { signal: ac.signal, onprogress: () => resolve() }).catch(() => undefined);
    });
    await started;
    const first = await upstreamCall(before, "slow");
    ac.abort("changed my mind");
    const cancelled = await pollFor(async () => sent.slice(before).find((m) => m.method === "notifications/cancelled"), "the upstream cancel");
    assert.ok(rawId(first.id));
    assert.equal(cancelled.params?.requestId, first.id);

    before = sent.length;
    const running = new Promise<void>((resolve) => {
      void client.callTool({ name: "slow", arguments: { ms: 60_000 } }, undefined, { onprogress: () => resolve() }).catch(() => undefined);
    });
    await running;
    const second = await upstreamCall(before, "slow");
    await transport.terminateSession();
    const ended = await pollFor(async () => sent.slice(before).find((m) => m.method === "notifications/cancelled"), "the upstream cancel at the session's end");
    assert.ok(rawId(second.id));
    assert.equal(ended.params?.requestId, second.id);
    await client.close();
  });

  test("an elicitation the upstream sends during a raw call reaches the calling session", LIMIT, async () => {
    const { client } = await connect(face("slow"), { elicitation: {} });
    const questions: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      questions.push(req.params.message);
      return { action: "accept", content: { answer: `a${questions.length}` } };
    });
    try {
      const before = sent.length;
      assert.equal(text((await client.callTool({ name: "elicit-twice", arguments: {} })) as CallToolResult), "a1,a2");
      assert.deepEqual(questions, ["first question", "second question"]);
      assert.ok(rawId((await upstreamCall(before, "elicit-twice")).id));
    } finally {
      await client.close();
    }
  });

  test("the upstream's process dying fails the raw call in flight (and the next call gets a new process)", LIMIT, async () => {
    const { client } = await connect(face("slow"));
    try {
      const before = sent.length;
      const failed = await client.callTool({ name: "crash", arguments: {} }).then(
        (r) => JSON.stringify(r),
        (err: unknown) => String(err),
      );
      assert.ok(rawId((await upstreamCall(before, "crash")).id));
      assert.match(failed, /closed|disconnected|unavailable/i, failed);
      await pollFor(
        async () =>
          (await client.callTool({ name: "slow", arguments: { ms: 0 } }).then(
            (r) => text(r as CallToolResult),
            () => undefined,
          )) === "slept 0ms" || undefined,
        "the upstream back",
      );
    } finally {
      await client.close();
    }
  });
});

test("the raw call's timeout runs on the gateway's clock: advancing it fails the call and cancels it upstream", LIMIT, async () => {
  const sent: Sent[] = [];
  const clock = new ManualClock(Date.now());
  const maxTtlMs = 600_000;
  const gw = await startGateway(
    { mcpServers: { slow: inProcess("slow") }, gateway: { transparent: { fastPath: true }, tasks: { maxTtlMs } } },
    { transportFactory: recordingTransportFactory(sent), clock },
  );
  const { client } = await connect(new URL("/servers/slow/mcp", gw.url).href);
  try {
    const before = sent.length;
    let progressed!: () => void;
    const started = new Promise<void>((resolve) => (progressed = resolve));
    const call = client.callTool({ name: "slow", arguments: { ms: 60_000 } }, undefined, { onprogress: () => progressed(), timeout: 120_000 }).then(
      (r) => JSON.stringify(r),
      (err: unknown) => String(err),
    );
    await started;
    const up = await pollFor(async () => sent.slice(before).find((m) => m.method === "tools/call"), "the upstream call");
    assert.ok(rawId(up.id));
    clock.advance(maxTtlMs + 1);
    const why = await call;
    assert.match(why, /timed out/i, why);
    const cancelled = await pollFor(async () => sent.slice(before).find((m) => m.method === "notifications/cancelled"), "the upstream cancel");
    assert.equal(cancelled.params?.requestId, up.id);
  } finally {
    await client.close();
    await gw.close();
  }
});
