/**
 * Meta-face replies that programs read, against three server-everything
 * upstreams in this process (test/helpers/in-process.ts) and real SDK clients: `structuredContent` with an `outputSchema`
 * (the SDK client validates every structured reply against the schema it
 * listed), the promotion's text naming respond_to_sampling or
 * respond_to_elicitation, identical list_changed notifications folded into
 * one event with a count, list_tools' name filter and paging, and the access
 * log (one `tool_call` line per call, on both faces; off with accessLog:false).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createLogger, sessionHash } from "../../src/logging.js";
import { ROOT, blocks, call, connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { allText, errorCodeOf, eventually, promote } from "../helpers/async-extra.js";
import { startCliServe, stopChild } from "../helpers/core-extra.js";

const SERVERS = ["one", "two", "three"];
const SLOW = { timeout: 120_000 };

/** The gateway's log lines, parsed. */
class LogSink extends Writable {
  text = "";
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString("utf8");
    done();
  }
  lines(): Array<Record<string, unknown>> {
    return this.text
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }
  toolCalls(): Array<Record<string, unknown>> {
    return this.lines().filter((l) => l.msg === "tool_call");
  }
}

function ok(result: CallToolResult): CallToolResult {
  assert.notEqual(result.isError, true, `unexpected isError result: ${allText(result)}`);
  return result;
}

/** Every JSON object block of the reply merged: what structuredContent must hold (envelope included). */
function mergedJson(result: CallToolResult): Record<string, unknown> {
  return Object.assign({}, ...blocks(result).filter((b) => b !== null && typeof b === "object" && !Array.isArray(b) && !("type" in b)));
}

function sessionIdOf(client: Client): string {
  return (client.transport as StreamableHTTPClientTransport).sessionId!;
}

let gw: TestGateway;
const sink = new LogSink();
const clients: Client[] = [];

async function open(url?: string): Promise<Client> {
  const client = await connectClient(url ?? gw.url);
  clients.push(client);
  return client;
}

before(async () => {
  gw = await startInProcessGateway(
    { mcpServers: Object.fromEntries(SERVERS.map((s) => [s, inProcess("everything")])), gateway: { logLevel: "info" } },
    { logger: createLogger("info", sink) },
  );
});

after(async () => {
  for (const c of clients) {
    await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
    await c.close().catch(() => undefined);
  }
  await gw.close();
});

describe("structured replies", SLOW, () => {
  test("structured meta-tools declare an outputSchema; structuredContent is the JSON reply plus the envelope, valid for the SDK client", async () => {
    const client = await open();
    const { tools } = await client.listTools(); // the SDK client now validates structuredContent against these
    const withSchema = tools.filter((t) => t.outputSchema).map((t) => t.name);
    for (const name of ["list_servers", "list_tools", "list_tasks", "get_task", "await_activity", "get_elicitations", "get_sampling_requests", "cancel_task"]) {
      assert.ok(withSchema.includes(name), `${name} has an outputSchema`);
    }
    for (const name of ["execute_tool", "get_task_result", "get_prompt", "read_resource"]) {
      assert.ok(!withSchema.includes(name), `${name} passes an upstream payload on: no outputSchema`);
    }

    const calls: Array<[string, Record<string, unknown>]> = [
      ["list_servers", {}],
      ["list_tools", { server: "one", limit: 3 }],
      ["list_resources", { server: "one" }],
      ["list_resource_templates", {}],
      ["list_prompts", { server: "two" }],
      ["get_notifications", {}],
      ["get_logs", { server: "one" }],
      ["get_elicitations", {}],
      ["get_sampling_requests", {}],
      ["list_tasks", { include_completed: true }],
      ["await_activity", { timeout_ms: 0 }],
    ];
    for (const [name, args] of calls) {
      const result = ok(await call(client, name, args));
      assert.ok(result.structuredContent, `${name} has structuredContent`);
      assert.deepEqual(result.structuredContent, mergedJson(result), `${name}: structuredContent is what the text says`);
    }
    // The first reply carried the session's first events: in the text and in structuredContent alike.
    const servers = ok(await call(client, "list_servers")).structuredContent as { servers: Array<{ name: string; status: string }> };
    assert.deepEqual(
      servers.servers.map((s) => [s.name, s.status]),
      [
        ["one", "connected"],
        ["two", "connected"],
        ["three", "connected"],
      ],
    );

    const promoted = await promote(client, "one", "trigger-long-running-operation", { duration: 30, steps: 1 }, 0);
    const structured = promoted.result.structuredContent as { task_id: string; proxy_task: { task_id: string } };
    assert.equal(structured.task_id, promoted.taskId, "the promotion's task id is in structuredContent");
    assert.equal(structured.proxy_task.task_id, promoted.taskId);
    const task = ok(await call(client, "get_task", { task_id: promoted.taskId }));
    assert.equal((task.structuredContent as { task: { taskId: string } }).task.taskId, promoted.taskId);
    const cancelled = ok(await call(client, "cancel_task", { task_id: promoted.taskId }));
    assert.equal((cancelled.structuredContent as { success: boolean }).success, true);

    // Upstream payloads pass unstructured; an upstream's own structuredContent is left as it came.
    const echoed = ok(await call(client, "execute_tool", { server: "one", tool: "echo", args: { message: "x" } }));
    assert.equal(echoed.structuredContent, undefined);
    const own = ok(await call(client, "execute_tool", { server: "one", tool: "get-structured-content", args: { location: "New York" } }));
    assert.ok(own.structuredContent && !("events_since_last_response" in own.structuredContent), JSON.stringify(own.structuredContent));
    const errored = await call(client, "execute_tool", { server: "nope", tool: "x" });
    assert.equal(errored.isError, true);
    assert.equal(errorCodeOf(errored), "EMCP_UNKNOWN_SERVER");
  });

  test("a promotion names the action its server's pending requests need: respond_to_sampling, respond_to_elicitation", async () => {
    const client = await open();
    // timeout_ms 10 s: the upstream's request has arrived by the promotion even on a loaded machine (nobody answers it).
    type Promotion = { task_id: string; pending_on_server: { sampling_requests_for_server: unknown[]; elicitations_for_server: unknown[] } };
    // Both at once: each waits out its own 10 s.
    const [samplingReply, elicitationReply] = await Promise.all([
      call(client, "execute_tool", { server: "one", tool: "trigger-sampling-request", args: { prompt: "hi", maxTokens: 8 }, timeout_ms: 10_000 }),
      call(client, "execute_tool", { server: "two", tool: "trigger-elicitation-request", args: {}, timeout_ms: 10_000 }),
    ]);
    const sampling = ok(samplingReply);
    const samplingText = allText(sampling).split("\n")[0]!;
    assert.match(samplingText, /Promoted to task/);
    assert.match(samplingText, /respond_to_sampling/);
    assert.doesNotMatch(samplingText, /respond_to_elicitation/);
    const samplingTask = sampling.structuredContent as Promotion;
    assert.equal(samplingTask.pending_on_server.sampling_requests_for_server.length, 1);

    const elicitation = ok(elicitationReply);
    const elicitationText = allText(elicitation).split("\n")[0]!;
    assert.match(elicitationText, /respond_to_elicitation/);
    assert.doesNotMatch(elicitationText, /respond_to_sampling/);
    const elicitationTask = elicitation.structuredContent as Promotion;
    assert.equal(elicitationTask.pending_on_server.elicitations_for_server.length, 1);

    for (const p of [samplingTask, elicitationTask]) ok(await call(client, "cancel_task", { task_id: p.task_id }));
  });

  test("identical list_changed notifications in one reply are one event with a count", async () => {
    // A transparent session collects the notifications; a meta face attached to it reads them in one reply.
    const transparent = await open(gw.url.replace(/\/mcp$/, "/servers/one/mcp"));
    for (let i = 0; i < 6; i++) {
      const r = (await transparent.callTool({
        name: "gzip-file-as-resource",
        arguments: { name: `f${i}.gz`, data: "data:text/plain;base64,aGVsbG8=" },
      })) as CallToolResult;
      assert.notEqual(r.isError, true, JSON.stringify(r.content));
    }
    const meta = await open(`${gw.url}?session=${encodeURIComponent(sessionIdOf(transparent))}`);
    await meta.listTools();
    const reply = ok(await call(meta, "list_servers"));
    type Event = { type: string; server: string; data: { method?: string }; count?: number };
    const events = (reply.structuredContent as { events_since_last_response?: Event[] }).events_since_last_response ?? [];
    const changed = events.filter((e) => e.type === "notification" && e.data.method === "notifications/resources/list_changed");
    assert.equal(changed.length, 1, JSON.stringify(events));
    assert.equal(changed[0]!.count, 6);
    assert.equal(changed[0]!.server, "one");
    assert.deepEqual(reply.structuredContent, mergedJson(reply));
  });
});

describe("list_tools: filter and pages", SLOW, () => {
  test("name_contains, cursor/limit, a small default reply, and the previous form", async (t) => {
    const client = await open();
    const full = ok(await call(client, "list_tools", { limit: 500 }));
    const all = full.structuredContent as { servers: Array<{ server: string; tools: Array<{ name: string }> }>; total_tools: number; next_cursor?: string };
    const names = all.servers.flatMap((s) => s.tools.map((t) => `${s.server}/${t.name}`));
    assert.equal(all.total_tools, names.length);
    assert.equal(all.next_cursor, undefined);
    assert.ok(names.length > 10, `three servers have more tools than one default page (${names.length})`);

    const first = ok(await call(client, "list_tools"));
    const page = first.structuredContent as { returned: number; total_tools: number; next_cursor?: string };
    assert.equal(page.returned, 10);
    assert.equal(page.total_tools, names.length);
    assert.ok(page.next_cursor);
    // Whole replies as sent (text and structuredContent).
    const fullBytes = JSON.stringify(full).length;
    const defaultBytes = JSON.stringify(first).length;
    t.diagnostic(`list_tools, 3 servers: ${names.length} tools, ${fullBytes} B in one reply; default page ${defaultBytes} B`);
    assert.ok(defaultBytes < fullBytes * 0.4, `the default reply (${defaultBytes} B) is well below the whole list (${fullBytes} B)`);

    // Paging with a cursor walks the same list, in order, once.
    const paged: string[] = [];
    let cursor: string | undefined;
    do {
      const r = ok(await call(client, "list_tools", { limit: 7, ...(cursor ? { cursor } : {}) }));
      const s = r.structuredContent as { servers: Array<{ server: string; tools: Array<{ name: string }> }>; next_cursor?: string };
      paged.push(...s.servers.flatMap((row) => row.tools.map((t) => `${row.server}/${t.name}`)));
      cursor = s.next_cursor;
    } while (cursor);
    assert.deepEqual(paged, names);

    const echo = ok(await call(client, "list_tools", { name_contains: "ECHO" })).structuredContent as {
      servers: Array<{ server: string; tools: Array<{ name: string }> }>;
    };
    assert.deepEqual(
      echo.servers.map((s) => [s.server, s.tools.map((t) => t.name)]),
      SERVERS.map((s) => [s, ["echo"]]),
    );

    // The previous form: one server, tools under servers[0].tools.
    const one = ok(await call(client, "list_tools", { server: "two", limit: 500 })).structuredContent as {
      servers: Array<{ server: string; tools: unknown[] }>;
    };
    assert.equal(one.servers.length, 1);
    assert.equal(one.servers[0]!.server, "two");
    assert.equal(one.servers[0]!.tools.length, names.filter((n) => n.startsWith("two/")).length);

    const bad = await call(client, "list_tools", { cursor: "not-a-cursor" });
    assert.equal(bad.isError, true);
    assert.equal(errorCodeOf(bad), "EMCP_BAD_ARGUMENTS");
    const other = await call(client, "list_tools", { cursor: page.next_cursor, name_contains: "get" });
    assert.equal(errorCodeOf(other), "EMCP_BAD_ARGUMENTS");
    assert.match(allText(other), /belongs to list_tools/);
  });
});

describe("access log", SLOW, () => {
  test("one tool_call line per tool call on the meta and transparent faces, with face, server, tool, durationMs, outcome and sessionHash", async () => {
    const meta = await open();
    const transparent = await open(gw.url.replace(/\/mcp$/, "/servers/three/mcp"));
    const before = sink.toolCalls().length;

    ok(await call(meta, "list_servers"));
    ok(await call(meta, "execute_tool", { server: "three", tool: "echo", args: { message: "a" } }));
    assert.equal((await call(meta, "execute_tool", { server: "three", tool: "no-such-tool" })).isError, true);
    const p = await promote(meta, "three", "trigger-long-running-operation", { duration: 30, steps: 1 }, 0);
    ok(await call(meta, "cancel_task", { task_id: p.taskId }));
    const echoed = (await transparent.callTool({ name: "echo", arguments: { message: "b" } })) as CallToolResult;
    assert.notEqual(echoed.isError, true);
    const unknown = (await transparent.callTool({ name: "no-such-tool", arguments: {} })) as CallToolResult;
    assert.equal(unknown.isError, true, "the upstream's own isError result");
    // Cancelled once it runs upstream (its first progress notification says so).
    const controller = new AbortController();
    let running!: () => void;
    const started = new Promise<void>((resolve) => (running = resolve));
    const slow = transparent.callTool({ name: "trigger-long-running-operation", arguments: { duration: 30, steps: 300 } }, undefined, {
      signal: controller.signal,
      onprogress: () => running(),
      timeout: 120_000,
    });
    await started;
    controller.abort("test cancels");
    await assert.rejects(slow);

    const expected = [
      { face: "meta", tool: "list_servers", outcome: "ok", session: meta },
      { face: "meta", server: "three", tool: "execute_tool", upstreamTool: "echo", outcome: "ok", session: meta },
      { face: "meta", server: "three", tool: "execute_tool", upstreamTool: "no-such-tool", outcome: "error", session: meta },
      { face: "meta", server: "three", tool: "execute_tool", upstreamTool: "trigger-long-running-operation", outcome: "promoted", session: meta },
      { face: "meta", tool: "cancel_task", outcome: "ok", session: meta },
      { face: "server", server: "three", tool: "echo", outcome: "ok", session: transparent },
      { face: "server", server: "three", tool: "no-such-tool", outcome: "error", session: transparent },
      { face: "server", server: "three", tool: "trigger-long-running-operation", outcome: "cancelled", session: transparent },
    ];
    const lines = await eventually("every call logged", () => {
      const found = sink.toolCalls().slice(before);
      return found.length >= expected.length ? found : undefined;
    });
    assert.equal(lines.length, expected.length, JSON.stringify(lines));
    expected.forEach(({ session, ...want }, i) => {
      const line = lines[i]!;
      assert.equal(line.level, 30, "info");
      const { face, server, tool, upstreamTool, outcome } = line;
      assert.deepEqual({ face, server, tool, upstreamTool, outcome }, { server: undefined, upstreamTool: undefined, ...want }, `line ${i}`);
      assert.equal(line.sessionHash, sessionHash(sessionIdOf(session)));
      assert.equal(typeof line.durationMs, "number");
      assert.ok((line.durationMs as number) >= 0);
      assert.ok(!("session" in line), "no session id in the access log");
    });
  });

  test("emceepee serve logs tool_call lines, and none with --no-access-log", async () => {
    for (const [flags, lines] of [
      [[], 1],
      [["--no-access-log"], 0],
    ] as const) {
      const served = await startCliServe(ROOT, ["--port", "0", "--log-level", "info", "--no-upstream-check", ...flags]);
      try {
        const client = await connectClient(served.url);
        ok(await call(client, "list_servers"));
        await client.close();
      } finally {
        await stopChild(served.child);
      }
      const found = served
        .stderr()
        .split("\n")
        .filter((l) => l.includes('"msg":"tool_call"'));
      assert.equal(found.length, lines, `${flags.join(" ") || "no flag"}: ${found.join("\n")}`);
      assert.match(served.stderr(), /"msg":"session_created"/, "the log is on");
    }
  });

  test("gateway.accessLog: false logs no tool_call line", async (t) => {
    const quiet = new LogSink();
    const off = await startGateway({ mcpServers: {}, gateway: { logLevel: "info", accessLog: false } }, { logger: createLogger("info", quiet) });
    t.after(() => off.close());
    const client = await connectClient(off.url);
    t.after(() => client.close());
    ok(await call(client, "list_servers"));
    ok(await call(client, "list_tasks"));
    assert.ok(
      quiet.lines().some((l) => l.msg === "session_created"),
      "the logger works",
    );
    assert.deepEqual(quiet.toolCalls(), []);
  });
});
