/**
 * subscriptions/listen for 2026-07-28 clients (issue 25, bridge 5; ADR 0032
 * "Listening"): server-everything (a legacy upstream) in process behind the
 * gateway's server face. One stream carries what the filter asked for and the
 * face can deliver: resource list changes (gzip-file-as-resource registers a
 * resource), resource updates for subscribed URIs (toggle-subscriber-updates),
 * and the tasks extension's notifications/tasks for the caller's own tasks
 * (simulate-research-query, input_required then completed with its result);
 * closing it leaves nothing behind.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";
import { openListen, type ListenMessage } from "../helpers/listen.js";
import { modernRequest } from "../helpers/modern-requests.js";
import { liveTaskHosts, taskHostSessionId } from "../../src/http/modern-tasks.js";
import { SUBSCRIPTION_ID_META_KEY, openListenCount } from "../../src/http/modern-subscriptions.js";

const URI = "demo://resource/dynamic/text/1";
const DATA = `data:text/plain;base64,${Buffer.from("listen").toString("base64")}`;

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("subscriptions/listen for 2026-07-28 clients", { timeout: 300_000 }, () => {
  let gw: TestGateway;
  let face: string;
  before(async () => {
    gw = await startInProcessGateway();
    face = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
  });
  after(() => gw.close());

  const host = async () =>
    (await liveTaskHosts(gw.gateway.context)).find((h) => h.session.id === taskHostSessionId({ kind: "server", server: "everything" }, undefined));

  it("a bad filter is -32602 and opens nothing", async () => {
    for (const notifications of [undefined, "all", { toolsListChanged: "yes" }, { resourceSubscriptions: "file:///a" }]) {
      const stream = await openListen(face, notifications);
      await stream.ended;
      assert.equal(stream.status, 200);
      assert.equal(stream.messages[0]?.error?.code, -32602, JSON.stringify(stream.messages));
      assert.match(stream.messages[0]?.error?.message ?? "", /EMCP_BAD_ARGUMENTS: subscriptions\/listen needs params.notifications/);
    }
    assert.equal(openListenCount(gw.gateway.context), 0);
  });

  it("list changes and resource updates of the face's upstream reach the stream; closing it releases everything", async () => {
    const stream = await openListen(face, { resourcesListChanged: true, toolsListChanged: true, resourceSubscriptions: [URI] }, { id: 7 });
    assert.equal(stream.status, 200);
    assert.match(stream.contentType ?? "", /text\/event-stream/);
    const ack = await stream.next((m) => m.method === "notifications/subscriptions/acknowledged", "the acknowledgement");
    assert.deepEqual(ack.params?.notifications, { resourcesListChanged: true, toolsListChanged: true, resourceSubscriptions: [URI] });
    assert.equal(ack.params?._meta?.[SUBSCRIPTION_ID_META_KEY], 7);
    // Through the same principal's host (the tasks extension declared): the upstream connection the stream listens on.
    const toggled = await modernRequest(face, "tools/call", { name: "toggle-subscriber-updates", arguments: {} });
    assert.match(JSON.stringify(toggled.body.result), /Started simulated resource updated/, JSON.stringify(toggled.body));
    const updated = await stream.next((m) => m.method === "notifications/resources/updated", "a resource update");
    assert.equal(updated.params?.uri, URI);
    assert.equal(updated.params?._meta?.[SUBSCRIPTION_ID_META_KEY], 7);
    const gzip = await modernRequest(face, "tools/call", {
      name: "gzip-file-as-resource",
      arguments: { name: "listen.gz", data: DATA, outputType: "resourceLink" },
    });
    assert.ok(gzip.body.result, JSON.stringify(gzip.body));
    const changed = await stream.next((m) => m.method === "notifications/resources/list_changed", "resources/list_changed");
    assert.equal(changed.params?._meta?.[SUBSCRIPTION_ID_META_KEY], 7);
    // Stop the upstream's 5 s updates, then hang up: the stream, its subscription and its timer are gone.
    await modernRequest(face, "tools/call", { name: "toggle-subscriber-updates", arguments: {} });
    stream.close();
    await until("the stream is released", async () => openListenCount(gw.gateway.context) === 0 && (await host())?.retained().listeners === 0);
    const left = (await host())!.retained();
    assert.deepEqual(
      { listeners: left.listeners, subscriptions: left.subscriptions, announced: left.announced },
      { listeners: 0, subscriptions: 0, announced: 0 },
    );
  });

  it("the caller's task statuses arrive as notifications/tasks: input_required with its inputRequests, then completed with the result", async () => {
    const created = await modernRequest(face, "tools/call", { name: "simulate-research-query", arguments: { topic: "python", ambiguous: true } });
    const taskId = created.body.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(created.body));
    const stream = await openListen(face, { taskIds: [taskId, "no-such-task"] });
    const ack = await stream.next((m) => m.method === "notifications/subscriptions/acknowledged", "the acknowledgement");
    assert.deepEqual(ack.params?.notifications, { taskIds: [taskId] }, "an unknown task id is not acknowledged");
    const isTask = (status: string) => (m: ListenMessage) => m.method === "notifications/tasks" && m.params?.taskId === taskId && m.params?.status === status;
    const waiting = await stream.next(isTask("input_required"), "input_required");
    const keys = Object.keys(waiting.params?.inputRequests ?? {});
    assert.equal(keys.length, 1, JSON.stringify(waiting.params));
    assert.equal(waiting.params?.inputRequests[keys[0]!].method, "elicitation/create");
    assert.equal(waiting.params?._meta?.[SUBSCRIPTION_ID_META_KEY], "listen-1");
    await modernRequest(face, "tasks/update", { taskId, inputResponses: { [keys[0]!]: { action: "accept", content: { interpretation: "the snake" } } } });
    const done = await stream.next(isTask("completed"), "completed");
    assert.match(done.params?.result.content[0].text as string, /Clarification\*\*: the snake/);
    assert.equal(done.params?.resultType, undefined, "a notification is no result");
    stream.close();
    await until("the stream is released", () => openListenCount(gw.gateway.context) === 0);
  });

  it("a filter naming more than 100 task ids or URIs is -32602; concurrent listens of one principal stop at the limit", async () => {
    const many = await openListen(face, { taskIds: Array.from({ length: 101 }, (_, i) => `t${i}`) });
    await many.ended;
    assert.match(many.messages[0]?.error?.message ?? "", /taskIds names more than 100 entries/, JSON.stringify(many.messages));
    const streams = await Promise.all(Array.from({ length: 20 }, (_, i) => openListen(face, { toolsListChanged: true }, { id: `c${i}` })));
    const first = await Promise.all(
      streams.map((s) => s.next((m) => m.method === "notifications/subscriptions/acknowledged" || m.error !== undefined, "an acknowledgement or an error")),
    );
    assert.equal(first.filter((m) => m.error === undefined).length, 16, JSON.stringify(first));
    assert.ok(
      first.filter((m) => m.error !== undefined).every((m) => /EMCP_LIMIT_REACHED/.test(m.error!.message)),
      JSON.stringify(first),
    );
    for (const s of streams) s.close();
    await until("the streams are released", () => openListenCount(gw.gateway.context) === 0);
  });

  it("modern resources/subscribe stays -32601: the listen filter is how a modern client asks for updates", async () => {
    const refused = await modernRequest(face, "resources/subscribe", { uri: URI });
    assert.equal(refused.body.error?.code, -32601, JSON.stringify(refused.body));
  });
});

describe("a 2026-07-28 client hanging up while its listen is being set up", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let face: string;
  // server-everything as a real child process: the first listen opens the principal's host, which spawns it (a set-up that takes real time).
  before(async () => {
    gw = await startGateway();
    face = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
  });
  after(() => gw.close());

  it("leaves no stream, listener or timer", async () => {
    const hostId = taskHostSessionId({ kind: "server", server: "everything" }, undefined);
    const abort = new AbortController();
    const opening = openListen(face, { toolsListChanged: true }, { id: "gone", signal: abort.signal }).then(
      (stream) => stream,
      () => undefined,
    );
    // Hang up once the gateway is setting the stream up (the host's session exists, its face still connecting its upstream).
    await until("the host is being opened", () => gw.gateway.context.sessions.get(hostId) !== undefined, 60_000);
    abort.abort();
    assert.equal(await opening, undefined, "the client left before the stream's headers");
    const host = async () => (await liveTaskHosts(gw.gateway.context)).find((h) => h.session.id === hostId);
    await until("the host opened", async () => (await host()) !== undefined, 60_000);
    await until("nothing is kept for the listen", async () => openListenCount(gw.gateway.context) === 0 && (await host())?.retained().listeners === 0);
  });
});

describe("a 2026-07-28 client hanging up", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let face: string;
  before(async () => {
    // Shared: one upstream connection outlives each modern request's ephemeral session, so only a notifications/cancelled can end its call.
    gw = await startInProcessGateway({ mcpServers: { slow: { ...inProcess("slow"), sharing: "shared" } } });
    face = gw.url.replace(/\/mcp$/, "/servers/slow/mcp");
  });
  after(() => gw.close());

  const slowCalls = async (): Promise<{ running: number; cancelled: number }> => {
    const answer = await modernRequest(face, "tools/call", { name: "slow-calls", arguments: {} }, { capabilities: {} });
    return JSON.parse(answer.body.result?.content[0].text as string) as { running: number; cancelled: number };
  };

  it("closing a plain call's response cancels the upstream call (notifications/cancelled to the legacy upstream)", async () => {
    const abort = new AbortController();
    const envelope = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {},
      "io.modelcontextprotocol/clientInfo": { name: "hang-up", version: "1" },
    };
    const call = fetch(face, {
      method: "POST",
      signal: abort.signal,
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "slow",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "slow", arguments: { ms: 600_000 }, _meta: envelope } }),
    }).catch((err: unknown) => err);
    await until("the slow call runs upstream", async () => (await slowCalls()).running === 1);
    abort.abort();
    await call;
    await until("the upstream call is cancelled", async () => {
      const now = await slowCalls();
      return now.running === 0 && now.cancelled === 1;
    });
  });
});
