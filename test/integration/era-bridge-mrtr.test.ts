/**
 * Issue 25, bridges 1 and 3 (ADR 0032, "MRTR bridges"): a 2026-07-28 client
 * (SDK v2, pinned) is asked for input only through `input_required`.
 * Bridge 3: server-everything (a 2025-era upstream, in process) sends
 * elicitation, sampling and roots requests mid-call; the gateway parks them
 * and the client's retries answer them. Bridge 1: the dual-era reference
 * server (over HTTP, spoken to in 2026-07-28) answers `input_required`; the
 * gateway relays it with the upstream's requestState sealed. Refusals (a
 * changed, replayed, expired, foreign or re-aimed state) and the parking TTL
 * are checked on the raw wire.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { MODERN, modernRequest } from "../helpers/modern-requests.js";
import { everythingStdio, startGateway, type TestGateway } from "../helpers/gateway.js";
import { parkedCallsOf } from "../../src/http/modern-mrtr.js";

const CAPS = { elicitation: { form: {} }, sampling: {}, roots: {} };
const T = { timeout: 120_000 };

/** One raw 2026-07-28 request from a client that declares elicitation, sampling and roots. */
const modern = (url: string, _id: number, method: string, params: Record<string, unknown>) => modernRequest(url, method, params, { capabilities: CAPS });

/** An SDK v2 client pinned to 2026-07-28 that answers elicitation, sampling and roots. */
async function modernClient(url: string, capabilities: Record<string, unknown> = CAPS): Promise<{ client: ModernClient; asked: string[] }> {
  const asked: string[] = [];
  const client = new ModernClient({ name: "modern-mrtr", version: "1" }, { capabilities, versionNegotiation: { mode: { pin: MODERN } } });
  client.setRequestHandler("elicitation/create", (request) => {
    asked.push(`elicitation: ${request.params.message}`);
    const message = request.params.message;
    if (message === "Favourite colour?") return { action: "accept", content: { color: "blue" } };
    if (message === "Confirm?") return { action: "accept", content: { ok: true } };
    return { action: "accept", content: { name: "Alice", check: true } };
  });
  client.setRequestHandler("sampling/createMessage", () => {
    asked.push("sampling");
    return { role: "assistant", model: "test-model", content: { type: "text", text: "Paris" } };
  });
  if (capabilities.roots) {
    client.setRequestHandler("roots/list", () => {
      asked.push("roots");
      return { roots: [{ uri: "file:///work/project", name: "project" }] };
    });
  }
  await client.connect(new ModernTransport(new URL(url)));
  return { client, asked };
}

const textOf = (result: { content?: unknown }) => JSON.stringify(result.content);

describe("MRTR bridges for a 2026-07-28 client", () => {
  let upstream: ModernReferenceServer;
  let gw: TestGateway;
  let everything: string;
  let modernFace: string;
  before(async () => {
    upstream = await startModernReferenceServer();
    gw = await startInProcessGateway({ mcpServers: { everything: inProcess("everything"), modern: { url: upstream.url } } });
    everything = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    modernFace = gw.url.replace(/\/mcp$/, "/servers/modern/mcp");
  });
  after(async () => {
    await gw?.close();
    await upstream?.close();
  });

  it("bridge 3: server-everything's elicitation, sampling and roots reach an SDK v2 client as input_required", T, async () => {
    const { client, asked } = await modernClient(everything);
    try {
      const elicited = await client.callTool({ name: "trigger-elicitation-request", arguments: {} });
      assert.match(textOf(elicited), /User provided the requested information/);
      assert.match(textOf(elicited), /Alice/);
      const sampled = await client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "Capital of France?", maxTokens: 20 } });
      assert.match(textOf(sampled), /LLM sampling result/);
      assert.match(textOf(sampled), /Paris/);
      const roots = await client.callTool({ name: "get-roots-list", arguments: {} });
      assert.match(textOf(roots), /file:\/\/\/work\/project/);
      assert.ok(
        asked.some((a) => a.startsWith("elicitation")),
        asked.join(", "),
      );
      assert.ok(asked.includes("sampling") && asked.includes("roots"), asked.join(", "));
    } finally {
      await client.close();
    }
    await waitFor(() => gw.gateway.context.sessions.size === 0 && parkedCallsOf(gw.gateway.context).size === 0, "no session or parked call is left");
  });

  it("bridge 3 on the wire: a parked handle answers once, for the same call only", T, async () => {
    const first = await modern(everything, 1, "tools/call", { name: "trigger-elicitation-request", arguments: {} });
    const result = first.body.result!;
    assert.equal(result.resultType, "input_required", JSON.stringify(first.body));
    const [key, request] = Object.entries(result.inputRequests as Record<string, { method: string; params: { message: string } }>)[0]!;
    assert.equal(request.method, "elicitation/create");
    assert.match(result.requestState as string, /^emcp1p\./);
    assert.equal(parkedCallsOf(gw.gateway.context).size, 1, "the call is parked, open upstream");
    // Another tool with the same handle: refused, and the parked call is untouched.
    const aimed = await modern(everything, 2, "tools/call", {
      name: "echo",
      arguments: { message: "x" },
      inputResponses: {},
      requestState: result.requestState,
    });
    assert.equal(aimed.body.error?.code, -32602, JSON.stringify(aimed.body));
    assert.match(aimed.body.error.message, /another call/);
    const answer = { [key]: { action: "accept", content: { name: "Bob" } } };
    const retry = await modern(everything, 3, "tools/call", {
      name: "trigger-elicitation-request",
      arguments: {},
      inputResponses: answer,
      requestState: result.requestState,
    });
    assert.equal(retry.body.result?.resultType, "complete", JSON.stringify(retry.body));
    assert.match(JSON.stringify(retry.body.result?.content), /Bob/);
    const replay = await modern(everything, 4, "tools/call", {
      name: "trigger-elicitation-request",
      arguments: {},
      inputResponses: answer,
      requestState: result.requestState,
    });
    assert.equal(replay.body.error?.code, -32602);
    assert.match(replay.body.error.message, /parked request it stands for is gone/);
    assert.equal(replay.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE", JSON.stringify(replay.body.error));
    const forged = await modern(everything, 5, "tools/call", {
      name: "trigger-elicitation-request",
      arguments: {},
      inputResponses: answer,
      requestState: "made-up",
    });
    assert.match(forged.body.error?.message ?? "", /not issued by this gateway/);
  });

  it("bridge 1: the reference server's input_required rounds reach an SDK v2 client through the gateway", T, async () => {
    const { client, asked } = await modernClient(modernFace);
    try {
      const named = await client.callTool({ name: "test_input_required_result_elicitation", arguments: {} });
      assert.match(textOf(named), /Hello, Alice!/);
      const rounds = await client.callTool({ name: "test_input_required_result_multi_round", arguments: {} });
      assert.match(textOf(rounds), /Alice likes blue/);
      assert.match(textOf(await client.callTool({ name: "test_input_required_result_sampling", arguments: {} })), /model said: Paris/);
      assert.match(textOf(await client.callTool({ name: "test_input_required_result_list_roots", arguments: {} })), /file:\/\/\/work\/project/);
      assert.ok(asked.filter((a) => a.startsWith("elicitation")).length >= 3, asked.join(", "));
    } finally {
      await client.close();
    }
    assert.equal(parkedCallsOf(gw.gateway.context).size, 0, "bridge 1 parks nothing: the state travels with the client");
  });

  it("a client that declares no roots: its requests share one upstream connection (ADR 0058), and bridges 1 and 3 still reach it", T, async () => {
    const { client, asked } = await modernClient(modernFace, { elicitation: { form: {} }, sampling: {} });
    const discovers = () => upstream.methods.filter((m) => m === "server/discover").length;
    try {
      // The first request may connect (the principal's connection); every later one reuses it.
      assert.match(textOf(await client.callTool({ name: "test_input_required_result_elicitation", arguments: {} })), /Hello, Alice!/);
      const connected = discovers();
      for (let i = 0; i < 3; i++) {
        assert.match(textOf(await client.callTool({ name: "test_input_required_result_multi_round", arguments: {} })), /Alice likes blue/);
        assert.match(textOf(await client.callTool({ name: "test_input_required_result_sampling", arguments: {} })), /model said: Paris/);
      }
      assert.equal(discovers(), connected, "no new upstream connection for the same principal's later requests");
      assert.ok(asked.filter((a) => a.startsWith("elicitation")).length >= 7, asked.join(", "));
    } finally {
      await client.close();
    }
    const legacy = await modernClient(everything, { elicitation: { form: {} }, sampling: {} });
    try {
      for (let i = 0; i < 2; i++) {
        const elicited = await legacy.client.callTool({ name: "trigger-elicitation-request", arguments: {} });
        assert.match(textOf(elicited), /Alice/);
        const sampled = await legacy.client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "Capital of France?", maxTokens: 20 } });
        assert.match(textOf(sampled), /Paris/);
      }
    } finally {
      await legacy.client.close();
    }
    assert.equal(parkedCallsOf(gw.gateway.context).size, 0, "every parked call was resumed");
  });

  it("bridge 1 on the wire: the upstream's state is sealed; a changed, replayed or re-aimed one is refused", T, async () => {
    const tool = "test_input_required_result_request_state";
    const first = await modern(modernFace, 1, "tools/call", { name: tool, arguments: {} });
    const result = first.body.result!;
    assert.equal(result.resultType, "input_required", JSON.stringify(first.body));
    assert.equal(result.content, undefined, "no placeholder content reaches the client");
    const state = result.requestState as string;
    assert.match(state, /^emcp1\./, "the client holds the gateway's seal, not the upstream's state");
    assert.equal(parkedCallsOf(gw.gateway.context).size, 0);
    const key = Object.keys(result.inputRequests as object)[0]!;
    const inputResponses = { [key]: { action: "accept", content: { ok: true } } };
    const body = Buffer.from(state.slice("emcp1.".length), "base64url");
    body[body.length - 20] = body[body.length - 20]! ^ 1;
    const tampered = await modern(modernFace, 2, "tools/call", {
      name: tool,
      arguments: {},
      inputResponses,
      requestState: `emcp1.${body.toString("base64url")}`,
    });
    assert.equal(tampered.body.error?.code, -32602, JSON.stringify(tampered.body));
    assert.match(tampered.body.error.message, /integrity/);
    const aimed = await modern(modernFace, 3, "tools/call", {
      name: "test_input_required_result_tampered_state",
      arguments: {},
      inputResponses,
      requestState: state,
    });
    assert.match(aimed.body.error?.message ?? "", /another call/, JSON.stringify(aimed.body));
    const retry = await modern(modernFace, 4, "tools/call", { name: tool, arguments: {}, inputResponses, requestState: state });
    assert.equal(retry.body.result?.resultType, "complete", JSON.stringify(retry.body));
    const replay = await modern(modernFace, 5, "tools/call", { name: tool, arguments: {}, inputResponses, requestState: state });
    assert.match(replay.body.error?.message ?? "", /used already/, JSON.stringify(replay.body));
    assert.equal(replay.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE");
  });
});

describe("two 2026-07-28 requests at once to a session-mode stdio server (ADR 0058)", () => {
  // A real process: on stdio an upstream's request mid-call is told apart only while one call is in flight (ADR 0010).
  it("each gets its own elicitation as input_required: the principal's connection serves one request at a time", T, async () => {
    const gw = await startGateway({ mcpServers: { everything: everythingStdio() }, gateway: { upstream: { warmPool: 0 } } });
    try {
      const url = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
      const caps = { elicitation: { form: {} } };
      // One request first, so the principal's connection is there (lingering) when the two below arrive together.
      await modernRequest(url, "tools/list", {}, { capabilities: caps });
      const call = { name: "trigger-elicitation-request", arguments: {} };
      const answers = await Promise.all([
        modernRequest(url, "tools/call", call, { capabilities: caps }),
        modernRequest(url, "tools/call", call, { capabilities: caps }),
      ]);
      for (const r of answers) assert.equal(r.body.result?.resultType, "input_required", JSON.stringify(r.body).slice(0, 600));
    } finally {
      await gw.close();
    }
  });
});

describe("a parked call nobody retries", () => {
  let gw: TestGateway;
  const clock = new ManualClock(Date.now());
  before(async () => {
    gw = await startInProcessGateway({ gateway: { mrtr: { parkTtlMs: 30_000 } } }, { clock });
  });
  after(() => gw?.close());

  it("is cancelled after gateway.mrtr.parkTtlMs, leaving no session, timer or parked call; a late retry is refused", T, async () => {
    const everything = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    const first = await modern(everything, 1, "tools/call", { name: "trigger-elicitation-request", arguments: {} });
    assert.equal(first.body.result?.resultType, "input_required", JSON.stringify(first.body));
    const parked = parkedCallsOf(gw.gateway.context);
    assert.equal(parked.size, 1);
    assert.equal(gw.gateway.context.sessions.size, 1, "the parked call's session is alive");
    clock.advance(30_001);
    await waitFor(() => parked.size === 0 && gw.gateway.context.sessions.size === 0, "the parked call and its session end");
    const key = Object.keys(first.body.result.inputRequests as object)[0]!;
    const late = await modern(everything, 2, "tools/call", {
      name: "trigger-elicitation-request",
      arguments: {},
      inputResponses: { [key]: { action: "accept", content: { name: "Late" } } },
      requestState: first.body.result.requestState,
    });
    assert.match(late.body.error?.message ?? "", /gone/, JSON.stringify(late.body));
  });
});

async function waitFor(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
