/**
 * /all/mcp with a hung upstream (issue 20, design TF-10): an HTTP upstream
 * that accepts the connection and never answers must not stall the
 * aggregate. Initialize and tools/list answer with the reachable upstream
 * (server-everything over stdio) and name the missing one; the hung upstream
 * is not waited for again; when it finally answers, it joins and the client
 * gets tools/list_changed. The hung upstream's own connect timeout is 60 s and
 * every answer must come before it (40 s), so the test is about behaviour,
 * not speed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema, type ListToolsResult } from "@modelcontextprotocol/sdk/types.js";
import { UNAVAILABLE_META_KEY } from "../../src/faces/transparent/handlers.js";
import { startHungServer } from "../fixtures/hung-http-server.js";
import { everythingStdio, startGateway } from "../helpers/gateway.js";

const HUNG_CONNECT_TIMEOUT_MS = 60_000;
const BEFORE_HUNG_TIMEOUT_MS = 40_000;

const missingOf = (listed: ListToolsResult) => (listed._meta?.[UNAVAILABLE_META_KEY] as Array<{ server: string; reason: string }> | undefined) ?? [];

test("/all/mcp answers initialize and tools/list without waiting for a hung upstream, names it, and lists it once it joins", { timeout: 180_000 }, async () => {
  const hung = await startHungServer();
  const gw = await startGateway({
    mcpServers: { everything: everythingStdio(), hung: { url: hung.url } },
    gateway: { logLevel: "silent", upstream: { connectTimeoutMs: HUNG_CONNECT_TIMEOUT_MS, requestTimeoutMs: HUNG_CONNECT_TIMEOUT_MS } },
  });
  const client = new Client({ name: "aggregate-hung", version: "1.0.0" });
  let listChanged = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void listChanged++);
  try {
    const started = Date.now();
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, "/all/mcp"))), { timeout: HUNG_CONNECT_TIMEOUT_MS + 30_000 });
    const first = await client.listTools(undefined, { timeout: HUNG_CONNECT_TIMEOUT_MS + 30_000 });
    const second = await client.listTools(undefined, { timeout: HUNG_CONNECT_TIMEOUT_MS + 30_000 });
    const elapsed = Date.now() - started;
    assert.ok(elapsed < BEFORE_HUNG_TIMEOUT_MS, `initialize and two lists answered before the hung upstream's own timeout (took ${elapsed} ms)`);
    assert.ok(hung.requests >= 1, "the hung upstream was reached (it holds the gateway's initialize)");

    for (const listed of [first, second]) {
      assert.ok(
        listed.tools.some((t) => t.name === "everything__echo"),
        "the reachable upstream's tools are listed",
      );
      assert.ok(!listed.tools.some((t) => t.name.startsWith("hung__")));
      const missing = missingOf(listed);
      assert.deepEqual(
        missing.map((m) => m.server),
        ["hung"],
      );
      assert.match(missing[0]!.reason, /did not connect within 5000 ms \(gateway\.transparent\.aggregateWaitMs\)/);
    }
    // Not waited for again and not tried again: the one attempt (held by the upstream) goes on in the background.
    assert.equal(hung.requests, 1, "one connect attempt for initialize and both lists");

    // The upstream answers at last: it joins the aggregate, and the client is told.
    hung.release();
    const end = Date.now() + 30_000;
    while (listChanged === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    assert.ok(listChanged > 0, "tools/list_changed once the hung upstream joined");
    const after = await client.listTools();
    assert.ok(after.tools.some((t) => t.name === "hung__late-echo"));
    assert.ok(after.tools.some((t) => t.name === "everything__echo"));
    assert.deepEqual(missingOf(after), []);
    const echoed = await client.callTool({ name: "hung__late-echo", arguments: { message: "joined" } });
    assert.deepEqual(echoed.content, [{ type: "text", text: "joined" }]);
  } finally {
    await client.close().catch(() => undefined);
    await gw.close();
    await hung.close();
  }
});
