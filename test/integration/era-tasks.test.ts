/**
 * The tasks extension served to 2026-07-28 clients (issue 25, bridge 4; ADR
 * 0032 "Tasks across eras"): server-everything (a legacy upstream with 2025
 * tasks) on an in-process gateway's server face, driven with raw modern
 * requests and with @modelcontextprotocol/ext-tasks's client over an SDK v2
 * client pinned to 2026-07-28.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import { startInProcessGateway } from "../helpers/in-process.js";
import type { TestGateway } from "../helpers/gateway.js";
import { onlyElicitation } from "../helpers/era-setups.js";
import { liveTaskHosts, taskHostSessionId } from "../../src/http/modern-tasks.js";
import { MODERN, TASKS_EXTENSION as EXTENSION, modernRequest, pollModernTask, type ModernAnswer } from "../helpers/modern-requests.js";

const CLIENT_INFO = { name: "era-tasks-test", version: "1" };

function modern(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  capabilities?: object,
  headers?: Record<string, string>,
): Promise<ModernAnswer> {
  return modernRequest(url, method, params, { ...(capabilities ? { capabilities } : {}), ...(headers ? { headers } : {}), clientInfo: CLIENT_INFO });
}

function pollTask(url: string, taskId: string, done: (task: Record<string, any>) => boolean, what: string): Promise<Record<string, any>> {
  return pollModernTask(url, taskId, done, what, { clientInfo: CLIENT_INFO });
}

describe("the tasks extension for 2026-07-28 clients", () => {
  let gw: TestGateway;
  let meta: string;
  let server: string;
  let all: string;
  before(async () => {
    gw = await startInProcessGateway();
    meta = gw.url;
    server = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
    all = gw.url.replace(/\/mcp$/, "/all/mcp");
  });
  after(() => gw.close());

  it("server/discover advertises the extension on every face (the meta face's tasks are its promotions: era-meta.test.ts)", async () => {
    for (const url of [server, all, meta]) {
      const { body } = await modern(url, "server/discover");
      assert.deepEqual(body.result?.capabilities.extensions?.[EXTENSION], {}, `${url}: ${JSON.stringify(body.result?.capabilities)}`);
      assert.equal(body.result?.capabilities.tasks, undefined, "the 2025 tasks capability is not a 2026-07-28 one");
    }
  });

  it("a legacy upstream's task: created and stored before the answer, result inlined in tasks/get", async () => {
    const created = await modern(server, "tools/call", { name: "simulate-research-query", arguments: { topic: "tide pools" } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const task = created.body.result!;
    assert.equal(task.resultType, "task", JSON.stringify(task));
    assert.equal(typeof task.taskId, "string");
    assert.ok(["working", "input_required"].includes(task.status as string), task.status as string);
    assert.equal(typeof task.createdAt, "string");
    assert.ok(task.ttlMs === null || typeof task.ttlMs === "number");
    // Durable before the answer: in the gateway's task store, under the principal's task host, and tasks/get finds it at once.
    const stored = await gw.gateway.context.store.tasks.get(task.taskId as string);
    assert.ok(stored, "stored before the answer");
    assert.equal(stored.sessionId, taskHostSessionId({ kind: "server", server: "everything" }, undefined));
    const first = await modern(server, "tasks/get", { taskId: task.taskId });
    assert.equal(first.body.result?.taskId, task.taskId, JSON.stringify(first.body));
    assert.equal(first.body.result?.resultType, "complete");
    const done = await pollTask(server, task.taskId as string, (t) => t.status === "completed", "completed");
    assert.match(done.result.content[0].text as string, /Research Report: tide pools/);
    assert.equal(done.result._meta?.["io.modelcontextprotocol/related-task"], undefined, "no 2025 related-task metadata in the inlined result");
    assert.equal(done.resultType, "complete");
  });

  it("a 2025 side-channel elicitation surfaces as inputRequests and is answered through tasks/update", async () => {
    const created = await modern(server, "tools/call", { name: "simulate-research-query", arguments: { topic: "python", ambiguous: true } });
    const taskId = created.body.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(created.body));
    const waiting = await pollTask(server, taskId, (t) => t.status === "input_required", "input_required");
    const key = onlyElicitation(waiting, /python/);
    const update = await modern(server, "tasks/update", {
      taskId,
      inputResponses: { [key]: { action: "accept", content: { interpretation: "the snake" } } },
    });
    assert.deepEqual(update.body.result, { resultType: "complete" }, JSON.stringify(update.body));
    const done = await pollTask(server, taskId, (t) => t.status === "completed", "completed");
    assert.match(done.result.content[0].text as string, /Clarification\*\*: the snake/);
  });

  it("tasks/cancel cancels; unknown ids are -32602; tasks/result and tasks/list are -32601; Mcp-Name must name the task", async () => {
    const created = await modern(server, "tools/call", { name: "simulate-research-query", arguments: { topic: "to cancel" } });
    const taskId = created.body.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(created.body));
    const mismatch = await modern(server, "tasks/get", { taskId }, undefined, { "Mcp-Name": "another-task" });
    assert.equal(mismatch.body.error?.code, -32020, JSON.stringify(mismatch.body));
    const cancel = await modern(server, "tasks/cancel", { taskId });
    assert.deepEqual(cancel.body.result, { resultType: "complete" }, JSON.stringify(cancel.body));
    const after = await modern(server, "tasks/get", { taskId });
    assert.equal(after.body.result?.status, "cancelled", JSON.stringify(after.body));
    // Cancelling a task that ended is acknowledged as well (idempotent); the tasks methods need the extension declared.
    assert.deepEqual((await modern(server, "tasks/cancel", { taskId })).body.result, { resultType: "complete" });
    const undeclared = await modern(server, "tasks/get", { taskId }, {});
    assert.equal(undeclared.status, 400, JSON.stringify(undeclared.body));
    assert.equal(undeclared.body.error?.code, -32021);
    for (const method of ["tasks/get", "tasks/cancel"]) {
      const unknown = await modern(server, method, { taskId: "no-such-task" });
      assert.equal(unknown.body.error?.code, -32602, `${method}: ${JSON.stringify(unknown.body)}`);
    }
    const badUpdate = await modern(server, "tasks/update", { taskId, inputResponses: 12345 });
    assert.equal(badUpdate.body.error?.code, -32602, JSON.stringify(badUpdate.body));
    for (const method of ["tasks/result", "tasks/list"]) {
      const gone = await modern(server, method, { taskId });
      assert.equal(gone.body.error?.code, -32601, `${method}: ${JSON.stringify(gone.body)}`);
    }
  });

  it("without the extension a call is answered plainly, and a legacy task hint with it is tolerated", async () => {
    const plain = await modern(server, "tools/call", { name: "echo", arguments: { message: "no tasks" } }, {});
    assert.equal(plain.body.result?.resultType, "complete", JSON.stringify(plain.body));
    assert.equal(plain.body.result?.content[0].text, "Echo: no tasks");
    // With the extension and the 2025 hint: no error; either the result or a task that ends with it (SEP-2663 lets the server choose).
    const hinted = await modern(server, "tools/call", { name: "echo", arguments: { message: "hinted" }, task: { ttl: 60000 } });
    assert.ok(hinted.body.result, JSON.stringify(hinted.body));
    const result =
      hinted.body.result.resultType === "task"
        ? (await pollTask(server, hinted.body.result.taskId as string, (t) => t.status === "completed", "completed")).result
        : hinted.body.result;
    assert.equal(result.content[0].text, "Echo: hinted");
  });

  it("a finished task's result is not held by the task host (its retained state drains to zero)", async () => {
    // The aggregated face: a host of its own, used by no other test here.
    const hostId = taskHostSessionId({ kind: "all" }, undefined);
    for (let i = 0; i < 4; i++) {
      const answer = await modern(all, "tools/call", { name: "everything__echo", arguments: { message: `quick ${i}` } });
      assert.ok(answer.body.result, JSON.stringify(answer.body));
    }
    const slow = await modern(all, "tools/call", { name: "everything__simulate-research-query", arguments: { topic: "retention" } });
    const taskId = slow.body.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(slow.body));
    const done = await pollTask(all, taskId, (t) => t.status === "completed", "completed");
    assert.match(done.result.content[0].text as string, /Research Report: retention/);
    const host = (await liveTaskHosts(gw.gateway.context)).find((h) => h.session.id === hostId);
    assert.ok(host, "the aggregated face's task host is open");
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (host.retained().watching > 0 || host.retained().pending > 0)) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(host.retained(), { watching: 0, inputs: 0, pending: 0, listeners: 0, subscriptions: 0, announced: 0 });
    // A finished task's result is still there when asked again (from the durable task store, through the 2025 face).
    const again = await modern(all, "tasks/get", { taskId });
    assert.equal(again.body.result?.status, "completed", JSON.stringify(again.body));
    assert.match(again.body.result?.result.content[0].text as string, /Research Report: retention/);
    assert.deepEqual(host.retained(), { watching: 0, inputs: 0, pending: 0, listeners: 0, subscriptions: 0, announced: 0 });
  });

  it("an SDK v2 client pinned to 2026-07-28 gets simulate-research-query's task result through @modelcontextprotocol/ext-tasks", async () => {
    const client = new ModernClient(CLIENT_INFO, { versionNegotiation: { mode: { pin: MODERN } } });
    await client.connect(new ModernTransport(new URL(server)));
    const capabilities = { elicitation: {}, extensions: { [EXTENSION]: {} } };
    let nextId = 1;
    const session = createTaskSessionFromClient(client, {
      endpointId: "era-tasks",
      v2RequestFraming: { protocolVersion: MODERN, clientInfo: CLIENT_INFO, clientCapabilities: capabilities },
      // The V2 task wire shapes go out as raw modern requests (the SDK client's codecs do not know them).
      rawDispatch: async (request) => {
        const { method, params } = request as { method: string; params: Record<string, unknown> };
        const name = (params.name ?? params.taskId) as string | undefined;
        const res = await fetch(server, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            Accept: "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
            ...(name !== undefined ? { "Mcp-Name": name } : {}),
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
        });
        const body = (await res.json()) as { result?: any; error?: any };
        return body.error !== undefined ? { kind: "error", error: body.error } : { kind: "result", result: body.result };
      },
      onInputRequest: async (request) => {
        assert.equal(request.kind, "elicitation");
        return { action: "accept", content: { interpretation: "the language" } } as never;
      },
    });
    try {
      const execution = await session.callTool("simulate-research-query", { topic: "python", ambiguous: true });
      const { outcome } = await execution.settle();
      const result = resultFromTaskOutcome(outcome) as { content: Array<{ type: string; text: string }> };
      assert.match(result.content[0]!.text, /Research Report: python \(the language\)/);
    } finally {
      await session.close();
      await client.close();
    }
  });
});
