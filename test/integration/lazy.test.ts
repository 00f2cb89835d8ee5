/**
 * Lazy upstreams and one-shot session expiry, against three real
 * server-everything processes (each tagged with a marker on its command line,
 * so they are counted in /proc): a session starts no upstream; list_servers
 * shows `not_connected` without connecting; the first call that needs a
 * server starts that one only; `upstream.eagerConnect` brings back the
 * connect-everything-at-start design. One-shot clients (initialize + one
 * list_servers, closed without DELETE) leave no process and their sessions
 * expire after `sessions.oneShotIdleMs`, while a client that is still there
 * keeps its session.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { everythingServerEntry } from "../../src/config/demo.js";
import { block, call, connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";

const SERVERS = ["alpha", "beta", "gamma"] as const;
/** These tests count each session's processes: no warm pool beside them (it has its own test: warm-pool.test.ts). */
const NO_WARM = { warmPool: 0 };
const markers: string[] = [];

/** Three server-everything upstreams; each process's command line carries `<marker>-<name>`. */
function threeServers(marker: string) {
  markers.push(marker);
  return Object.fromEntries(SERVERS.map((name) => [name, { command: process.execPath, args: [everythingServerEntry(), "stdio", `${marker}-${name}`] }]));
}

after(async () => {
  // Whatever a failed test left running.
  for (const pid of markers.flatMap((m) => processesWith(m))) process.kill(pid, "SIGKILL");
});

function sessionIdOf(client: Client): string {
  return (client.transport as StreamableHTTPClientTransport).sessionId!;
}

async function statuses(client: Client): Promise<Record<string, string>> {
  const servers = block<Array<{ name: string; status: string }>>(await call(client, "list_servers"), "servers") ?? [];
  return Object.fromEntries(servers.map((s) => [s.name, s.status]));
}

/** Polls `check` until it holds (bounded; never a fixed sleep standing in for an assertion). */
async function eventually(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("lazy upstreams", { timeout: 300_000 }, () => {
  test("a session starts no upstream; list_servers does not connect; the first use starts that server only", async (t) => {
    const marker = newMarker();
    const gw = await startGateway({ mcpServers: threeServers(marker), gateway: { upstream: NO_WARM } });
    t.after(() => gw.close());
    const client = await connectClient(gw.url);
    t.after(() => client.close());

    assert.deepEqual(await statuses(client), { alpha: "not_connected", beta: "not_connected", gamma: "not_connected" });
    assert.deepEqual(processesWith(marker), [], "listing servers spawns nothing");

    const echoed = await call(client, "execute_tool", { server: "beta", tool: "echo", args: { message: "hi" } });
    assert.notEqual(echoed.isError, true, JSON.stringify(echoed.content));
    assert.deepEqual(await statuses(client), { alpha: "not_connected", beta: "connected", gamma: "not_connected" });
    assert.equal(processesWith(`${marker}-beta`).length, 1, "beta runs");
    assert.equal(processesWith(marker).length, 1, "and nothing else");

    // list_tools without `server` needs every server: that is use.
    const listed = await call(client, "list_tools", { name_contains: "echo" });
    assert.notEqual(listed.isError, true, JSON.stringify(listed.content));
    assert.deepEqual(await statuses(client), { alpha: "connected", beta: "connected", gamma: "connected" });
    assert.equal(processesWith(marker).length, 3);

    // A transparent single-server session answers initialize from what gamma answered before (ADR 0034), and its
    // first request starts its own server, no other.
    const single = await connectClient(gw.url.replace(/\/mcp$/, "/servers/gamma/mcp"));
    t.after(() => single.close());
    assert.equal(processesWith(`${marker}-gamma`).length, 1, "initialize started nothing");
    await single.listTools();
    assert.equal(processesWith(`${marker}-gamma`).length, 2, "gamma for each session");
    assert.equal(processesWith(marker).length, 4);

    await gw.close();
    assert.deepEqual(await waitForNoProcesses(marker), []);
  });

  test("upstream.eagerConnect: true connects every server when a meta session starts (the previous design)", async (t) => {
    const marker = newMarker();
    const gw = await startGateway({ mcpServers: threeServers(marker), gateway: { upstream: { ...NO_WARM, eagerConnect: true } } });
    t.after(() => gw.close());
    const client = await connectClient(gw.url);
    t.after(() => client.close());
    await eventually("all three connected without any call using them", () => processesWith(marker).length === 3);
    await gw.close();
    assert.deepEqual(await waitForNoProcesses(marker), []);
  });
});

describe("one-shot sessions", { timeout: 300_000 }, () => {
  let gw: TestGateway | undefined;
  after(() => gw?.close());

  test("three one-shot clients leave no upstream process and their sessions expire after oneShotIdleMs; a client still there keeps its session", async () => {
    const marker = newMarker();
    // Bounds a loaded machine keeps: a one-shot client's whole exchange takes well under firstExchangeMs, and the three
    // one-shot clients are done well within oneShotIdleMs of the first.
    const firstExchangeMs = 5_000;
    gw = await startGateway({
      mcpServers: threeServers(marker),
      gateway: { sessions: { firstExchangeMs, oneShotIdleMs: 15_000, sweepIntervalMs: 100 } },
    });
    const sessions = gw.gateway.context.sessions;

    // A client that stays: connected (its GET stream open) and back after its first exchange.
    const staying = await connectClient(gw.url, { name: "staying" });
    const createdAt = sessions.get(sessionIdOf(staying))!.createdAt;
    await eventually("the staying session's first exchange is over", () => Date.now() - createdAt > firstExchangeMs + 100, 60_000);
    await call(staying, "list_servers");
    assert.equal(sessions.isEstablished(sessionIdOf(staying)), true, "a request after firstExchangeMs: established");

    // inspector-cli style: initialize, one list_servers, close the connection, never DELETE.
    const oneShotIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const client = await connectClient(gw.url, { name: `one-shot-${i}` });
      const servers = block<Array<{ status: string }>>(await call(client, "list_servers"), "servers") ?? [];
      assert.deepEqual(
        servers.map((s) => s.status),
        ["not_connected", "not_connected", "not_connected"],
      );
      oneShotIds.push(sessionIdOf(client));
      await client.close();
    }
    assert.equal(sessions.size, 4, "no DELETE: the sessions are still there");
    assert.deepEqual(processesWith(marker), [], "and they started no upstream process");

    await eventually("the one-shot sessions expired", () => oneShotIds.every((id) => sessions.get(id) === undefined), 90_000);
    assert.ok(sessions.get(sessionIdOf(staying)), "the staying client's session is kept");
    assert.equal(sessions.size, 1);
    const again = await call(staying, "list_servers");
    assert.notEqual(again.isError, true);
    assert.deepEqual(processesWith(marker), []);
    await staying.close();
  });
});
