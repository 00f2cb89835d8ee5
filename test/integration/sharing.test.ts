/**
 * Shared upstreams (docs/adr/0010): two sessions, one shared connection —
 * for stdio one process — and each session still sees only its own: its
 * logs at its own level, updates of its own subscriptions (the upstream
 * subscription reference-counted), its own progress, and the elicitations
 * its own calls cause. An elicitation that cannot be attributed (calls of two
 * sessions in flight on a stdio process) is refused: the upstream gets the
 * error, neither session sees it. On Streamable HTTP the request's stream
 * attributes it even then. A crash fails every session's call with the
 * reason and one new process serves them all again.
 * (The transparent, meta, tasks and reliability suites also run with every
 * upstream shared: npm run test:shared.)
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type CallToolResult,
  type ElicitRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { everythingStdio, slowServerStdio, startGateway, type TestGateway } from "../helpers/gateway.js";
import { parseConfig } from "../../src/config/load.js";
import { pollFor, processAlive, startEverythingHttp, type ChildServer } from "../helpers/core-extra.js";

interface Peer {
  client: Client;
  elicitations: ElicitRequest["params"][];
  logs: string[];
  updates: string[];
}

async function peer(url: string, name: string): Promise<Peer> {
  const client = new Client({ name, version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
  const p: Peer = { client, elicitations: [], logs: [], updates: [] };
  client.setRequestHandler(ElicitRequestSchema, (req) => {
    p.elicitations.push(req.params);
    return { action: "accept", content: { answer: `${name}-${p.elicitations.length}` } };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void p.logs.push(String(n.params.data)));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void p.updates.push(n.params.uri));
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return p;
}

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;
const callTool = (p: Peer, name: string, args: Record<string, unknown> = {}) =>
  p.client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 }) as Promise<CallToolResult>;

/** Starts a `slow` call and resolves once the upstream runs it (its first progress), with the call's outcome as text. */
async function slowRunning(p: Peer, ms: number): Promise<{ done: Promise<string> }> {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const done = p.client.callTool({ name: "slow", arguments: { ms } }, undefined, { timeout: 60_000, onprogress: () => started() }).then(
    (r) => text(r),
    (err: unknown) => String(err),
  );
  await running;
  return { done };
}

describe("a shared stdio upstream", () => {
  let gw: TestGateway;
  let url: string;
  const peers: Peer[] = [];
  const open = async (name: string) => {
    const p = await peer(url, name);
    peers.push(p);
    return p;
  };

  before(async () => {
    gw = await startGateway({ mcpServers: { slow: { ...slowServerStdio(), sharing: "shared" }, everything: { ...everythingStdio(), sharing: "shared" } } });
    url = gw.url.replace(/\/mcp$/, "/servers/slow/mcp");
  });
  after(async () => {
    await Promise.allSettled(peers.map((p) => p.client.close()));
    await gw.close();
  });

  test("one process serves every session", async () => {
    const [a, b] = [await open("a"), await open("b")];
    const [pa, pb] = [text(await callTool(a, "pid")), text(await callTool(b, "pid"))];
    assert.equal(pa, pb);
  });

  test("each session gets log messages at its own level; the upstream runs at the most verbose", async () => {
    const [a, b] = [await open("a"), await open("b")];
    await a.client.setLoggingLevel("error");
    await b.client.setLoggingLevel("info");
    await callTool(a, "log-levels");
    // Log messages travel on each session's own stream, not with the call's result: wait for both.
    await pollFor(async () => (b.logs.length >= 3 && a.logs.length >= 1 ? true : undefined), "a's and b's logs");
    assert.deepEqual(b.logs, ["info message", "warning message", "error message"]);
    assert.deepEqual(a.logs, ["error message"]);
  });

  test("resources/updated reaches only the subscribed sessions; the upstream subscription is counted", async () => {
    const [a, b] = [await open("a"), await open("b")];
    const upstreamSubs = async () => JSON.parse(text(await callTool(a, "subscriptions"))) as string[];
    await a.client.subscribeResource({ uri: "fixture://a" });
    await b.client.subscribeResource({ uri: "fixture://b" });
    assert.deepEqual(await upstreamSubs(), ["fixture://a", "fixture://b"]);
    await callTool(b, "notify-updated", { uri: "fixture://a" });
    await callTool(b, "notify-updated", { uri: "fixture://b" });
    await pollFor(async () => (a.updates.length && b.updates.length ? true : undefined), "updates");
    assert.deepEqual(a.updates, ["fixture://a"]);
    assert.deepEqual(b.updates, ["fixture://b"]);

    await b.client.subscribeResource({ uri: "fixture://a" });
    await a.client.unsubscribeResource({ uri: "fixture://a" });
    assert.deepEqual(await upstreamSubs(), ["fixture://a", "fixture://b"], "b still holds fixture://a");
    await b.client.unsubscribeResource({ uri: "fixture://a" });
    assert.deepEqual(await upstreamSubs(), ["fixture://b"]);
    // A session that goes away gives its subscriptions back.
    await (b.client.transport as StreamableHTTPClientTransport).terminateSession();
    await pollFor(async () => ((await upstreamSubs()).length === 0 ? true : undefined), "b's subscription released");
  });

  test("each session gets the progress of its own calls only, while both run at once", async () => {
    const everything = url.replace("/servers/slow/mcp", "/servers/everything/mcp");
    const [a, b] = [await peer(everything, "a"), await peer(everything, "b")];
    peers.push(a, b);
    const progressOf = async (p: Peer, steps: number) => {
      const seen: number[] = [];
      await p.client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 1, steps } }, undefined, {
        timeout: 60_000,
        onprogress: (n) => void seen.push(n.progress),
      });
      return seen;
    };
    const [pa, pb] = await Promise.all([progressOf(a, 3), progressOf(b, 5)]);
    assert.deepEqual(pa, [1, 2, 3]);
    assert.deepEqual(pb, [1, 2, 3, 4, 5]);
  });

  test("an elicitation reaches the session whose call caused it, and only that one", async () => {
    const [a, b] = [await open("a"), await open("b")];
    assert.equal(text(await callTool(a, "elicit-twice")), "a-1,a-2");
    assert.equal(a.elicitations.length, 2);
    assert.equal(b.elicitations.length, 0);
  });

  test("with calls of two sessions in flight, the unattributable elicitation is refused and neither session sees it", async () => {
    const [a, b] = [await open("a"), await open("b")];
    // Long enough to be still in flight when b's call reaches the upstream on a loaded machine.
    const slow = await slowRunning(a, 20_000);
    const refused = await callTool(b, "elicit-twice");
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.match(text(refused), /EMCP_UNATTRIBUTABLE/);
    assert.match(text(refused), /"sharing": "session"/);
    assert.equal(await slow.done, "slept 20000ms");
    assert.equal(a.elicitations.length + b.elicitations.length, 0);
  });

  test("a crash fails every session's call with the reason; one new process serves them all", async () => {
    const [a, b, c] = [await open("a"), await open("b"), await open("c")];
    const before = text(await callTool(a, "pid"));
    const calls = await Promise.all([a, b].map((p) => slowRunning(p, 20_000)));
    await callTool(c, "crash").catch(() => undefined);
    for (const why of await Promise.all(calls.map((c) => c.done))) assert.match(why, /closed|disconnected/i, why);
    const pids = await pollFor(async () => {
      const got = await Promise.all([a, b, c].map((p) => callTool(p, "pid").then(text, () => undefined)));
      return got.every((p) => p !== undefined) ? got : undefined;
    }, "all three sessions served again");
    assert.equal(new Set(pids).size, 1, `one process: ${pids.join(",")}`);
    assert.notEqual(pids[0], before);
  });
});

describe("a shared upstream's life follows its config", () => {
  test("a reload that changes only `sharing` updates the server; one that drops it ends its process, with no session attached", async () => {
    const slow = { ...slowServerStdio(), sharing: "shared" };
    const gw = await startGateway({ mcpServers: { slow } });
    try {
      const url = gw.url.replace(/\/mcp$/, "/servers/slow/mcp");
      const p = await peer(url, "a");
      const pid = Number(text(await callTool(p, "pid")));
      await (p.client.transport as StreamableHTTPClientTransport).terminateSession();
      await p.client.close();
      assert.ok(processAlive(pid), "a shared connection outlives its sessions while its server is configured");

      const asSession = parseConfig({ mcpServers: { slow: { ...slow, sharing: "session" } } });
      const report = await gw.gateway.reload(asSession);
      assert.deepEqual(report.updated, ["slow"], "a change of sharing mode is a change of the server");
      await pollFor(async () => (processAlive(pid) ? undefined : true), "the shared process ended with its config");

      const q = await peer(url, "b");
      const own = Number(text(await callTool(q, "pid")));
      assert.notEqual(own, pid);
      await q.client.close();
      await gw.gateway.reload(parseConfig({ mcpServers: {} }));
    } finally {
      await gw.close();
    }
  });

  test("removing a shared server ends its process even when no session uses it any more", async () => {
    const gw = await startGateway({ mcpServers: { slow: { ...slowServerStdio(), sharing: "shared" } } });
    try {
      const p = await peer(gw.url.replace(/\/mcp$/, "/servers/slow/mcp"), "a");
      const pid = Number(text(await callTool(p, "pid")));
      await (p.client.transport as StreamableHTTPClientTransport).terminateSession();
      await p.client.close();
      const report = await gw.gateway.reload(parseConfig({ mcpServers: {} }));
      assert.deepEqual(report.removed, ["slow"]);
      await pollFor(async () => (processAlive(pid) ? undefined : true), "the removed server's process ended");
    } finally {
      await gw.close();
    }
  });
});

describe("a shared Streamable HTTP upstream", () => {
  let upstream: ChildServer;
  let gw: TestGateway;
  const peers: Peer[] = [];

  before(async () => {
    upstream = await startEverythingHttp();
    gw = await startGateway({ mcpServers: { everything: { url: upstream.url, sharing: "shared" } } });
  });
  after(async () => {
    await Promise.allSettled(peers.map((p) => p.client.close()));
    await gw.close();
    await upstream.close();
  });

  test("attributes each elicitation by its request's stream, even with calls of several sessions in flight", async () => {
    const url = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    const [a, b] = [await peer(url, "a"), await peer(url, "b")];
    peers.push(a, b);
    // a's call is in flight upstream (its first progress came) and stays so while b's elicitation runs.
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const long = a.client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 10, steps: 10 } }, undefined, {
      timeout: 60_000,
      onprogress: () => started(),
    });
    await running;
    const asked = await callTool(b, "trigger-elicitation-request");
    assert.notEqual(asked.isError, true, JSON.stringify(asked));
    await long;
    assert.equal(b.elicitations.length, 1);
    assert.equal(a.elicitations.length, 0);
  });
});
