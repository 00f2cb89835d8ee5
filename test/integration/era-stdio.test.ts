/**
 * The stdio face in both eras (issue 25, bridge 6; docs/adr/0032 "The stdio
 * face"): `emceepee stdio` as a real child process pins its connection to the
 * era of the first request. An SDK v2 client pinned to 2026-07-28 and an SDK
 * 1.32 client each on their own spawn, against server-everything behind the
 * gateway; the raw wire for the pinning refusals and `subscriptions/listen`
 * (the acknowledgement and notifications on stdout, ended by its cancellation).
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdioTransport } from "@modelcontextprotocol/client/stdio";
import { ROOT } from "../helpers/gateway.js";
import { CLI_ARGS, cliEnv } from "../helpers/core-extra.js";
import { waitFor } from "../helpers/tasks.js";
import { brief, spawnStdioWire, type Reply, type WireMessage } from "../helpers/stdio-wire.js";

const MODERN = "2026-07-28";
const T = { timeout: 120_000 };
const CAPS = { elicitation: { form: {} }, sampling: {}, roots: {} };
const ENVELOPE = {
  "io.modelcontextprotocol/protocolVersion": MODERN,
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": { name: "era-stdio", version: "1" },
};

/** What an SDK stdio client transport (either SDK) needs to spawn `emceepee stdio --face server:everything`, with its own state folder. */
const everythingOverStdio = () => ({
  command: process.execPath,
  args: [...CLI_ARGS, "stdio", "--face", "server:everything"],
  cwd: ROOT,
  env: Object.fromEntries(Object.entries(cliEnv()).filter((e): e is [string, string] => e[1] !== undefined)),
  stderr: "ignore" as const,
});

const cleanups: Array<() => Promise<unknown>> = [];
after(() => Promise.allSettled(cleanups.map((c) => c())));

/** `emceepee stdio` on raw pipes (test/helpers/stdio-wire.ts), ended after the file. */
function spawnRaw(args: string[] = []) {
  const wire = spawnStdioWire(args);
  cleanups.push(() => wire.stop());
  return wire;
}

const withEnvelope = (params: Record<string, unknown> = {}, version = MODERN) => ({
  ...params,
  _meta: { ...ENVELOPE, "io.modelcontextprotocol/protocolVersion": version },
});
const RESOURCE = "demo://resource/dynamic/text/1";
const INITIALIZE = { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "era-stdio-legacy", version: "1" } };
const textOf = (result: unknown) => JSON.stringify((result as { content?: unknown }).content);

describe("the stdio face in both eras", () => {
  it("an SDK v2 client pinned to 2026-07-28 lists and calls server-everything's tools, and answers its elicitation through input_required", T, async () => {
    const asked: string[] = [];
    const client = new ModernClient({ name: "era-stdio-modern", version: "1" }, { capabilities: CAPS, versionNegotiation: { mode: { pin: MODERN } } });
    client.setRequestHandler("elicitation/create", (request) => {
      asked.push(`elicitation: ${request.params.message}`);
      return { action: "accept", content: { name: "Alice", check: true } };
    });
    client.setRequestHandler("roots/list", () => {
      asked.push("roots");
      return { roots: [{ uri: "file:///work/stdio-project", name: "project" }] };
    });
    // The SDK probes with server/discover on a sibling spawn, then starts this one: two gateways.
    await client.connect(new ModernStdioTransport(everythingOverStdio()));
    cleanups.push(() => client.close());
    assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("echo") && names.includes("trigger-elicitation-request"), names.join(","));
    const echoed = await client.callTool({ name: "echo", arguments: { message: "modern over stdio" } });
    assert.match(textOf(echoed), /modern over stdio/);
    const elicited = await client.callTool({ name: "trigger-elicitation-request", arguments: {} });
    assert.match(textOf(elicited), /Alice/);
    const roots = await client.callTool({ name: "get-roots-list", arguments: {} });
    assert.match(textOf(roots), /file:\/\/\/work\/stdio-project/);
    assert.ok(asked.some((a) => a.startsWith("elicitation")) && asked.includes("roots"), asked.join(", "));
  });

  it("an SDK 1.32 client gets the 2025-11-25 session, unchanged", T, async () => {
    const client = new Client({ name: "era-stdio-legacy", version: "1" }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler((await import("@modelcontextprotocol/sdk/types.js")).ElicitRequestSchema, () => ({
      action: "accept",
      content: { name: "Bob", check: true },
    }));
    await client.connect(new StdioClientTransport(everythingOverStdio()));
    cleanups.push(() => client.close());
    assert.equal(client.getServerVersion()?.name, "mcp-servers/everything");
    await client.ping();
    const echoed = await client.callTool({ name: "echo", arguments: { message: "legacy over stdio" } });
    assert.match(textOf(echoed), /legacy over stdio/);
    assert.equal((echoed as Record<string, unknown>).resultType, undefined, "no 2026-07-28 result fields on the 2025 path");
    const elicited = await client.callTool({ name: "trigger-elicitation-request", arguments: {} });
    assert.match(textOf(elicited), /Bob/);
  });

  it("a first modern request pins the connection: initialize and envelope-less requests are refused, modern ones still served", T, async () => {
    const wire = spawnRaw();
    // A refused envelope and server/discover do not pin.
    const unsupported = await wire.request(1, "tools/list", withEnvelope({}, "2099-01-01"));
    assert.equal(unsupported.error?.code, -32022, brief(unsupported));
    assert.deepEqual(unsupported.error?.data?.supported, ["2026-07-28", "2025-11-25"]);
    const discover = await wire.request(2, "server/discover", withEnvelope());
    assert.deepEqual(discover.result?.supportedVersions, ["2026-07-28", "2025-11-25"], brief(discover));
    assert.ok(discover.result?.capabilities?.tools, brief(discover.result));
    // The meta face, stateless.
    const list = await wire.request(3, "tools/list", withEnvelope());
    const names = (list.result?.tools as Array<{ name: string }> | undefined)?.map((t) => t.name) ?? [];
    assert.ok(names.includes("execute_tool"), brief(list));
    assert.equal(list.result?.resultType, "complete");
    const initialize = await wire.request(4, "initialize", INITIALIZE);
    assert.equal(initialize.error?.code, -32022, brief(initialize));
    assert.deepEqual(initialize.error?.data, { supported: ["2026-07-28"], requested: "2025-11-25" });
    assert.match(initialize.error?.message ?? "", /new connection/);
    const bare = await wire.request(5, "tools/list");
    assert.equal(bare.error?.code, -32602, brief(bare));
    const modernInitialize = await wire.request(6, "initialize", withEnvelope(INITIALIZE));
    assert.equal(modernInitialize.error?.code, -32601, brief(modernInitialize));
    const call = await wire.request(7, "tools/call", withEnvelope({ name: "list_servers", arguments: {} }));
    assert.match(JSON.stringify(call.result?.content), /everything/, brief(call));
  });

  it("a first initialize pins the 2025 session after a server/discover probe; later envelopes change nothing", T, async () => {
    const wire = spawnRaw(["--face", "server:everything"]);
    const discover = await wire.request(1, "server/discover", withEnvelope());
    assert.ok(discover.result?.capabilities?.tools, brief(discover));
    const initialized = await wire.request(2, "initialize", INITIALIZE);
    assert.equal(initialized.result?.protocolVersion, "2025-11-25", brief(initialized));
    wire.notify("notifications/initialized");
    const again = await wire.request(3, "server/discover", withEnvelope());
    assert.equal(again.error?.code, -32601, brief(again));
    const call = await wire.request(4, "tools/call", withEnvelope({ name: "echo", arguments: { message: "still 2025" } }));
    assert.match(JSON.stringify(call.result?.content), /still 2025/, brief(call));
    assert.equal(call.result?.resultType, undefined, "answered on the 2025 path");
  });

  it("a notifications/cancelled for a modern request in flight ends its call, unanswered", T, async () => {
    const wire = spawnRaw(["--face", "server:everything"]);
    const count = (pattern: RegExp) =>
      wire
        .log()
        .split("\n")
        .filter((line) => pattern.test(line)).length;
    const created = /"msg":"session_created"/;
    const ended = /"reason":"modern request answered"/;
    const discover = await wire.request(1, "server/discover", withEnvelope());
    assert.ok(discover.result, brief(discover));
    await waitFor(() => count(ended) === 1 || undefined, "the discover request's session ends");
    const before = count(created);
    let answered = false;
    void wire.request(2, "tools/call", withEnvelope({ name: "trigger-long-running-operation", arguments: { duration: 120, steps: 120 } })).then(
      () => (answered = true),
      () => undefined, // never answered: it gives up at the gateway's end (or after 120 s)
    );
    await waitFor(() => count(created) > before || undefined, "the call's session is made");
    wire.notify("notifications/cancelled", { requestId: 2, reason: "the user stopped it" });
    // Its session ends (face closed, upstream call cancelled) long before the two-minute operation could.
    await waitFor(() => count(ended) === 2 || undefined, "the cancelled call's session ends");
    const next = await wire.request(3, "tools/call", withEnvelope({ name: "echo", arguments: { message: "after the cancel" } }));
    assert.match(JSON.stringify(next.result?.content), /after the cancel/, brief(next));
    assert.equal(answered, false, "a cancelled request is not answered");
  });

  it("subscriptions/listen over stdio: the acknowledgement, the face's notifications stamped with its id, and its cancellation ends it", T, async () => {
    const wire = spawnRaw(["--face", "server:everything"]);
    const tasks = { "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } } };
    const onHost = (params: Record<string, unknown>) => ({ ...params, _meta: { ...ENVELOPE, ...tasks } });
    /** A tools/call on the host, answered with its result: also when it outlived IMMEDIATE_RESULT_MS (a loaded machine) and came as a task. */
    const callOnHost = async (id: number, params: Record<string, unknown>): Promise<Reply> => {
      const reply = await wire.request(id, "tools/call", onHost(params));
      if (reply.result?.resultType !== "task") return reply;
      const taskId = reply.result.taskId as string;
      let polls = 0;
      const done = await waitFor(async () => {
        const polled = await wire.request(`${id}-poll-${++polls}`, "tasks/get", onHost({ taskId }));
        return polled.result?.status === "working" ? undefined : polled;
      }, `call ${id}'s task ${taskId} to end`);
      assert.equal(done.result?.status, "completed", brief(done));
      return { id, result: done.result?.result };
    };
    const bad = await wire.request("bad", "subscriptions/listen", withEnvelope({ notifications: "all" }));
    assert.equal(bad.error?.code, -32602, brief(bad));
    assert.match(bad.error?.message ?? "", /EMCP_BAD_ARGUMENTS: subscriptions\/listen needs params.notifications/);
    const of = (id: string) => (m: WireMessage) => m.params?._meta?.["io.modelcontextprotocol/subscriptionId"] === id;
    wire.send("first", "subscriptions/listen", withEnvelope({ notifications: { resourcesListChanged: true, resourceSubscriptions: [RESOURCE] } }));
    const ack = await wire.next((m) => m.method === "notifications/subscriptions/acknowledged" && of("first")(m), "the acknowledgement");
    assert.deepEqual(ack.params?.notifications, { resourcesListChanged: true, resourceSubscriptions: [RESOURCE] });
    // On the principal's host, as the stream (a call that declares the tasks extension).
    const toggled = await callOnHost(1, { name: "toggle-subscriber-updates", arguments: {} });
    assert.match(brief(toggled.result), /Started simulated resource updated/);
    const updated = await wire.next((m) => m.method === "notifications/resources/updated" && of("first")(m), "a resource update");
    assert.equal(updated.params?.uri, RESOURCE);
    await callOnHost(2, { name: "toggle-subscriber-updates", arguments: {} });
    // A second stream; the first is cancelled: the next list change reaches the second only.
    wire.send("second", "subscriptions/listen", withEnvelope({ notifications: { resourcesListChanged: true } }));
    await wire.next((m) => m.method === "notifications/subscriptions/acknowledged" && of("second")(m), "the second acknowledgement");
    wire.notify("notifications/cancelled", { requestId: "first", reason: "done listening" });
    const cut = wire.messages.length;
    const gzip = { name: "listen.gz", data: `data:text/plain;base64,${Buffer.from("stdio").toString("base64")}`, outputType: "resourceLink" };
    await callOnHost(3, { name: "gzip-file-as-resource", arguments: gzip });
    await wire.next((m) => m.method === "notifications/resources/list_changed" && of("second")(m), "the second stream's list change");
    await wire.request(4, "tools/list", withEnvelope()); // everything written before this answer has been read
    const late = wire.messages.slice(cut).filter((m) => of("first")(m) || m.id === "first");
    assert.deepEqual(late, [], "a cancelled listen gets nothing more, not even a result");
    assert.equal(await wire.end(), 0, "the wire's end ends the open stream and the process");
  });
});
