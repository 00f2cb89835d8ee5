/**
 * Connections made ahead (docs/adr/0044): the warm pool initializes a waiting
 * server-everything (stdio, session mode) with the capabilities of the last
 * session that took one and fetches its tool list, so a new session's first
 * call is the call alone; a session with other capabilities (roots) never gets
 * it; what the upstream asks before the take waits for the taking session; a
 * waiting connection whose process dies is dropped; closing the gateway ends
 * the waiting ones. Every message the gateway sends an upstream is recorded
 * (per transport, in one sequence), so the tests assert order, not time.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema, type CallToolResult, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { call, everythingStdio, fixtureArgs, startGateway, type TestGateway } from "../helpers/gateway.js";
import { pollFor, processAlive } from "../helpers/core-extra.js";
import { logLines } from "../helpers/log-lines.js";
import { defaultTransportFactory } from "../../src/upstream/transports.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";

/** Bound for a spawn and initialize of server-everything on a loaded machine. */
const READY_MS = 120_000;

/** One message the gateway sent an upstream: which transport (in creation order), its method, the message. */
interface Sent {
  transport: number;
  method: string | undefined;
  message: JSONRPCMessage;
}

interface Recorded {
  gw: TestGateway;
  sent: Sent[];
  /** Process ids of each transport, by index (once spawned). */
  pids: Array<() => number | null>;
  /** Gateway log lines with this msg. */
  logged(msg: string): Array<Record<string, unknown>>;
}

const gateways: TestGateway[] = [];
const clients: Client[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
});

/** A gateway with `everything` (stdio, session mode) whose upstream messages are recorded. */
async function recordedGateway(upstream: Record<string, unknown> = {}): Promise<Recorded> {
  const sent: Sent[] = [];
  const pids: Array<() => number | null> = [];
  const recording: TransportFactory = (name, config, options) => {
    const created = defaultTransportFactory(name, config, options);
    const index = pids.length;
    pids.push(() => created.pid?.() ?? null);
    const send = created.transport.send.bind(created.transport);
    created.transport.send = (message, o) => {
      sent.push({ transport: index, method: "method" in message ? message.method : undefined, message });
      return send(message, o);
    };
    return created;
  };
  const { logger, lines } = logLines();
  const gw = await startGateway(
    { mcpServers: { everything: { ...everythingStdio(), sharing: "session" } }, gateway: { upstream: { warmPool: 1, ...upstream } } },
    { transportFactory: recording, logger },
  );
  gateways.push(gw);
  return { gw, sent, pids, logged: (msg) => lines.filter((l) => l.msg === msg) };
}

/** A session on `url`; with `roots`, it declares roots and answers roots/list with them. */
async function session(url: string, roots?: string[]): Promise<Client> {
  const client = new Client({ name: "warm-connect-test", version: "1.0.0" }, roots ? { capabilities: { roots: { listChanged: true } } } : {});
  if (roots) client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: roots.map((uri) => ({ uri, name: uri })) }));
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  clients.push(client);
  return client;
}

function transparent(gw: TestGateway): string {
  return gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
}

/** The transport whose tools/call carried `marker` in its arguments. */
function transportOfCall(sent: Sent[], marker: string): number {
  const hit = sent.find((s) => s.method === "tools/call" && JSON.stringify(s.message).includes(marker));
  assert.ok(hit, `a tools/call with ${marker} was sent upstream`);
  return hit.transport;
}

/** Index in `sent` of transport `t`'s initialize. */
function initializeAt(sent: Sent[], t: number): number {
  return sent.findIndex((s) => s.transport === t && s.method === "initialize");
}

/** The capabilities transport `t` declared in its initialize. */
function declared(sent: Sent[], t: number): Record<string, unknown> {
  const init = sent[initializeAt(sent, t)]!.message as unknown as { params: { capabilities: Record<string, unknown> } };
  return init.params.capabilities;
}

/** Waits until `n` connections made ahead have fetched their tool list. */
function readyCount(r: Recorded, n: number): Promise<true> {
  return pollFor(async () => (r.logged("warm_connection_ready").length >= n ? true : undefined), `${n} connection(s) made ahead`, READY_MS);
}

describe("connections made ahead (warm pool)", () => {
  test("a new meta session's first execute_tool runs on a connection initialized before the session opened: the call alone goes upstream", async () => {
    const r = await recordedGateway();
    const a = await session(r.gw.url);
    await call(a, "execute_tool", { server: "everything", tool: "echo", args: { message: "a" } });
    await readyCount(r, 1);
    const opened = r.sent.length; // everything sent upstream before the new session exists
    const b = await session(r.gw.url);
    const marker = `b-${randomUUID()}`;
    const result = await call(b, "execute_tool", { server: "everything", tool: "echo", args: { message: marker } });
    assert.ok(JSON.stringify(result).includes(marker), "the echo answered");
    const t = transportOfCall(r.sent, marker);
    assert.ok(initializeAt(r.sent, t) >= 0 && initializeAt(r.sent, t) < opened, "its upstream initialize was sent before the session opened");
    const afterOpen = r.sent.slice(opened).filter((s) => s.transport === t);
    assert.deepEqual(
      afterOpen.map((s) => s.method),
      ["tools/call"],
      "after the session opened, its connection sent the call only (no initialize, no tools/list)",
    );
    assert.equal(declared(r.sent, t).roots, undefined, "no roots declared: the sessions declared none");
  });

  test("roots: a connection made ahead goes only to a session with the same capabilities, and what the upstream asked before the take reaches that session", async () => {
    const r = await recordedGateway();
    const url = transparent(r.gw);
    const a = await session(url, ["file:///a"]);
    await a.callTool({ name: "echo", arguments: { message: "a" } });
    await readyCount(r, 1);

    // Same capabilities (roots): takes the connection made ahead, and its roots are the ones the upstream knows.
    let opened = r.sent.length;
    const cRoot = `file:///c-${randomUUID()}`;
    const c = await session(url, [cRoot]);
    const cMarker = `c-${randomUUID()}`;
    await c.callTool({ name: "echo", arguments: { message: cMarker } });
    const tc = transportOfCall(r.sent, cMarker);
    assert.ok(initializeAt(r.sent, tc) < opened, "initialized before the session opened");
    assert.ok(declared(r.sent, tc).roots, "declared roots, as the session does");
    const rootsText = JSON.stringify(((await c.callTool({ name: "get-roots-list", arguments: {} })) as CallToolResult).content);
    assert.ok(rootsText.includes(cRoot), `the upstream has the taking session's roots: ${rootsText}`);
    assert.ok(!rootsText.includes("file:///a"), "not another session's");

    // Other capabilities (no roots): a connection made ahead with roots waits, but this session does not get it.
    await readyCount(r, 2);
    opened = r.sent.length;
    const b = await session(url);
    const bMarker = `b-${randomUUID()}`;
    await b.callTool({ name: "echo", arguments: { message: bMarker } });
    const tb = transportOfCall(r.sent, bMarker);
    assert.ok(initializeAt(r.sent, tb) >= opened, "a connection of its own, initialized after it opened");
    assert.equal(declared(r.sent, tb).roots, undefined, "declaring no roots");
    const names = (await b.listTools()).tools.map((t) => t.name);
    assert.ok(!names.includes("get-roots-list"), "the upstream offers it nothing that needs roots");
  });

  test("a waiting connection whose process dies is not handed out; closing the gateway ends the one waiting", async () => {
    const r = await recordedGateway();
    const a = await session(r.gw.url);
    await call(a, "execute_tool", { server: "everything", tool: "echo", args: { message: "a" } });
    await readyCount(r, 1);
    const waiting = r.pids.length - 1; // the newest transport: the one made ahead
    const pid = r.pids[waiting]!()!;
    assert.ok(pid > 0 && processAlive(pid));
    process.kill(-pid, "SIGKILL");
    await pollFor(async () => (processAlive(pid) ? undefined : true), "the killed process gone");
    const b = await session(r.gw.url);
    const marker = `b-${randomUUID()}`;
    const result = await call(b, "execute_tool", { server: "everything", tool: "echo", args: { message: marker } });
    assert.ok(JSON.stringify(result).includes(marker), "the session's call answered");
    assert.notEqual(transportOfCall(r.sent, marker), waiting, "not on the dead one");
    await readyCount(r, 2); // the pool made one ahead again after the take
    const sparePid = r.pids[r.pids.length - 1]!()!;
    assert.ok(sparePid > 0 && processAlive(sparePid));
    await Promise.allSettled([a.close(), b.close()]);
    await r.gw.close();
    assert.ok(!processAlive(sparePid), "closing the gateway ended the connection made ahead and its process");
  });
  test("a taken connection whose process dies is the session's: it is told, and its next call starts a new process", async () => {
    const r = await recordedGateway();
    const a = await session(r.gw.url);
    await call(a, "execute_tool", { server: "everything", tool: "echo", args: { message: "a" } });
    await readyCount(r, 1);
    const b = await session(r.gw.url);
    const first = `b-${randomUUID()}`;
    await call(b, "execute_tool", { server: "everything", tool: "echo", args: { message: first } });
    const t = transportOfCall(r.sent, first);
    assert.ok(initializeAt(r.sent, t) >= 0 && r.logged("upstream_connected").some((l) => l.warm === true), "b took the connection made ahead");
    const pid = r.pids[t]!()!;
    process.kill(-pid, "SIGKILL");
    await pollFor(async () => (processAlive(pid) ? undefined : true), "the killed process gone");
    // The SDK client's close reaches the session's handlers (the take must not clear it, ecfe12a; V's review).
    await pollFor(async () => (r.logged("upstream_disconnected").length > 0 ? true : undefined), "the taken connection's disconnect", READY_MS);
    const second = `b-${randomUUID()}`;
    const result = await call(b, "execute_tool", { server: "everything", tool: "echo", args: { message: second } });
    const text = JSON.stringify(result);
    assert.ok(text.includes(second), `the next call answered: ${text.slice(0, 300)}`);
    assert.ok(text.includes("server_disconnected"), "and the session was told its server disconnected");
    assert.notEqual(transportOfCall(r.sent, second), t, "on a new process");
  });

  test("a waiting connection whose upstream gave up on its roots/list is not handed out: the next session's roots reach a server that asks once", async () => {
    // roots-once asks for roots once, after initialized, and waits 5 s: a connection made ahead outlives that wait.
    const dir = mkdtempSync(path.join(os.tmpdir(), "warm-roots-"));
    const gaveUp = path.join(dir, "gave-up");
    const { logger, lines } = logLines();
    const server = {
      command: process.execPath,
      args: fixtureArgs("roots-once-server"),
      env: { ROOTS_TIMEOUT_MS: "5000", ROOTS_GAVE_UP_FILE: gaveUp },
      sharing: "session",
    };
    const gw = await startGateway({ mcpServers: { r: server }, gateway: { upstream: { warmPool: 1 } } }, { logger });
    gateways.push(gw);
    const url = gw.url.replace(/\/mcp$/, "/servers/r/mcp");
    const a = await session(url, ["file:///a"]);
    await a.callTool({ name: "roots", arguments: {} }); // the demand, with roots: the pool connects ahead declaring them
    await pollFor(async () => (lines.some((l) => l.msg === "warm_connection_ready") ? true : undefined), "a connection made ahead", READY_MS);
    // The process made ahead asked for roots, nobody could answer, and it gave up (its pid in the file, not a's).
    const aPid = Number(((await a.callTool({ name: "pid", arguments: {} })) as CallToolResult).content.map((c) => (c.type === "text" ? c.text : "")).join(""));
    await pollFor(
      async () =>
        existsSync(gaveUp) &&
        readFileSync(gaveUp, "utf8")
          .split("\n")
          .some((l) => l !== "" && Number(l) !== aPid)
          ? true
          : undefined,
      "the upstream made ahead gave up on roots",
      READY_MS,
    );
    const c = await session(url, ["file:///c"]);
    const text = JSON.stringify((await c.callTool({ name: "roots", arguments: {} })).content);
    assert.match(text, /file:\/\/\/c/, `the upstream of c's connection has c's roots: ${text}`);
  });
});

/**
 * At the child-process cap (gateway.upstream.maxChildProcesses) a session's own process takes the slot of a
 * connection made ahead, which is ended: the new process starts only once the old one is gone (review: the slot was
 * freed at the drop, so the cap was exceeded while the old process ended; another server's waiting one was not
 * freed in time at all, and the session was refused).
 */
describe("connections made ahead at the child-process cap", () => {
  const CAP = 2;

  /** A gateway with servers `a` and `b` (server-everything, stdio, session mode) at a cap of CAP; per process created, how many others were alive then. */
  async function cappedGateway() {
    const pids: Array<() => number | null> = [];
    const aliveAtStart: number[] = [];
    const recording: TransportFactory = (name, config, options) => {
      aliveAtStart.push(pids.filter((pid) => (pid() ?? 0) > 0 && processAlive(pid()!)).length);
      const created = defaultTransportFactory(name, config, options);
      pids.push(() => created.pid?.() ?? null);
      return created;
    };
    const { logger, lines } = logLines();
    const server = { ...everythingStdio(), sharing: "session" };
    const gw = await startGateway(
      { mcpServers: { a: server, b: server }, gateway: { upstream: { warmPool: 1, maxChildProcesses: CAP } } },
      { transportFactory: recording, logger },
    );
    gateways.push(gw);
    const ready = () => pollFor(async () => (lines.some((l) => l.msg === "warm_connection_ready") ? true : undefined), "a connection made ahead", READY_MS);
    return { gw, pids, aliveAtStart, ready };
  }

  test("another server's session ends the waiting connection and starts its process once that one is gone", async () => {
    const g = await cappedGateway();
    const s = await session(g.gw.url);
    await call(s, "execute_tool", { server: "a", tool: "echo", args: { message: "a" } });
    await g.ready(); // a's process and a's connection made ahead: the cap
    const waiting = g.pids[1]!()!;
    const result = await call(s, "execute_tool", { server: "b", tool: "echo", args: { message: "b" } });
    assert.ok(!result.isError && JSON.stringify(result).includes("Echo: b"), `b answered at the cap: ${JSON.stringify(result).slice(0, 300)}`);
    assert.ok(!processAlive(waiting), "a's connection made ahead was ended for it");
    assert.deepEqual(g.aliveAtStart, [0, 1, 1], "each process started beside at most CAP - 1 others");
  });

  test("a session with other capabilities ends the server's own waiting connection and starts its process once that one is gone", async () => {
    const g = await cappedGateway();
    const url = g.gw.url.replace(/\/mcp$/, "/servers/a/mcp");
    const plain = await session(url);
    await plain.callTool({ name: "echo", arguments: { message: "plain" } });
    await g.ready(); // made ahead without roots, as the last session declared
    const waiting = g.pids[1]!()!;
    const withRoots = await session(url, ["file:///r"]);
    const result = (await withRoots.callTool({ name: "echo", arguments: { message: "roots" } })) as CallToolResult;
    assert.ok(!result.isError && JSON.stringify(result).includes("Echo: roots"), `answered at the cap: ${JSON.stringify(result).slice(0, 300)}`);
    assert.ok(!processAlive(waiting), "the connection made ahead for other capabilities was ended for it");
    assert.deepEqual(g.aliveAtStart, [0, 1, 1], "each process started beside at most CAP - 1 others");
  });
});
