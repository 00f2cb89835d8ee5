/**
 * One-shot expiry never drops work (ADR 0009, decision 6), in an in-process
 * gateway with the slow-server fixture (in process too: test/helpers/in-process.ts) and raw HTTP clients that never open
 * a GET stream: a session that promoted a call within its first exchange
 * keeps its task past `sessions.oneShotIdleMs` and its client gets the result
 * when it comes back; a session end that drops tasks logs `task_dropped`.
 * The one-shot deadline is observed, not slept: a plain one-shot session
 * opened later than the session under test expiring proves the sweep passed
 * the deadline of the earlier one.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { createLogger, sessionHash } from "../../src/logging.js";
import type { TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { MCP_POST_HEADERS, jsonRpcMessages, pollFor, rawInitialize, rawRequest } from "../helpers/core-extra.js";

/** Log lines as parsed JSON. */
class LogSink extends Writable {
  readonly lines: Array<Record<string, unknown>> = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) this.lines.push(JSON.parse(line) as Record<string, unknown>);
    done();
  }
}

let gw: TestGateway | undefined;
const sink = new LogSink();
after(() => gw?.close());

async function gateway(): Promise<TestGateway> {
  gw ??= await startInProcessGateway(
    {
      mcpServers: { slow: inProcess("slow") },
      // No request of these tests comes after the first exchange: every session stays a one-shot candidate.
      gateway: { logLevel: "info", upstream: { warmPool: 0 }, sessions: { firstExchangeMs: 600_000, oneShotIdleMs: 500, sweepIntervalMs: 50 } },
    },
    { logger: createLogger("info", sink) },
  );
  return gw;
}

let nextId = 10;
/** One JSON-RPC request of a session over a plain POST (no GET stream is ever opened); its response message. */
async function post(url: string, sessionId: string, method: string, params: Record<string, unknown>) {
  const res = await rawRequest(url, {
    headers: { ...MCP_POST_HEADERS, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
  });
  return { status: res.status, message: res.status === 200 ? jsonRpcMessages(res).find((m) => "result" in m || "error" in m) : undefined, body: res.body };
}

/** initialize + notifications/initialized, as inspector-cli does. */
async function open(url: string): Promise<string> {
  const id = await rawInitialize(url);
  const res = await rawRequest(url, {
    headers: { ...MCP_POST_HEADERS, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  assert.equal(res.status, 202);
  return id;
}

function text(message: Record<string, any> | undefined): string {
  return ((message?.result?.content ?? []) as Array<{ text?: string }>).map((c) => c.text ?? "").join("\n");
}

/** Waits until the one-shot deadline of every session whose last request is older than now has passed (see the header). */
async function oneShotDeadlinePassed(g: TestGateway): Promise<void> {
  const control = await open(g.url);
  await pollFor(async () => (g.gateway.context.sessions.get(control) === undefined ? true : undefined), "a later plain one-shot session to expire");
}

describe("one-shot expiry keeps sessions with work", { timeout: 120_000 }, () => {
  test("a call promoted within the first exchange survives oneShotIdleMs; the client that comes back gets its result", async () => {
    const g = await gateway();
    const sessions = g.gateway.context.sessions;
    const id = await open(g.url);
    const promoted = await post(g.url, id, "tools/call", {
      name: "execute_tool",
      arguments: { server: "slow", tool: "slow", args: { ms: 1_500 }, timeout_ms: 50 },
    });
    const taskId = (promoted.message?.result?.structuredContent?.proxy_task as { task_id?: string } | undefined)?.task_id;
    assert.ok(taskId, `promoted to a task: ${promoted.body}`);

    await oneShotDeadlinePassed(g);
    assert.ok(sessions.get(id), "a session with a working task is not one-shot");
    const session = sessions.get(id)!;
    await pollFor(async () => ((await session.tasks.get(taskId)).status === "completed" ? true : undefined), "the task to complete");
    await oneShotDeadlinePassed(g);
    assert.ok(sessions.get(id), "nor one whose task ended with a result the client has not fetched");

    const back = await post(g.url, id, "tools/call", { name: "get_task_result", arguments: { task_id: taskId } });
    assert.equal(back.status, 200, `the client that comes back finds its session: ${back.body}`);
    assert.match(text(back.message), /slept 1500ms/);
  });

  test("a session end that drops tasks logs task_dropped with counts by status and the session hash", async () => {
    const g = await gateway();
    const id = await open(g.url);
    const promoted = await post(g.url, id, "tools/call", {
      name: "execute_tool",
      arguments: { server: "slow", tool: "slow", args: { ms: 60_000 }, timeout_ms: 50 },
    });
    assert.match(text(promoted.message), /timeout/i);
    const del = await rawRequest(g.url, { method: "DELETE", headers: { "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" } });
    assert.equal(del.status, 200);
    const line = await pollFor(
      async () => sink.lines.find((l) => l.msg === "task_dropped" && l.sessionHash === sessionHash(id)),
      "a task_dropped log line for the deleted session",
    );
    assert.equal(line.level, 40, "at warn");
    assert.deepEqual(line.byStatus, { working: 1 });
    assert.equal(line.dropped, 1);
    assert.equal(line.reason, "client closed the session");
  });

  test("idle expiry and a shutdown with a memory store log task_dropped too", async () => {
    const logs = new LogSink();
    const own = await startInProcessGateway(
      {
        mcpServers: { slow: inProcess("slow") },
        gateway: { logLevel: "info", upstream: { warmPool: 0 }, sessions: { idleTimeoutMs: 8_000, sweepIntervalMs: 50 } },
      },
      { logger: createLogger("info", logs) },
    );
    try {
      const promote = async () => {
        const id = await open(own.url);
        const r = await post(own.url, id, "tools/call", {
          name: "execute_tool",
          arguments: { server: "slow", tool: "slow", args: { ms: 120_000 }, timeout_ms: 50 },
        });
        assert.match(text(r.message), /timeout/i);
        return id;
      };
      const idle = await promote();
      const idleLine = await pollFor(
        async () => logs.lines.find((l) => l.msg === "task_dropped" && l.sessionHash === sessionHash(idle)),
        "task_dropped for the idle session",
      );
      assert.equal(idleLine.reason, "idle timeout");
      assert.deepEqual(idleLine.byStatus, { working: 1 });
      const kept = await promote();
      await own.close();
      const shutdownLine = logs.lines.find((l) => l.msg === "task_dropped" && l.sessionHash === sessionHash(kept));
      assert.equal(shutdownLine?.reason, "gateway shutdown", "a memory store loses its tasks at shutdown: said so");
    } finally {
      await own.close();
    }
  });
});
