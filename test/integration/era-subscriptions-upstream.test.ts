/**
 * Listen fan-in from a 2026-07-28 upstream (issue 25, bridge 5; ADR 0032
 * "Listening"): the gateway opens `subscriptions/listen` on the SDK v2
 * reference server (test/fixtures/modern-reference-server.ts, real HTTP) for
 * each upstream connection, and what the upstream publishes reaches a 2025
 * client's session (list_changed refreshes the gateway's tools list;
 * `resources/subscribe` is bridged onto the listen filter) and a modern
 * client's own listen stream through the gateway. A dropped upstream stream
 * is reopened; closing the gateway's connections closes theirs. The listen
 * itself on a manual clock: its backoff, its filter changes, its end.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";
import { startModernTasksServer } from "../fixtures/modern-tasks-server.js";
import { startListenTasksServer } from "../fixtures/listen-tasks-server.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { listenCapabilities, UpstreamListen } from "../../src/upstream/modern/upstream-listen.js";
import { modernHeaders } from "../../src/upstream/modern/wire.js";
import { MODERN, TASKS_EXTENSION } from "../helpers/modern-requests.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import type { TestGateway } from "../helpers/gateway.js";
import { openListen } from "../helpers/listen.js";
import { connectFace, type Peer } from "../helpers/transparent.js";

const URI = "test://watched-resource";
const T = { timeout: 120_000 };

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("subscriptions/listen fanned in from a 2026-07-28 upstream", () => {
  let upstream: ModernReferenceServer;
  let gw: TestGateway;
  let face: string;
  /** Tools the upstream registers on every instance from now on. */
  const late = new Set<string>();
  const peers: Peer[] = [];

  before(async () => {
    upstream = await startModernReferenceServer({
      extend: (server) => {
        for (const name of late) server.registerTool(name, { description: "registered later" }, () => ({ content: [{ type: "text", text: name }] }));
      },
    });
    gw = await startInProcessGateway({ mcpServers: { ref: { url: upstream.url } } });
    face = `${new URL(gw.url).origin}/servers/ref/mcp`;
  });
  after(async () => {
    for (const p of peers) await p.close().catch(() => undefined);
    await gw?.close();
    await upstream?.close();
  });

  it("a 2025 client: the upstream's tools list change refreshes the gateway's list, and a subscribed resource's update arrives", T, async () => {
    const peer = await connectFace(face);
    peers.push(peer);
    const before = (await peer.client.listTools()).tools.map((t) => t.name);
    assert.ok(before.includes("test_simple_text") && !before.includes("late_tool"), before.join(","));
    // resources/subscribe reaches a modern upstream as the listen filter's resourceSubscriptions.
    await peer.client.subscribeResource({ uri: URI });
    assert.ok(
      upstream.listens.some((f) => (f as { resourceSubscriptions?: string[] }).resourceSubscriptions?.includes(URI)),
      JSON.stringify(upstream.listens),
    );
    late.add("late_tool");
    const heard = (method: string) => peer.notifications(method).length;
    // The upstream publishes until its stream delivers (the stream's registration on its bus is not observable from here).
    await until("tools/list_changed reaches the 2025 session", () => {
      upstream.notify.toolsChanged();
      return heard("notifications/tools/list_changed") > 0;
    });
    const after = (await peer.client.listTools()).tools.map((t) => t.name);
    assert.ok(after.includes("late_tool"), `the gateway refreshed its list: ${after.join(",")}`);
    await until("resources/updated reaches the 2025 session", () => {
      upstream.notify.resourceUpdated(URI);
      return heard("notifications/resources/updated") > 0;
    });
    assert.equal(peer.notifications("notifications/resources/updated")[0]?.uri, URI);
    assert.equal(peer.notifications("notifications/resources/updated")[0]?._meta, undefined, "the upstream's subscription id is not passed on");
  });

  it("a 2026-07-28 listener: the acknowledgement honors the upstream's URI, and its list changes and updates reach the stream", T, async () => {
    const stream = await openListen(face, { toolsListChanged: true, resourceSubscriptions: [URI] }, { id: "fan-in" });
    const ack = await stream.next((m) => m.method === "notifications/subscriptions/acknowledged", "the acknowledgement");
    assert.deepEqual(ack.params?.notifications, { toolsListChanged: true, resourceSubscriptions: [URI] });
    await until("resources/updated reaches the listen stream", () => {
      upstream.notify.resourceUpdated(URI);
      return stream.messages.some((m) => m.method === "notifications/resources/updated" && m.params?.uri === URI);
    });
    await until("tools/list_changed reaches the listen stream", () => {
      upstream.notify.toolsChanged();
      return stream.messages.some((m) => m.method === "notifications/tools/list_changed");
    });
    const updated = stream.messages.find((m) => m.method === "notifications/resources/updated")!;
    assert.equal(updated.params?._meta?.["io.modelcontextprotocol/subscriptionId"], "fan-in", "stamped with this stream's id, not the upstream's");
    stream.close();
  });

  it("a dropped upstream stream is reopened, and the lists are announced as changed (a change may have been missed)", T, async () => {
    const peer = await connectFace(face);
    peers.push(peer);
    await peer.client.subscribeResource({ uri: URI });
    const opened = upstream.listens.length;
    assert.ok(upstream.dropListens() >= 1);
    await until("the gateway reopens its streams", () => upstream.listens.length > opened && upstream.openListens() >= 1);
    await peer.waitFor(() => (peer.notifications("notifications/tools/list_changed").length > 0 ? true : undefined), "the recovery's tools/list_changed");
    const updates = () => peer.notifications("notifications/resources/updated").length;
    await until("resources/updated reaches the session again", () => {
      upstream.notify.resourceUpdated(URI);
      return updates() > 0;
    });
  });

  it("closing a session closes its upstream stream; closing the gateway closes every one", T, async () => {
    await until("the earlier sessions' streams are open", () => upstream.openListens() >= 2);
    const peer = await connectFace(face);
    await peer.client.subscribeResource({ uri: URI });
    const open = upstream.openListens();
    await peer.close();
    await until("the closed session's stream ends upstream", () => upstream.openListens() < open);
    await gw.close();
    await until("no stream stays open upstream", () => upstream.openListens() === 0);
  });
});

/** An UpstreamListen on `url` (real fetch, the gateway's headers and envelope) on a manual clock. */
function listenOn(url: string, clock: ManualClock) {
  const delivered: string[] = [];
  const listen = new UpstreamListen({
    name: "ref",
    clock,
    backoff: { initialDelayMs: 1_000, maxDelayMs: 8_000, jitter: 0 },
    deliver: (message) => delivered.push((message as { method: string }).method),
    post: (id, params, signal) => {
      const body = {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": MODERN,
          "io.modelcontextprotocol/clientCapabilities": { extensions: { [TASKS_EXTENSION]: {} } },
          "io.modelcontextprotocol/clientInfo": { name: "listen-unit", version: "1" },
        },
      };
      return fetch(url, {
        method: "POST",
        headers: modernHeaders(MODERN, "subscriptions/listen", body),
        body: JSON.stringify({ jsonrpc: "2.0", id, method: "subscriptions/listen", params: body }),
        signal,
      });
    },
  });
  return { listen, delivered };
}

describe("the upstream listen on an injected clock", () => {
  it("opens after its start delay, reopens a dropped stream after a doubling backoff, changes its filter, and leaves nothing when closed", T, async () => {
    const upstream = await startModernReferenceServer();
    try {
      const clock = new ManualClock();
      const { listen, delivered } = listenOn(upstream.url, clock);
      listen.start(listenCapabilities({ tools: { listChanged: true }, resources: { subscribe: true } }, TASKS_EXTENSION));
      assert.equal(upstream.listens.length, 0, "nothing opens before the start delay");
      clock.advance(1_000);
      await until("the stream is acknowledged", () => listen.acknowledged !== undefined);
      assert.deepEqual(upstream.listens, [{ toolsListChanged: true }]);
      for (const [attempt, delay] of [
        [1, 1_000],
        [2, 2_000],
      ] as const) {
        upstream.dropListens();
        await until(`drop ${attempt} is seen (its retry timer set)`, () => listen.acknowledged === undefined && clock.pendingTimers === 1);
        clock.advance(delay - 1);
        assert.equal(upstream.listens.length, attempt, `no reopen before ${delay} ms`);
        clock.advance(1);
        await until(`reopened after ${delay} ms`, () => listen.acknowledged !== undefined && upstream.openListens() === 1);
        assert.equal(upstream.listens.length, attempt + 1);
      }
      assert.deepEqual(delivered, ["notifications/tools/list_changed", "notifications/tools/list_changed"], "each recovery announces the list");
      assert.equal(await listen.subscribe("test://watched-resource"), true);
      assert.deepEqual(upstream.listens.at(-1), { toolsListChanged: true, resourceSubscriptions: ["test://watched-resource"] });
      await until("the old stream ends once the new one is acknowledged", () => upstream.openListens() === 1);
      listen.close();
      assert.equal(clock.pendingTimers, 0);
      await until("the stream ends upstream", () => upstream.openListens() === 0);
    } finally {
      await upstream.close();
    }
  });

  it("an upstream that answers subscriptions/listen -32601 is not asked again", T, async () => {
    const upstream = await startModernTasksServer();
    try {
      const clock = new ManualClock();
      const { listen } = listenOn(upstream.url, clock);
      listen.start(listenCapabilities({ tools: {}, extensions: { [TASKS_EXTENSION]: {} } }, TASKS_EXTENSION));
      listen.watchTask("task-1", () => undefined);
      await until("the refusal is seen", () => listen.unservedByUpstream);
      clock.advance(60_000);
      // A new need (here a URI) goes through the same step that would open a stream: it opens none.
      assert.equal(await listen.subscribe("test://any"), false);
      assert.deepEqual(
        upstream.methods.filter((m) => m === "subscriptions/listen"),
        ["subscriptions/listen"],
      );
      listen.close();
      assert.equal(clock.pendingTimers, 0);
    } finally {
      await upstream.close();
    }
  });

  it("a watched task's notifications/tasks reach its watcher (its id in the filter, the subscription id removed); an unwatched id is dropped", T, async () => {
    const upstream = await startListenTasksServer();
    try {
      const clock = new ManualClock();
      const { listen, delivered } = listenOn(upstream.url, clock);
      listen.start(listenCapabilities({ extensions: { [TASKS_EXTENSION]: {} } }, TASKS_EXTENSION));
      const heard: Array<Record<string, unknown>> = [];
      const unwatch = listen.watchTask("task-7", (task) => heard.push(task));
      listen.watchTask("task-8", (task) => heard.push(task));
      await until("the stream names both tasks", () => listen.acknowledged?.taskIds?.length === 2);
      assert.deepEqual(upstream.filters.at(-1), { taskIds: ["task-7", "task-8"] });
      assert.equal(upstream.publish({ taskId: "task-7", status: "completed", result: { content: [] } }), 1);
      await until("the watcher hears the task", () => heard.length === 1);
      assert.deepEqual(heard[0], { taskId: "task-7", status: "completed", result: { content: [] } });
      // Unwatched, task-7 stays in the filter; what comes for it is dropped (the next message on the same stream shows it was read).
      unwatch();
      upstream.publish({ taskId: "task-7", status: "completed" });
      upstream.publish({ taskId: "task-8", status: "working" });
      await until("task-8's status arrives", () => heard.some((t) => t.taskId === "task-8"));
      assert.deepEqual(
        heard.map((t) => t.taskId),
        ["task-7", "task-8"],
        "nothing more for the unwatched task",
      );
      assert.deepEqual(delivered, [], "notifications/tasks is no 2025 notification");
      listen.close();
      assert.equal(clock.pendingTimers, 0);
    } finally {
      await upstream.close();
    }
  });
});
