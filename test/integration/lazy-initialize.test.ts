/**
 * A transparent session's initialize does not wait for an upstream process
 * (docs/adr/0034, issue 27): once the gateway has heard a server answer, a new
 * /servers/<name>/mcp session is answered from that (same serverInfo,
 * capabilities, instructions) and its process starts on first use; sessions
 * opened together before that answer wait for the first one's connect (and
 * the aggregate and virtual faces, whose capabilities are the gateway's own,
 * connect at their first list); an
 * upstream that cannot start then fails that first call with the gateway's
 * error, promptly. Real stdio processes, counted by a marker argument.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { slowServerStdio, startGateway, type TestGateway } from "../helpers/gateway.js";

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
const markers: string[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
  for (const m of markers) fs.rmSync(m, { recursive: true, force: true });
});

async function faceUrl(config: object, transparent: Record<string, unknown> = {}): Promise<string> {
  // No warm pool: every process counted here is a session's own.
  const gw = await startGateway({ mcpServers: { slow: config }, gateway: { upstream: { warmPool: 0, connectTimeoutMs: 120_000 }, transparent } });
  gateways.push(gw);
  return gw.url.replace(/\/mcp$/, "/servers/slow/mcp");
}

async function session(url: string): Promise<Client> {
  const client = new Client({ name: "lazy-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  clients.push(client);
  return client;
}

async function pid(client: Client): Promise<number> {
  const r = (await client.callTool({ name: "pid", arguments: {} })) as CallToolResult;
  return Number((r.content[0] as { text: string }).text);
}

function marked(): { marker: string; config: object } {
  const marker = `lazy-${randomUUID()}`;
  const base = slowServerStdio();
  return { marker, config: { ...base, args: [...base.args, marker], sharing: "session" } };
}

describe("lazy initialize on /servers/<name>/mcp", () => {
  test("a new session is answered from what the upstream answered before, starts no process, and starts one on first use", async () => {
    const { marker, config } = marked();
    const url = await faceUrl(config);
    const first = await session(url);
    assert.equal(pidsOf(marker).length, 1, "the first session (nothing known yet) connects at initialize");
    const second = await session(url);
    // An initialize that connected would have started the process before answering.
    assert.equal(pidsOf(marker).length, 1, "the second session's initialize started no process");
    assert.deepEqual(second.getServerVersion(), first.getServerVersion());
    assert.deepEqual(second.getServerCapabilities(), first.getServerCapabilities());
    assert.equal(second.getInstructions(), first.getInstructions());
    const [a, b] = [await pid(first), await pid(second)];
    assert.notEqual(a, b, "the first call started the session's own process");
    assert.equal(pidsOf(marker).length, 2);
    assert.ok((await second.listTools()).tools.some((t) => t.name === "pid"));
  });

  test("sessions opened together before the upstream first answered wait for one connect: one process, not one each", async () => {
    const { marker, config } = marked();
    const url = await faceUrl(config);
    const opened = await Promise.all(Array.from({ length: 5 }, () => session(url)));
    assert.equal(pidsOf(marker).length, 1, "only the first session's initialize started a process");
    for (const s of opened) assert.deepEqual(s.getServerCapabilities(), opened[0]!.getServerCapabilities());
    const pids = await Promise.all(opened.map(pid));
    assert.equal(new Set(pids).size, 5, "each session still gets its own process, on first use");
  });

  test("/all/mcp and /v/<name>/mcp: initialize connects nothing (the face's capabilities are the gateway's own); the first list does", async () => {
    const { marker, config } = marked();
    const gw = await startGateway({
      mcpServers: { slow: config },
      gateway: {
        upstream: { warmPool: 0, connectTimeoutMs: 120_000 },
        transparent: { aggregateWaitMs: 120_000 },
        governance: { virtualServers: [{ name: "picked", tools: [{ server: "slow", tool: "pid" }] }] },
      },
    });
    gateways.push(gw);
    const all = await Promise.all(Array.from({ length: 3 }, () => session(gw.url.replace(/\/mcp$/, "/all/mcp"))));
    const virtual = await session(gw.url.replace(/\/mcp$/, "/v/picked/mcp"));
    assert.equal(pidsOf(marker).length, 0, "no session's initialize started a process");
    assert.ok(
      (await all[0]!.listTools()).tools.some((t) => t.name === "slow__pid"),
      "the first list reached the upstream",
    );
    assert.equal(pidsOf(marker).length, 1, "that session's own process");
    assert.deepEqual(
      (await virtual.listTools()).tools.map((t) => t.name),
      ["pid"],
    );
    assert.equal(pidsOf(marker).length, 2);
  });

  test("transparent.lazyInitialize: false connects at initialize, as before", async () => {
    const { marker, config } = marked();
    const url = await faceUrl(config, { lazyInitialize: false });
    await session(url);
    await session(url);
    assert.equal(pidsOf(marker).length, 2, "each initialize started its process");
  });

  test("an upstream that no longer starts fails the session's first call with EMCP_UPSTREAM_UNAVAILABLE, not a hang", async () => {
    const flag = path.join(os.tmpdir(), `emceepee-lazy-${process.pid}-${randomUUID()}`);
    markers.push(flag);
    const base = slowServerStdio();
    // Starts once as the slow-server fixture; every later start exits at once.
    const config = {
      command: "/bin/sh",
      args: [
        "-c",
        'if ! mkdir "$1" 2>/dev/null; then echo "lazy: refusing to start twice" >&2; exit 3; fi; shift; exec "$@"',
        "lazy",
        flag,
        base.command,
        ...base.args,
      ],
      cwd: base.cwd,
      sharing: "session",
    };
    const url = await faceUrl(config);
    await session(url);
    const second = await session(url); // answered from what the first connection learned
    const started = Date.now();
    await assert.rejects(
      second.callTool({ name: "pid", arguments: {} }),
      (err: Error) => /EMCP_UPSTREAM_UNAVAILABLE|unavailable/.test(err.message) && /refusing to start twice|exit/i.test(err.message),
    );
    // The connect timeout is 120 s here: failing well inside it means the exit was noticed, not waited out.
    assert.ok(Date.now() - started < 60_000, `failed after ${Date.now() - started} ms`);
  });
});
