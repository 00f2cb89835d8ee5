/**
 * Session mode gets cheaper (docs/adr/0010): once a stdio server is used,
 * the warm pool keeps a process of it started ahead, a new session takes it
 * (its first call does not wait for a spawn) and the pool is filled again;
 * the gateway-wide child cap still holds (a waiting process gives its slot
 * to a session); and idle
 * release ends a session's process that nothing uses, reconnecting on the
 * next call — never while a call runs or a subscription is held.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { slowServerStdio, startGateway, type TestGateway } from "../helpers/gateway.js";
import { parseConfig } from "../../src/config/load.js";
import { pollFor, processAlive } from "../helpers/core-extra.js";

/** The slow-server fixture with a marker argument, so this test finds exactly its own processes. */
function markedServer() {
  const marker = `warm-${randomUUID()}`;
  const base = slowServerStdio();
  return { marker, config: { ...base, args: [...base.args, marker], sharing: "session" } };
}

function pidsOf(marker: string): number[] {
  try {
    return execFileSync("pgrep", ["-f", marker], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map(Number)
      .filter((pid) => pid !== process.pid);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** Bound for a process to be started (a spawn through tsx takes seconds on a loaded machine). */
const SPAWN_MS = 90_000;

const gateways: TestGateway[] = [];
const clients: Client[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
});

async function start(config: object, upstream: Record<string, unknown>): Promise<string> {
  const gw = await startGateway({ mcpServers: { slow: config }, gateway: { upstream } });
  gateways.push(gw);
  return gw.url.replace(/\/mcp$/, "/servers/slow/mcp");
}

async function session(url: string): Promise<Client> {
  const client = new Client({ name: "warm-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  clients.push(client);
  return client;
}

async function pid(client: Client): Promise<number> {
  const r = (await client.callTool({ name: "pid", arguments: {} })) as CallToolResult;
  return Number((r.content[0] as { text: string }).text);
}

describe("the warm pool", () => {
  test("once a server is used, a process waits ready; a new session takes it, and the pool is filled again", async () => {
    const { marker, config } = markedServer();
    const url = await start(config, { warmPool: 1 });
    assert.deepEqual(pidsOf(marker), [], "nothing starts before a session uses the server");
    const first = await pid(await session(url));
    const waiting = await pollFor(
      async () => {
        const others = pidsOf(marker).filter((p) => p !== first);
        return others.length === 1 ? others[0] : undefined;
      },
      "the warm process",
      SPAWN_MS,
    );
    assert.equal(await pid(await session(url)), waiting, "the second session takes the waiting process");
    await pollFor(async () => (pidsOf(marker).length === 3 ? true : undefined), "the pool filled again", SPAWN_MS);
  });

  test("at the child-process cap the waiting process goes to the session (the cap holds)", async () => {
    const { marker, config } = markedServer();
    const url = await start(config, { warmPool: 1, maxChildProcesses: 2 });
    const a = await pid(await session(url));
    const waiting = await pollFor(
      async () => {
        const others = pidsOf(marker).filter((p) => p !== a);
        return others.length === 1 ? others[0] : undefined;
      },
      "the pool filled to the cap",
      SPAWN_MS,
    );
    assert.equal(await pid(await session(url)), waiting, "lent: the waiting process, not a new one beyond the cap");
    // An observation window, not a precondition: the refill at the cap (a setImmediate after the lend) has run; a process it
    // started would show up in it.
    await new Promise((r) => setTimeout(r, 1_000));
    assert.deepEqual(pidsOf(marker).sort(), [a, waiting].sort(), "two processes: the cap holds, nothing waits beyond it");
  });
});

describe("the warm pool and config changes", () => {
  test("a waiting process of a server that is removed ends", async () => {
    const { marker, config } = markedServer();
    const gw = await startGateway({ mcpServers: { slow: config }, gateway: { upstream: { warmPool: 1 } } });
    gateways.push(gw);
    const client = await session(gw.url.replace(/\/mcp$/, "/servers/slow/mcp"));
    const first = await pid(client);
    await pollFor(async () => (pidsOf(marker).length === 2 ? true : undefined), "the warm process", SPAWN_MS);
    await (client.transport as StreamableHTTPClientTransport).terminateSession();
    await gw.gateway.reload(parseConfig({ mcpServers: {} }));
    await pollFor(async () => (pidsOf(marker).length === 0 ? true : undefined), "no process of the removed server");
    // Gone from the process list (its command line) can come before it is reaped: a zombie still answers kill(pid, 0).
    await pollFor(async () => (processAlive(first) ? undefined : true), "the session's own process reaped");
  });
});

describe("idle release", () => {
  test("a session's unused process ends, and the next call starts a new one", async () => {
    const { config } = markedServer();
    const url = await start(config, { warmPool: 0, idleReleaseMs: 400 });
    const client = await session(url);
    const first = await pid(client);
    await pollFor(async () => (processAlive(first) ? undefined : true), "the idle process ended");
    const second = await pid(client);
    assert.notEqual(second, first);
  });

  test("never while a call runs or a subscription is held", async () => {
    const { config } = markedServer();
    const url = await start(config, { warmPool: 0, idleReleaseMs: 300 });
    const client = await session(url);
    const first = await pid(client);
    // A call many times as long as idle release: the process stays alive all through it (sampled while it runs, so a
    // slow machine's gap between the call's end and the next request cannot decide the outcome). The subscription is
    // taken while the call still runs, after the call alone has held the process for a second (over three idle periods):
    // taken after the call, a loaded machine's gap let idle release end the process first.
    let done = false;
    const slow = (client.callTool({ name: "slow", arguments: { ms: 5_000 } }) as Promise<CallToolResult>).finally(() => (done = true));
    const callStart = Date.now();
    let diedDuringCall = false;
    let subscribed: Promise<unknown> | undefined;
    while (!done) {
      if (!processAlive(first)) diedDuringCall = true;
      if (!subscribed && Date.now() - callStart >= 1_000 && !diedDuringCall) subscribed = client.subscribeResource({ uri: "fixture://a" });
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(((await slow).content[0] as { text: string }).text, "slept 5000ms");
    assert.equal(diedDuringCall, false, "the call kept it");
    assert.ok(subscribed, "subscribed while the call ran");
    await subscribed;
    // A session used after the subscription, holding nothing: once its process is released, idle release has had its turn
    // for the subscribed one too.
    const control = await session(url);
    const other = await pid(control);
    await pollFor(async () => (processAlive(other) ? undefined : true), "the idle process of the session that holds nothing ended");
    assert.ok(processAlive(first), "the subscription keeps it");
    assert.equal(await pid(client), first);
  });
});
