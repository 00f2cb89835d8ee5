/**
 * Issue 25, upstream side: the gateway reaches a 2026-07-28 upstream (the
 * dual-era SDK v2 reference server, test/fixtures/modern-reference-server.ts,
 * over real HTTP) and bridges it to an SDK 1.32 client (bridge 2): the
 * upstream's `input_required` becomes real elicitation / sampling / roots
 * requests to the client, and the call completes with its answers. A 2025-era
 * HTTP upstream is still spoken to as before, and each endpoint is probed once.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { startHungServer, type HungServer } from "../fixtures/hung-http-server.js";
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { connectFace, type Peer } from "../helpers/transparent.js";

const T = { timeout: 120_000 };
const textOf = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

describe("a 2026-07-28 upstream behind the gateway, a 2025-era client in front", () => {
  let upstream: ModernReferenceServer;
  let legacy: HungServer;
  let gw: TestGateway;
  const peers: Peer[] = [];
  const face = async (server: string, withRoots = false) => {
    const peer = await connectFace(`${new URL(gw.url).origin}/servers/${server}/mcp`, {
      capabilities: { elicitation: { form: {} }, sampling: {}, ...(withRoots ? { roots: {} } : {}) },
      elicit: (params) =>
        params.message === "Favourite colour?" ? { action: "accept", content: { color: "blue" } } : { action: "accept", content: { name: "Alice" } },
      sample: () => ({ role: "assistant", model: "test-model", content: { type: "text", text: "Paris" } }),
      roots: () => [{ uri: "file:///work/project", name: "project" }],
    });
    peers.push(peer);
    return peer;
  };

  before(async () => {
    upstream = await startModernReferenceServer();
    legacy = await startHungServer();
    legacy.release();
    gw = await startGateway({ mcpServers: { modern: { url: upstream.url }, legacy: { url: legacy.url } } });
  });
  after(async () => {
    for (const p of peers) await p.client.close().catch(() => undefined);
    await gw?.close();
    await upstream?.close();
    await legacy?.close();
  });

  test("initialize and tools/list reach the modern upstream without a 2025 handshake", T, async () => {
    const peer = await face("modern");
    assert.equal(peer.client.getServerVersion()?.name, "modern-reference");
    const { tools } = await peer.client.listTools();
    assert.ok(tools.some((t) => t.name === "test_input_required_result_elicitation"));
    assert.ok(upstream.methods.includes("server/discover"), "the upstream was probed with server/discover");
    assert.ok(!upstream.methods.includes("initialize"), `the upstream never got initialize: ${upstream.methods.join(", ")}`);
    // A plain tool answers as a 2025 result: no resultType on the legacy wire.
    const simple = await peer.client.callTool({ name: "test_simple_text", arguments: {} });
    assert.equal(textOf(simple), "This is a simple text response for testing.");
    assert.equal((simple as Record<string, unknown>).resultType, undefined);
  });

  test("bridge 2: the upstream's input_required elicitation is a real elicitation/create to the client", T, async () => {
    const peer = await face("modern");
    const result = await peer.client.callTool({ name: "test_input_required_result_elicitation", arguments: {} });
    assert.equal(textOf(result), "Hello, Alice!");
    assert.equal(peer.elicitations.length, 1);
    assert.equal(peer.elicitations[0]?.message, "What is your name?");
  });

  test("bridge 2: several rounds with a sealed requestState, sampling and roots", T, async () => {
    const peer = await face("modern", true);
    assert.equal(textOf(await peer.client.callTool({ name: "test_input_required_result_multi_round", arguments: {} })), "Alice likes blue");
    assert.equal(peer.elicitations.length, 2);
    assert.equal(textOf(await peer.client.callTool({ name: "test_input_required_result_sampling", arguments: {} })), "model said: Paris");
    assert.equal(peer.samplings.length, 1);
    assert.equal(textOf(await peer.client.callTool({ name: "test_input_required_result_list_roots", arguments: {} })), "roots: file:///work/project");
    assert.equal(textOf(await peer.client.callTool({ name: "test_input_required_result_multiple_inputs", arguments: {} })), "both answered for Alice");
  });

  test("a 2025-era HTTP upstream is spoken to as before, and each endpoint is probed once", T, async () => {
    const discovers = () => upstream.methods.filter((m) => m === "server/discover").length;
    const before = discovers();
    const first = await face("legacy");
    const { tools } = await first.client.listTools();
    assert.deepEqual(
      tools.map((t) => t.name),
      ["late-echo"],
    );
    const echoed = await first.client.callTool({ name: "late-echo", arguments: { message: "hi" } });
    assert.equal(textOf(echoed), "hi");
    const requestsAfterFirst = legacy.requests;
    await face("legacy");
    // The second session's connection initializes without a second probe: initialize + initialized (+ its GET stream) only.
    assert.ok(legacy.requests - requestsAfterFirst <= 3, `no probe again: ${legacy.requests - requestsAfterFirst} requests`);
    // Its first request connects it (initialize answers from what the gateway knew: docs/adr/0034).
    await (await face("modern")).client.listTools();
    assert.equal(discovers(), before + 1, "the modern endpoint's verdict was kept; only the new session's initialize asked server/discover");
  });
});
