/**
 * run_code (issue 26, design MF-25..MF-27, docs/adr/0028): one gateway in process
 * with server-everything and the slow fixture in process. A multi-step
 * workflow in one run (resources, tools, a prompt, list and search); every mcp.call governed like execute_tool (a deny
 * rule, a rate limit, decisions on /metrics); the sandbox closed (no require,
 * process, import, fetch, host globals, host prototypes, state between
 * runs); each bound (CPU, memory, stack, output, calls, wall time) and each
 * kind of failure ends the run cleanly with its code and setting while the
 * gateway keeps serving; a slow run is promoted to a task whose result is the
 * structured reply.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SpanKind } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { call, connectClient, fixtureArgs, ROOT, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

// cpuTimeMs: the sandbox counts the time its synchronous slices hold the gateway's thread (sandbox.ts), which on a
// machine at load 47 went past 500 ms for an ordinary three-read workflow; 2 s keeps the runaway-loop case short.
const CODE_MODE = { cpuTimeMs: 2_000, memoryBytes: 16 * 1024 * 1024, maxCalls: 20, maxOutputBytes: 64 * 1024, wallTimeMs: 8_000 };

interface Reply {
  result?: unknown;
  error?: { code: string; message: string };
  logs: Array<{ level: string; text: string }>;
  calls: Array<{ fn: string; server?: string; target?: string; outcome: string; code?: string }>;
}

let gw: TestGateway;
let client: Client;

before(async () => {
  gw = await startInProcessGateway({
    mcpServers: { everything: inProcess("everything"), slow: inProcess("slow") },
    gateway: {
      codeMode: CODE_MODE,
      governance: {
        profile: "enforce",
        rules: [{ id: "no-secret-echo", server: "everything", tool: "echo", arguments: [{ pointer: "/message", matches: "secret" }], action: "deny" }],
      },
      rateLimits: [{ name: "weather", scope: "tool", server: "everything", tool: "get-structured-content", capacity: 2, refillPerMinute: 0.01 }],
    },
  });
  client = await connectClient(gw.url);
});

after(async () => {
  await client.close();
  await gw.close();
});

async function run(code: string, extra: Record<string, unknown> = {}): Promise<{ raw: CallToolResult; reply: Reply }> {
  const raw = await call(client, "run_code", { code, ...extra });
  return { raw, reply: raw.structuredContent as unknown as Reply };
}

/** A run that must end with `code` (EMCP_CODE_LIMIT naming `setting`, ...), and a gateway that still serves afterwards. */
async function refused(code: string, expected: string, pattern: RegExp): Promise<Reply> {
  const { raw, reply } = await run(code);
  assert.equal(raw.isError, true, `expected ${expected}, got ${JSON.stringify(raw).slice(0, 600)}`);
  const first = raw.content[0];
  assert.ok(first?.type === "text" && first.text.startsWith(`${expected}: `), `the text starts with ${expected}: ${JSON.stringify(first).slice(0, 400)}`);
  assert.equal(reply.error?.code, expected);
  assert.match(reply.error?.message ?? "", pattern);
  await stillServing();
  return reply;
}

async function stillServing(): Promise<void> {
  const echo = await call(client, "execute_tool", { server: "everything", tool: "echo", args: { message: "still here" } });
  assert.ok(!echo.isError && JSON.stringify(echo.content).includes("still here"), JSON.stringify(echo.content));
  const { reply } = await run("return 1 + 1");
  assert.equal(reply.result, 2);
}

describe("run_code", () => {
  test("a multi-step workflow in one call: three resources read, two tools called with data from the first; result, logs and calls", async () => {
    const { raw, reply } = await run(`
      const docs = [];
      for (const name of ["architecture.md", "features.md", "extension.md"]) {
        const { contents } = await mcp.readResource("everything", "demo://resource/static/document/" + name);
        docs.push(contents[0].text);
      }
      const sum = mcp.text(await mcp.call("everything", "get-sum", { a: docs[0].length, b: docs[1].length }));
      const echo = mcp.text(await mcp.call("everything", "echo", { message: docs[0].split("\\n")[0] }));
      const prompt = await mcp.getPrompt("everything", "args-prompt", { city: "Oslo" });
      const listed = await mcp.listTools("everything");
      const found = await mcp.search("add two numbers", { server: "everything", limit: 3 });
      console.log("lengths", docs.map((d) => d.length));
      console.error("to stderr", { n: 1 });
      return { sum, echo, lengths: docs.map((d) => d.length), prompt: prompt.messages[0].content.text, tools: listed[0].tools.length, found: found.results[0].name };
    `);
    assert.ok(!raw.isError, JSON.stringify(raw).slice(0, 800));
    const result = reply.result as { sum: string; echo: string; lengths: number[]; prompt: string; tools: number; found: string };
    assert.equal(result.found, "get-sum", "mcp.search is search_tools");
    assert.equal(result.lengths.length, 3);
    assert.ok(result.lengths.every((n) => n > 0));
    assert.match(result.sum, new RegExp(String(result.lengths[0]! + result.lengths[1]!)));
    assert.match(result.echo, /^Echo: #/);
    assert.equal(result.prompt, "What's weather in Oslo?");
    assert.ok(result.tools > 5);
    assert.deepEqual(reply.logs, [
      { level: "log", text: `lengths ${JSON.stringify(result.lengths)}` },
      { level: "error", text: 'to stderr {"n":1}' },
    ]);
    assert.deepEqual(
      reply.calls.map((c) => [c.fn, c.server, c.outcome]),
      [
        ["readResource", "everything", "ok"],
        ["readResource", "everything", "ok"],
        ["readResource", "everything", "ok"],
        ["call", "everything", "ok"],
        ["call", "everything", "ok"],
        ["getPrompt", "everything", "ok"],
        ["listTools", "everything", "ok"],
        ["search", "everything", "ok"],
      ],
    );
    // The same value as JSON text for an LLM.
    // The same value as JSON text for an LLM (the structured copy also carries the session's envelope).
    assert.deepEqual(JSON.parse((raw.content[0] as { text: string }).text), { result: reply.result, logs: reply.logs, calls: reply.calls });
  });

  test("mcp.call is execute_tool: governance denies, rate limits refuse, unknown tools are unknown — each a catchable error with its code, each decision counted", async () => {
    const { reply } = await run(`
      const out = {};
      const attempt = async (key, f) => { try { await f(); out[key] = "ok"; } catch (e) { out[key] = e.code; } };
      await attempt("denied", () => mcp.call("everything", "echo", { message: "a secret" }));
      await attempt("allowed", () => mcp.call("everything", "echo", { message: "hello" }));
      await attempt("unknownTool", () => mcp.call("everything", "no-such-tool", {}));
      await attempt("unknownServer", () => mcp.call("nowhere", "echo", {}));
      await attempt("badArgs", () => mcp.call("everything", 42, {}));
      for (let i = 0; i < 3; i++) await attempt("weather" + i, () => mcp.call("everything", "get-structured-content", { location: "New York" }));
      return out;
    `);
    assert.deepEqual(reply.result, {
      denied: "EMCP_POLICY_DENIED",
      allowed: "ok",
      unknownTool: "EMCP_UNKNOWN_TOOL",
      unknownServer: "EMCP_UNKNOWN_SERVER",
      badArgs: "EMCP_BAD_ARGUMENTS",
      weather0: "ok",
      weather1: "ok",
      weather2: "EMCP_RATE_LIMITED",
    });
    assert.deepEqual(
      reply.calls.filter((c) => c.outcome === "error").map((c) => c.code),
      ["EMCP_POLICY_DENIED", "EMCP_UNKNOWN_TOOL", "EMCP_UNKNOWN_SERVER", "EMCP_BAD_ARGUMENTS", "EMCP_RATE_LIMITED"],
    );
    // The agent's own execute_tool is refused by the same rule, and both refusals are counted as decisions.
    const direct = await call(client, "execute_tool", { server: "everything", tool: "echo", args: { message: "secret again" } });
    assert.ok(direct.isError && JSON.stringify(direct.content).includes("EMCP_POLICY_DENIED"));
    const metrics = await (await fetch(new URL("/metrics", gw.url))).text();
    assert.match(metrics, /emceepee_governance_decisions_total\{outcome="deny"\} 2\b/, "the script's denial and the agent's");
    assert.match(metrics, /emceepee_rate_limited_total\{[^}]*\} 1\b/, "the script's third weather call");
  });

  test("the sandbox is closed: no require, process, import(), fetch, timers or host globals; Function('return this') is the sandbox's own global", async () => {
    const { reply } = await run(`
      const probe = (f) => { try { const v = f(); return v === undefined ? "undefined" : typeof v; } catch (e) { return e.name; } };
      let imported;
      try { await import("node:fs"); imported = "loaded"; } catch (e) { imported = e.name + ": " + e.message; }
      const global = Function("return this")();
      const viaConstructor = probe(() => ({}).constructor.constructor("return process")());
      return {
        kinds: [typeof require, typeof process, typeof fetch, typeof setTimeout, typeof setInterval, typeof Buffer, typeof WebAssembly, typeof XMLHttpRequest],
        imported,
        sameGlobal: global === globalThis,
        viaConstructor,
        names: Object.getOwnPropertyNames(globalThis).filter((n) => /^(require|process|module|exports|Buffer|global|fetch|setTimeout|__emceepee)$|^__emceepee/.test(n)),
        hostFunctions: [typeof globalThis.__emceepee_call, typeof globalThis.__emceepee_log, typeof globalThis.__emceepee_finish],
        mcp: Object.keys(mcp).sort(),
      };
    `);
    assert.deepEqual(reply.result, {
      kinds: Array(8).fill("undefined"),
      imported: "ReferenceError: could not load module 'node:fs'",
      sameGlobal: true,
      viaConstructor: "ReferenceError",
      names: [],
      hostFunctions: ["undefined", "undefined", "undefined"],
      mcp: ["call", "getPrompt", "json", "listTools", "readResource", "search", "text"],
    });
  });

  test("no prototype pollution of the host through returned objects, and no state between runs", async () => {
    const first = await run(`
      Object.prototype.polluted = "yes";
      Array.prototype.push = () => "hijacked";
      globalThis.leftover = 42;
      return JSON.parse('{"__proto__": {"polluted": "via result"}, "constructor": {"prototype": {"polluted": "via constructor"}}}');
    `);
    assert.equal(first.raw.isError, undefined, JSON.stringify(first.raw).slice(0, 400));
    assert.equal(({} as Record<string, unknown>).polluted, undefined, "the host's Object.prototype is untouched");
    assert.equal(Object.getPrototypeOf(first.reply.result), Object.prototype, "the result is a plain host object");
    const second = await run(`return [typeof globalThis.leftover, ({}).polluted === undefined, [1].push(2)]`);
    assert.deepEqual(second.reply.result, ["undefined", true, 2], "the next run starts from a fresh sandbox");
  });

  test("an infinite loop stops at the CPU bound (even when it catches errors)", async () => {
    await refused(`for (;;) { try { while (true) {} } catch (e) {} }`, "EMCP_CODE_LIMIT", /CPU time.*gateway\.codeMode\.cpuTimeMs: 2000 ms/);
  });

  test("a memory bomb stops at the memory bound", async () => {
    await refused(
      `const a = []; for (;;) a.push("x".repeat(1 << 20) + a.length);`,
      "EMCP_CODE_LIMIT",
      /memory.*gateway\.codeMode\.memoryBytes: 16777216 bytes/,
    );
  });

  test("deep recursion stops at the stack bound", async () => {
    await refused(`const f = (n) => f(n + 1) + 1; return f(0);`, "EMCP_CODE_LIMIT", /stack size.*gateway\.codeMode\.stackBytes/);
  });

  test("huge output stops at the output bound, with the logs so far; a huge result too", async () => {
    const reply = await refused(
      `for (let i = 0; ; i++) console.log("line " + i + " " + "y".repeat(100));`,
      "EMCP_CODE_LIMIT",
      /gateway\.codeMode\.maxOutputBytes: 65536 bytes/,
    );
    assert.ok(reply.logs.length > 100 && reply.logs[0]?.text.startsWith("line 0 "), `logs so far: ${reply.logs.length}`);
    await refused(`return "z".repeat(100000);`, "EMCP_CODE_LIMIT", /maxOutputBytes/);
  });

  test("more mcp.* calls than the bound end the run, even when the script catches the refusal", async () => {
    const reply = await refused(
      `for (let i = 0; i < 100; i++) { try { await mcp.call("everything", "echo", { message: "n" + i }); } catch (e) {} }`,
      "EMCP_CODE_LIMIT",
      /number of mcp\.\* calls.*gateway\.codeMode\.maxCalls: 20/,
    );
    assert.equal(reply.calls.length, 20);
  });

  test("thrown values of every kind, syntax errors and promises nothing settles are EMCP_CODE_ERROR with what happened", async () => {
    await refused(`\n\nthrow new TypeError("bad input");`, "EMCP_CODE_ERROR", /threw TypeError: bad input \(at main \(script\.js:3/);
    await refused(`throw "just a string";`, "EMCP_CODE_ERROR", /threw the string "just a string"/);
    await refused(`throw { reason: 42 };`, "EMCP_CODE_ERROR", /not an Error: \{"reason":42\}/);
    await refused(`throw null;`, "EMCP_CODE_ERROR", /not an Error: null/);
    await refused(`throw undefined;`, "EMCP_CODE_ERROR", /not an Error: undefined/);
    await refused(`throw { get message() { throw new Error("gotcha"); }, toString() { throw 1; }, toJSON() { throw 2; } };`, "EMCP_CODE_ERROR", /threw/);
    await refused(`throw new Proxy({}, { get() { throw new Error("trap"); }, ownKeys() { throw new Error("trap"); } });`, "EMCP_CODE_ERROR", /threw/);
    await refused(`return (`, "EMCP_CODE_ERROR", /did not compile: SyntaxError/);
    await refused(`await new Promise(() => {});`, "EMCP_CODE_ERROR", /awaits a promise that nothing can settle/);
    await refused(`const a = {}; a.self = a; return a;`, "EMCP_CODE_ERROR", /not JSON/);
  });

  test("a run past timeout_ms becomes a task whose result is the structured reply; wall time stops a run that waits too long", async () => {
    const promoted = await call(client, "run_code", {
      code: `console.log("before"); const r = await mcp.call("slow", "slow", { ms: 1500 }); console.log("after"); return mcp.text(r);`,
      timeout_ms: 100,
    });
    const taskId = (promoted.structuredContent as { task_id?: string } | undefined)?.task_id;
    assert.ok(taskId, JSON.stringify(promoted).slice(0, 400));
    const ended = await call(client, "get_task_result", { task_id: taskId, timeout_ms: 60_000 });
    assert.ok(!ended.isError, JSON.stringify(ended).slice(0, 600));
    const reply = ended.structuredContent as unknown as Reply;
    assert.deepEqual(
      reply.logs.map((l) => l.text),
      ["before", "after"],
    );
    assert.deepEqual(
      reply.calls.map((c) => [c.fn, c.server, c.target, c.outcome]),
      [["call", "slow", "slow", "ok"]],
    );
    const task = await call(client, "get_task", { task_id: taskId });
    assert.match(JSON.stringify(task.structuredContent), /"status":"completed"/);

    // cancel_task stops a promoted run and the call it waits on; the session goes on.
    const slow = await call(client, "run_code", { code: `await mcp.call("slow", "slow", { ms: 60000 }); return "never";`, timeout_ms: 50 });
    const slowId = (slow.structuredContent as { task_id?: string } | undefined)?.task_id;
    assert.ok(slowId, JSON.stringify(slow).slice(0, 400));
    const cancelled = await call(client, "cancel_task", { task_id: slowId });
    assert.ok(!cancelled.isError, JSON.stringify(cancelled).slice(0, 400));
    const after = await call(client, "get_task", { task_id: slowId });
    assert.match(JSON.stringify(after.structuredContent), /"status":"cancelled"/);
    // The slow call the script made was a promoted-or-not execute_tool: none of it is left working.
    const working = await call(client, "list_tasks", {});
    assert.deepEqual((working.structuredContent as { tasks: unknown[] }).tasks, [], JSON.stringify(working.structuredContent).slice(0, 400));

    const waited = await refused(
      `await mcp.call("slow", "slow", { ms: 60000 }); return "never";`,
      "EMCP_CODE_LIMIT",
      /wall time.*gateway\.codeMode\.wallTimeMs: 8000 ms/,
    );
    // The call still waiting was cancelled upstream when the run stopped.
    assert.deepEqual(
      waited.calls.map((c) => [c.fn, c.outcome]),
      [["call", "error"]],
    );
  });
});

test("gateway.codeMode.enabled false: the meta face has no run_code", async () => {
  const off = await startInProcessGateway({ gateway: { codeMode: { enabled: false } } });
  try {
    const c = await connectClient(off.url);
    const names = (await c.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("execute_tool") && !names.includes("run_code"), names.join(", "));
    const r = await call(c, "run_code", { code: "return 1" }).catch((e: unknown) => ({ isError: true, content: [{ type: "text", text: String(e) }] }));
    assert.equal(r.isError, true);
    await c.close();
  } finally {
    await off.close();
  }
});

test("a tool result larger than the script's memory ends the run at the memory bound; the gateway goes on", async () => {
  const big = { command: process.execPath, args: fixtureArgs("big-result-server"), cwd: ROOT };
  // No warm spare: the one session never takes it (ADR 0059).
  const small = await startInProcessGateway({ mcpServers: { big }, gateway: { codeMode: { memoryBytes: 1024 * 1024 }, upstream: { warmPool: 0 } } });
  try {
    const c = await connectClient(small.url);
    const ok = await call(c, "run_code", { code: `return mcp.text(await mcp.call("big", "big", { bytes: 1000 })).length;` });
    assert.equal((ok.structuredContent as { result?: unknown } | undefined)?.result, 1000, JSON.stringify(ok).slice(0, 400));
    const r = await call(c, "run_code", { code: `const r = await mcp.call("big", "big", { bytes: 15000000 }); return "got " + mcp.text(r).length;` });
    assert.equal(r.isError, true, JSON.stringify(r).slice(0, 400));
    assert.match((r.content[0] as { text: string }).text, /^EMCP_CODE_LIMIT: .*gateway\.codeMode\.memoryBytes: 1048576 bytes/);
    const again = await call(c, "execute_tool", { server: "big", tool: "echo", args: { message: "after" } });
    assert.ok(!again.isError && JSON.stringify(again.content).includes("after"));
    await c.close();
  } finally {
    await small.close();
  }
});

test("a script's calls are traced as the agent's: each upstream request is a child of the run_code request's span", async () => {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const traced = await startInProcessGateway({}, { tracerProvider });
  try {
    const c = await connectClient(traced.url);
    const r = await call(c, "run_code", {
      code: `await mcp.call("everything", "echo", { message: "one" }); await mcp.readResource("everything", "demo://resource/static/document/features.md"); return "ok";`,
    });
    assert.ok(!r.isError, JSON.stringify(r).slice(0, 400));
    const spans = exporter.getFinishedSpans();
    const run = spans.find((s) => s.name === "tools/call run_code" && s.kind === SpanKind.SERVER);
    const echo = spans.find((s) => s.name === "tools/call echo" && s.kind === SpanKind.CLIENT);
    const read = spans.find((s) => s.name.startsWith("resources/read demo://resource/static/document/features.md") && s.kind === SpanKind.CLIENT);
    assert.ok(run && echo && read, spans.map((s) => `${s.name}/${s.kind}`).join(", "));
    for (const child of [echo, read]) {
      assert.equal(child.spanContext().traceId, run.spanContext().traceId);
      assert.equal(child.parentSpanContext?.spanId, run.spanContext().spanId);
    }
    await c.close();
  } finally {
    await traced.close();
  }
});
