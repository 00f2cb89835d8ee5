/**
 * /all/mcp with a hung upstream (issue 20, design TF-10): an HTTP upstream
 * that accepts the connection and never answers must not stall the
 * aggregate. Initialize and tools/list answer with the reachable upstream
 * (server-everything in this process, test/helpers/in-process.ts: no spawn to
 * wait for) and name the missing one; the hung upstream is not waited for
 * again; when it finally answers, it joins and the client gets
 * tools/list_changed. The aggregate waits 5 s (aggregateWaitMs; 30 s while the
 * reachable upstream was a stdio process, whose spawn on a loaded machine could
 * take most of that), the hung upstream's own connect timeout is 120 s and
 * every answer must come before it, so the test is about behaviour, not speed. With the hung upstream alone
 * (no spawn), its resources and prompts become listable in the same session
 * once it joins: the face offered them from initialize on.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
  type ListToolsResult,
} from "@modelcontextprotocol/sdk/types.js";
import { UNAVAILABLE_META_KEY } from "../../src/faces/transparent/handlers.js";
import { startHungServer } from "../fixtures/hung-http-server.js";
import { startGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const HUNG_CONNECT_TIMEOUT_MS = 120_000;
/** The whole wait is spent each time (the hung upstream never connects within it): short, as the reachable upstream is in process. */
const AGGREGATE_WAIT_MS = 5_000;

const missingOf = (listed: Pick<ListToolsResult, "_meta">) =>
  (listed._meta?.[UNAVAILABLE_META_KEY] as Array<{ server: string; reason: string }> | undefined) ?? [];

const until = async (what: string, done: () => boolean) => {
  const end = Date.now() + 30_000;
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  assert.ok(done(), what);
};

test("/all/mcp answers initialize and tools/list without waiting for a hung upstream, names it, and lists it once it joins", { timeout: 400_000 }, async () => {
  const hung = await startHungServer();
  const gw = await startInProcessGateway({
    mcpServers: { everything: inProcess("everything"), hung: { url: hung.url } },
    gateway: {
      logLevel: "silent",
      transparent: { aggregateWaitMs: AGGREGATE_WAIT_MS },
      upstream: { connectTimeoutMs: HUNG_CONNECT_TIMEOUT_MS, requestTimeoutMs: HUNG_CONNECT_TIMEOUT_MS },
    },
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
    assert.ok(elapsed < HUNG_CONNECT_TIMEOUT_MS, `initialize and two lists answered before the hung upstream's own timeout (took ${elapsed} ms)`);
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
      assert.match(missing[0]!.reason, new RegExp(`did not connect within ${AGGREGATE_WAIT_MS} ms \\(gateway\\.transparent\\.aggregateWaitMs\\)`));
    }
    // Not waited for again and not tried again: the one attempt (held by the upstream) goes on in the background.
    assert.equal(hung.requests, 1, "one connect attempt for initialize and both lists");

    // The upstream answers at last: it joins the aggregate, and the client is told. (Counted from here: the reachable
    // upstream's own list_changed notifications, sent as it connected at the first list, reach the client too.)
    listChanged = 0;
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

test("/all/mcp: resources and prompts of an upstream that joins after initialize are listable in the same session", { timeout: 180_000 }, async () => {
  const hung = await startHungServer();
  const gw = await startGateway({
    mcpServers: { hung: { url: hung.url } },
    gateway: {
      logLevel: "silent",
      transparent: { aggregateWaitMs: 1_000 },
      upstream: { connectTimeoutMs: HUNG_CONNECT_TIMEOUT_MS, requestTimeoutMs: HUNG_CONNECT_TIMEOUT_MS },
    },
  });
  const client = new Client({ name: "aggregate-late", version: "1.0.0" });
  const changed = { resources: 0, prompts: 0 };
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void changed.resources++);
  client.setNotificationHandler(PromptListChangedNotificationSchema, () => void changed.prompts++);
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, "/all/mcp"))), { timeout: HUNG_CONNECT_TIMEOUT_MS });
    // Nothing connected by initialize, yet the face offers what a later upstream may have.
    const caps = client.getServerCapabilities();
    assert.deepEqual(caps?.resources, { subscribe: true, listChanged: true });
    assert.deepEqual(caps?.prompts, { listChanged: true });
    assert.ok(caps?.logging && caps.completions, "logging and completions offered");

    const noResources = await client.listResources();
    assert.deepEqual(noResources.resources, []);
    assert.deepEqual(
      missingOf(noResources).map((m) => m.server),
      ["hung"],
    );
    const noPrompts = await client.listPrompts();
    assert.deepEqual(noPrompts.prompts, []);
    assert.deepEqual(
      missingOf(noPrompts).map((m) => m.server),
      ["hung"],
    );
    await assert.rejects(client.readResource({ uri: "late://note" }), /EMCP_UNKNOWN_RESOURCE|no upstream lists a resource/);
    await client.setLoggingLevel("error");

    hung.release();
    await until("resources/list_changed once the upstream joined", () => changed.resources > 0);
    await until("prompts/list_changed once the upstream joined", () => changed.prompts > 0);
    const resources = await client.listResources();
    assert.deepEqual(
      resources.resources.map((r) => r.uri),
      ["late://note"],
    );
    assert.deepEqual(missingOf(resources), []);
    const read = await client.readResource({ uri: "late://note" });
    assert.deepEqual(read.contents, [{ uri: "late://note", text: "late note" }]);
    const prompts = await client.listPrompts();
    assert.deepEqual(
      prompts.prompts.map((p) => p.name),
      ["hung__late-prompt"],
    );
    const prompt = await client.getPrompt({ name: "hung__late-prompt" });
    assert.deepEqual(prompt.messages, [{ role: "user", content: { type: "text", text: "late prompt" } }]);
  } finally {
    await client.close().catch(() => undefined);
    await gw.close();
    await hung.close();
  }
});
