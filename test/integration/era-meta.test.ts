/**
 * The meta face (`/mcp`) for 2026-07-28 clients (issue 25; ADR 0032 "The meta
 * face across eras"): a modern request has no session, yet a long
 * execute_tool promoted to a gateway task is followed in later requests of the
 * same caller (get_task_result, get_elicitations, respond_to_elicitation), and
 * with the tasks extension declared the meta face's tasks are 2026-07-28
 * tasks: tools/call of execute_tool answers a task, tasks/get inlines the
 * result, the elicitation it waits for is an inputRequest answered with
 * tasks/update, tasks/cancel ends it, and its status reaches
 * subscriptions/listen; a caller that hangs up cancels its call.
 * server-everything in process (simulate-research-query is a slow tool that
 * may ask which topic was meant), the slow fixture for the hang-up.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import type { TestGateway } from "../helpers/gateway.js";
import { onlyElicitation } from "../helpers/era-setups.js";
import { openListen } from "../helpers/listen.js";
import { MODERN, TASKS_EXTENSION, modernRequest, pollModernTask } from "../helpers/modern-requests.js";
import { waitFor } from "../helpers/tasks.js";
import { taskHostSessionId } from "../../src/http/modern-tasks.js";

const CLIENT_INFO = { name: "era-meta-test", version: "1" };
/** A modern client of the meta face that does not declare the tasks extension: meta tools only. */
const PLAIN = { capabilities: { elicitation: {} }, clientInfo: CLIENT_INFO };
const EXTENDED = { capabilities: { elicitation: {}, extensions: { [TASKS_EXTENSION]: {} } }, clientInfo: CLIENT_INFO };

type ToolResult = { content: Array<{ type: string; text: string }>; structuredContent?: Record<string, any>; isError?: boolean };

function texts(result: ToolResult): string {
  return result.content.map((c) => c.text).join("\n");
}

describe("the meta face for 2026-07-28 clients", { timeout: 180_000 }, () => {
  let gw: TestGateway;
  let meta: string;
  before(async () => {
    gw = await startInProcessGateway();
    meta = gw.url;
  });
  after(() => gw.close());

  async function metaCall(name: string, args: Record<string, unknown>, o = PLAIN): Promise<ToolResult> {
    const answer = await modernRequest(meta, "tools/call", { name, arguments: args }, o);
    assert.ok(answer.body.result, `${name}: ${JSON.stringify(answer.body)}`);
    return answer.body.result as ToolResult;
  }

  it("an SDK v2 client's promoted execute_tool is followed by its later requests (get_task, get_task_result)", async () => {
    const client = new ModernClient(CLIENT_INFO, { versionNegotiation: { mode: { pin: MODERN } } });
    await client.connect(new ModernTransport(new URL(meta)));
    try {
      const promoted = (await client.callTool({
        name: "execute_tool",
        arguments: { server: "everything", tool: "simulate-research-query", args: { topic: "kelp forests" }, timeout_ms: 50 },
      })) as ToolResult;
      const taskId = promoted.structuredContent?.task_id as string;
      assert.ok(taskId, `promoted to a task: ${texts(promoted)}`);
      // Stored under the caller's meta host (one per face and principal), not under a session that ended with the request.
      const stored = await gw.gateway.context.store.tasks.get(taskId);
      assert.equal(stored?.sessionId, taskHostSessionId({ kind: "meta" }, undefined), JSON.stringify(stored));
      const got = (await client.callTool({ name: "get_task", arguments: { task_id: taskId } })) as ToolResult;
      assert.equal(got.isError, undefined, texts(got));
      assert.equal(got.structuredContent?.task?.task_id, taskId);
      const result = (await client.callTool({ name: "get_task_result", arguments: { task_id: taskId, timeout_ms: 60_000 } })) as ToolResult;
      assert.equal(result.isError, undefined, texts(result));
      assert.match(texts(result), /Research Report: kelp forests/);
    } finally {
      await client.close();
    }
  });

  it("an elicitation of a promoted call waits for a later request: get_elicitations, then respond_to_elicitation", async () => {
    const promoted = await metaCall("execute_tool", {
      server: "everything",
      tool: "simulate-research-query",
      args: { topic: "python", ambiguous: true },
      timeout_ms: 50,
    });
    const taskId = promoted.structuredContent?.task_id as string;
    assert.ok(taskId, texts(promoted));
    let requestId: string | undefined;
    const deadline = Date.now() + 60_000;
    while (requestId === undefined && Date.now() < deadline) {
      const listed = await metaCall("get_elicitations", {});
      const found = (listed.structuredContent?.elicitations as Array<Record<string, any>> | undefined)?.find((e) =>
        String(e.params?.message ?? e.message).includes("python"),
      );
      requestId = (found?.request_id ?? found?.requestId) as string | undefined;
      if (requestId === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(requestId, "the elicitation is pending for the caller");
    const answered = await metaCall("respond_to_elicitation", { request_id: requestId, action: "accept", content: { interpretation: "snake" } });
    assert.equal(answered.isError, undefined, texts(answered));
    const result = await metaCall("get_task_result", { task_id: taskId, timeout_ms: 60_000 });
    assert.match(texts(result), /Clarification\*\*: snake/);
  });

  it("with the tasks extension: execute_tool answers a task; tasks/get inlines the result; the status reaches subscriptions/listen", async () => {
    const discover = await modernRequest(meta, "server/discover", {}, EXTENDED);
    assert.deepEqual(discover.body.result?.capabilities.extensions?.[TASKS_EXTENSION], {}, JSON.stringify(discover.body.result?.capabilities));
    const created = await modernRequest(
      meta,
      "tools/call",
      { name: "execute_tool", arguments: { server: "everything", tool: "simulate-research-query", args: { topic: "tide pools" } } },
      EXTENDED,
    );
    const task = created.body.result!;
    assert.equal(task.resultType, "task", JSON.stringify(created.body));
    const taskId = task.taskId as string;
    const stream = await openListen(meta, { taskIds: [taskId] });
    try {
      const ack = await stream.next((m) => m.method === "notifications/subscriptions/acknowledged", "the acknowledgement");
      assert.deepEqual(ack.params?.notifications, { taskIds: [taskId] });
      const done = await pollModernTask(meta, taskId, (t) => t.status === "completed", "completed", EXTENDED);
      assert.match(done.result.content[0].text as string, /Research Report: tide pools/);
      assert.equal(done.result.resultType, "complete");
      const heard = await stream.next((m) => m.method === "notifications/tasks" && m.params?.status === "completed", "completed on the stream");
      assert.equal(heard.params?.taskId, taskId);
      assert.match(JSON.stringify(heard.params?.result), /Research Report: tide pools/);
    } finally {
      stream.close();
    }
    // The same task through the meta tools, in a later request without the extension.
    const viaMeta = await metaCall("get_task_result", { task_id: taskId, timeout_ms: 1000 });
    assert.match(texts(viaMeta), /Research Report: tide pools/);
  });

  it("with the tasks extension: the elicitation the task waits for is an inputRequest answered by tasks/update; tasks/cancel ends a task", async () => {
    const created = await modernRequest(
      meta,
      "tools/call",
      { name: "execute_tool", arguments: { server: "everything", tool: "simulate-research-query", args: { topic: "python", ambiguous: true } } },
      EXTENDED,
    );
    const taskId = created.body.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(created.body));
    const waiting = await pollModernTask(meta, taskId, (t) => t.status === "input_required", "input_required", EXTENDED);
    const key = onlyElicitation(waiting, /python/);
    const update = await modernRequest(
      meta,
      "tasks/update",
      { taskId, inputResponses: { [key]: { action: "accept", content: { interpretation: "programming" } } } },
      EXTENDED,
    );
    assert.deepEqual(update.body.result, { resultType: "complete" }, JSON.stringify(update.body));
    const done = await pollModernTask(meta, taskId, (t) => t.status === "completed", "completed", EXTENDED);
    assert.match(done.result.content[0].text as string, /Clarification\*\*: programming/);

    const other = await modernRequest(
      meta,
      "tools/call",
      { name: "execute_tool", arguments: { server: "everything", tool: "simulate-research-query", args: { topic: "to cancel" } } },
      EXTENDED,
    );
    const cancelId = other.body.result?.taskId as string;
    assert.ok(cancelId, JSON.stringify(other.body));
    const cancel = await modernRequest(meta, "tasks/cancel", { taskId: cancelId }, EXTENDED);
    assert.deepEqual(cancel.body.result, { resultType: "complete" }, JSON.stringify(cancel.body));
    const cancelled = await modernRequest(meta, "tasks/get", { taskId: cancelId }, EXTENDED);
    assert.equal(cancelled.body.result?.status, "cancelled", JSON.stringify(cancelled.body));
    const unknown = await modernRequest(meta, "tasks/get", { taskId: "no-such-task" }, EXTENDED);
    assert.equal(unknown.body.error?.code, -32602, JSON.stringify(unknown.body));
  });
});

describe("a 2026-07-28 caller hanging up on the meta face", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  before(async () => {
    // Shared: the upstream connection outlives any one request, and the host session outlives it too, so only a cancel ends the call.
    gw = await startInProcessGateway({ mcpServers: { slow: { ...inProcess("slow"), sharing: "shared" } } });
  });
  after(() => gw.close());

  const slowCalls = async (): Promise<{ running: number; cancelled: number }> => {
    const answer = await modernRequest(gw.url, "tools/call", { name: "execute_tool", arguments: { server: "slow", tool: "slow-calls", args: {} } }, PLAIN);
    return JSON.parse(answer.body.result?.content[0].text as string) as { running: number; cancelled: number };
  };

  it("closing an execute_tool's response cancels the upstream call, and nothing is promoted", async () => {
    const abort = new AbortController();
    const args = { server: "slow", tool: "slow", args: { ms: 600_000 }, timeout_ms: 600_000 };
    const call = modernRequest(
      gw.url,
      "tools/call",
      { name: "execute_tool", arguments: args },
      { capabilities: {}, clientInfo: CLIENT_INFO, signal: abort.signal },
    ).catch((err: unknown) => err);
    await waitFor(async () => ((await slowCalls()).running === 1 ? true : undefined), "the slow call runs upstream");
    abort.abort();
    await call;
    await waitFor(async () => {
      const now = await slowCalls();
      return now.running === 0 && now.cancelled === 1 ? true : undefined;
    }, "the upstream call is cancelled");
    const tasks = await modernRequest(gw.url, "tools/call", { name: "list_tasks", arguments: { include_completed: true } }, PLAIN);
    assert.deepEqual(tasks.body.result?.structuredContent?.tasks, [], JSON.stringify(tasks.body));
  });
});
