/**
 * The one error boundary (src/errors.ts): what a client reads for each kind
 * of failure. The wire checks go through a real SDK Server and Client linked
 * in-process, so they show exactly what the SDK sends for what we throw.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { pino } from "pino";
import {
  ErrorCodes,
  GatewayError,
  rpcErrorFromRecord,
  rpcErrorRecordOf,
  toGatewayError,
  toJsonRpcError,
  toToolErrorText,
  upstreamCallError,
} from "../../src/errors.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** What an SDK client receives when a server handler throws `toJsonRpcError(err)`. */
async function overTheWire(err: unknown): Promise<{ code: number; message: string; data: unknown }> {
  const server = new Server({ name: "boundary", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(CallToolRequestSchema, () => {
    throw toJsonRpcError(err);
  });
  const client = new Client({ name: "probe", version: "1.0.0" });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(a), client.connect(b)]);
  try {
    await client.callTool({ name: "x", arguments: {} });
    assert.fail("the call should have failed");
  } catch (e) {
    assert.ok(e instanceof McpError, String(e));
    // The SDK client prefixes "MCP error <code>: " to what the server sent.
    const prefix = `MCP error ${e.code}: `;
    assert.ok(e.message.startsWith(prefix), e.message);
    return { code: e.code, message: e.message.slice(prefix.length), data: e.data };
  } finally {
    await client.close();
    await server.close();
  }
}

/** A logger whose error-level records are collected. */
function capturingLogger() {
  const records: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      records.push(JSON.parse(chunk.toString("utf8")) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: "error" }, sink), records };
}

describe("toJsonRpcError: an upstream's own error passes through verbatim", () => {
  test("a raw McpError from the SDK client: code, message (without the SDK's prefix) and data", async () => {
    const upstream = new McpError(-32042, "URL elicitation required", { elicitations: [{ mode: "url", url: "https://example.com" }] });
    const wire = await overTheWire(upstream);
    assert.deepEqual(wire, { code: -32042, message: "URL elicitation required", data: { elicitations: [{ mode: "url", url: "https://example.com" }] } });
  });

  test("a GatewayError(UPSTREAM_ERROR) wrapping an upstream answer maps back to that answer", async () => {
    const upstream = new McpError(ErrorCode.InvalidParams, "bad x", { field: "x" });
    const wrapped = upstreamCallError("everything", "echo", upstream);
    assert.equal(wrapped.code, ErrorCodes.UPSTREAM_ERROR);
    assert.equal(wrapped.cause, upstream, "the upstream error is kept as cause");
    assert.deepEqual(await overTheWire(wrapped), { code: ErrorCode.InvalidParams, message: "bad x", data: { field: "x" } });
  });

  test("a task record's upstream error round-trips unchanged (tasks/result of a failed call)", async () => {
    const upstream = new McpError(-32000, "tool exploded", { why: "fixture" });
    const record = rpcErrorRecordOf(upstream);
    assert.deepEqual(record, { code: -32000, message: "tool exploded", data: { why: "fixture" } });
    const replayed = new GatewayError(ErrorCodes.UPSTREAM_ERROR, "task T failed", { cause: rpcErrorFromRecord(record) });
    assert.deepEqual(await overTheWire(replayed), { code: -32000, message: "tool exploded", data: { why: "fixture" } });
  });

  test("a timeout reads as the SDK client saw it; a dropped connection is the gateway's EMCP_UPSTREAM_UNAVAILABLE", async () => {
    assert.equal(rpcErrorRecordOf(new Error("not JSON-RPC")), undefined);
    assert.equal(
      rpcErrorRecordOf(toJsonRpcError(new GatewayError(ErrorCodes.CLOSED, "closing"))),
      undefined,
      "the gateway's own replies are not upstream errors",
    );
    const timedOut = upstreamCallError("slow", "sleep", new McpError(ErrorCode.RequestTimeout, "Request timed out"));
    assert.match(toToolErrorText(timedOut), /^EMCP_UPSTREAM_ERROR: upstream 'slow' did not answer 'sleep' in time/);
    assert.deepEqual(await overTheWire(timedOut), { code: ErrorCode.RequestTimeout, message: "Request timed out", data: undefined });
    const closed = upstreamCallError("slow", "sleep", new McpError(ErrorCode.ConnectionClosed, "Connection closed"));
    assert.equal(closed.code, ErrorCodes.UPSTREAM_UNAVAILABLE);
    assert.match((await overTheWire(closed)).message, /^EMCP_UPSTREAM_UNAVAILABLE: upstream 'slow' closed the connection during 'sleep'/);
  });

  test("rpcCode pins the gateway's own answer even when the cause is an upstream answer", async () => {
    const err = new GatewayError(ErrorCodes.UPSTREAM_ERROR, "could not ask upstream 'u' about task T; retry tasks/get", {
      cause: new McpError(ErrorCode.InternalError, "upstream task U-123 is broken"),
      rpcCode: ErrorCode.InternalError,
      details: { taskId: "T" },
    });
    assert.deepEqual(await overTheWire(err), {
      code: ErrorCode.InternalError,
      message: "EMCP_UPSTREAM_ERROR: could not ask upstream 'u' about task T; retry tasks/get",
      data: { taskId: "T", code: "EMCP_UPSTREAM_ERROR" },
    });
  });
});

describe("toJsonRpcError: the gateway's own errors", () => {
  test("bad input, unknown names and tasks are InvalidParams with `EMCP_X: message` and data { ...details, code }", async () => {
    const cases: Array<[GatewayError, number]> = [
      [new GatewayError(ErrorCodes.UNKNOWN_TASK, "Task not found: T1", { details: { taskId: "T1" } }), ErrorCode.InvalidParams],
      [new GatewayError(ErrorCodes.TASK_ENDED, "Cannot cancel task in terminal status: completed"), ErrorCode.InvalidParams],
      [new GatewayError(ErrorCodes.BAD_ARGUMENTS, "invalid cursor 'zz'"), ErrorCode.InvalidParams],
      [new GatewayError(ErrorCodes.UNKNOWN_TOOL, "unknown tool 'echo'"), ErrorCode.InvalidParams],
      [new GatewayError(ErrorCodes.UPSTREAM_UNAVAILABLE, "upstream 'x' is unavailable"), ErrorCode.InternalError],
      [new GatewayError(ErrorCodes.LIMIT_REACHED, "too many", { rpcCode: ErrorCode.InvalidRequest }), ErrorCode.InvalidRequest],
    ];
    for (const [err, code] of cases) {
      const wire = await overTheWire(err);
      assert.equal(wire.code, code, err.code);
      assert.equal(wire.message, `${err.code}: ${err.message}`);
      assert.deepEqual(wire.data, { ...err.details, code: err.code });
    }
  });

  test("details cannot overwrite the code in data", () => {
    const reply = toJsonRpcError(new GatewayError(ErrorCodes.BAD_ARGUMENTS, "x", { details: { code: "spoofed", n: 1 } }));
    assert.deepEqual(reply.data, { code: "EMCP_BAD_ARGUMENTS", n: 1 });
  });

  test("anything unknown is -32603 EMCP_INTERNAL, logged as an error with its cause", async () => {
    const { logger, records } = capturingLogger();
    const bug = new TypeError("cannot read properties of undefined (reading 'x')");
    const reply = toJsonRpcError(bug, logger);
    assert.equal(reply.code, ErrorCode.InternalError);
    assert.match(reply.message, /^EMCP_INTERNAL: cannot read properties of undefined/);
    assert.deepEqual(reply.data, { code: "EMCP_INTERNAL" });
    assert.equal(records.length, 1);
    assert.equal(records[0]?.msg, "internal_error");
    assert.match(JSON.stringify(records[0]?.err), /cannot read properties of undefined/);
    assert.equal((await overTheWire("a thrown string")).message.startsWith("EMCP_INTERNAL: a thrown string"), true);
  });

  test("mapping is idempotent: a reply that meets the boundary again is returned as is", () => {
    const once = toJsonRpcError(new GatewayError(ErrorCodes.UNKNOWN_TASK, "Task not found: T"));
    assert.equal(toJsonRpcError(once), once);
    const upstream = toJsonRpcError(new McpError(-32001, "MCP error -32001: doubly prefixed upstream text"));
    assert.equal(upstream.message, "MCP error -32001: doubly prefixed upstream text", "only the SDK client's own prefix goes");
    assert.equal(toJsonRpcError(upstream).message, upstream.message);
  });
});

describe("toToolErrorText: the meta face's text, from the same mapping", () => {
  test("gateway errors keep their code; a reply made from one never reads as EMCP_UPSTREAM_ERROR", () => {
    const err = new GatewayError(ErrorCodes.UNKNOWN_SERVER, "no server named 'nope'");
    assert.equal(toToolErrorText(err), "EMCP_UNKNOWN_SERVER: no server named 'nope'");
    assert.equal(toToolErrorText(toJsonRpcError(err)), "EMCP_UNKNOWN_SERVER: no server named 'nope'");
    assert.equal(toToolErrorText(toJsonRpcError("boom")), toToolErrorText(toGatewayError(toJsonRpcError("boom"))));
    assert.match(toToolErrorText(toJsonRpcError("boom")), /^EMCP_INTERNAL: boom/);
  });

  test("an upstream's McpError is EMCP_UPSTREAM_ERROR (a dropped connection EMCP_UPSTREAM_UNAVAILABLE), the McpError kept as cause", () => {
    const answered = new McpError(ErrorCode.InvalidParams, "bad x");
    assert.match(toToolErrorText(answered), /^EMCP_UPSTREAM_ERROR: the upstream answered with error -32602: MCP error -32602: bad x$/);
    assert.equal(toGatewayError(answered).cause, answered);
    assert.match(toToolErrorText(new McpError(ErrorCode.ConnectionClosed, "Connection closed")), /^EMCP_UPSTREAM_UNAVAILABLE: /);
  });

  test("unknown failures are EMCP_INTERNAL, logged when a logger is given", () => {
    const { logger, records } = capturingLogger();
    const bug = new RangeError("off by one");
    assert.match(toToolErrorText(bug, logger), /^EMCP_INTERNAL: off by one/);
    assert.equal(toGatewayError(bug).cause, bug);
    assert.equal(records.length, 1);
  });
});

describe("GatewayError", () => {
  test("keeps its cause (ES2022), details and rpcCode; no cause means no `cause` property", () => {
    const io = new Error("ENOENT");
    const err = new GatewayError(ErrorCodes.CONFIG_INVALID, "cannot read config", { cause: io, details: { file: "x.json" } });
    assert.equal(err.cause, io);
    assert.deepEqual(err.details, { file: "x.json" });
    assert.equal(err.rpcCode, undefined);
    assert.equal(err.name, "GatewayError");
    assert.ok(!("cause" in new GatewayError(ErrorCodes.CLOSED, "closing")));
  });

  test("only src/errors.ts knows the SDK's error class (every other module throws GatewayError)", () => {
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(file);
        else if (file.endsWith(".ts") && /\bMcpError\b/.test(readFileSync(file, "utf8"))) offenders.push(path.relative(ROOT, file));
      }
    };
    walk(path.join(ROOT, "src"));
    assert.deepEqual(offenders, ["src/errors.ts"]);
  });
});
