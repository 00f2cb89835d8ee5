/**
 * Session mode gets cheaper (docs/adr/0010): the warm pool starts a stdio
 * server's process ahead, a new session takes it (its first call does not
 * wait for a spawn) and the pool is filled again; the gateway-wide child cap
 * still holds (a waiting process gives its slot to a session); and idle
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
  test("a new session takes the process started ahead, and the pool is filled again", async () => {
    const { marker, config } = markedServer();
    const url = await start(config, { warmPool: 1 });
    const [warm] = await pollFor(async () => (pidsOf(marker).length === 1 ? pidsOf(marker) : undefined), "the warm process");
    assert.equal(await pid(await session(url)), warm);
    const refilled = await pollFor(async () => (pidsOf(marker).length === 2 ? pidsOf(marker) : undefined), "the pool filled again");
    const next = refilled.find((p) => p !== warm)!;
    assert.equal(await pid(await session(url)), next, "the second session takes the refilled process");
  });

  test("at the child-process cap a waiting process gives its slot to a session", async () => {
    const { marker, config } = markedServer();
    const url = await start(config, { warmPool: 1, maxChildProcesses: 2 });
    await pollFor(async () => (pidsOf(marker).length === 1 ? true : undefined), "the warm process");
    const a = await pid(await session(url)); // takes the warm one; the pool refills to the cap
    await pollFor(async () => (pidsOf(marker).length === 2 ? true : undefined), "the pool filled to the cap");
    const b = await pid(await session(url));
    assert.notEqual(a, b);
    const running = await pollFor(async () => (pidsOf(marker).length === 2 ? pidsOf(marker) : undefined), "two processes");
    assert.deepEqual(running.sort(), [a, b].sort(), "the two sessions' processes, no waiting one beyond the cap");
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
    const slow = (await client.callTool({ name: "slow", arguments: { ms: 1_000 } })) as CallToolResult;
    assert.equal((slow.content[0] as { text: string }).text, "slept 1000ms");
    assert.equal(await pid(client), first, "the call kept it");
    await client.subscribeResource({ uri: "fixture://a" });
    await new Promise((r) => setTimeout(r, 1_000));
    assert.ok(processAlive(first), "the subscription keeps it");
    assert.equal(await pid(client), first);
  });
});
