/**
 * The meta face's tasks of a 2026-07-28 caller are that principal's (issue 25;
 * ADR 0032 "The meta face across eras"): alice (an OAuth user of a real OpenID
 * provider) and the static token's operator each promote an execute_tool on
 * `/mcp`; neither can see, follow, cancel or listen to the other's task, with
 * the meta tools or with the tasks extension, and each gets their own result.
 * server-everything in process.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { OPERATOR_TOKEN, startTwoPrincipals, type TwoPrincipals } from "../helpers/era-setups.js";
import { TASKS_EXTENSION, modernRequest } from "../helpers/modern-requests.js";
import { openListen } from "../helpers/listen.js";

describe("the meta face's tasks are the principal's", { timeout: 300_000 }, () => {
  let principals: TwoPrincipals;
  let meta: string;
  const plain = (token: string) => ({ headers: { authorization: `Bearer ${token}` }, capabilities: {} });
  const extended = (token: string) => ({ headers: { authorization: `Bearer ${token}` }, capabilities: { extensions: { [TASKS_EXTENSION]: {} } } });

  before(async () => {
    principals = await startTwoPrincipals((url) => url);
    meta = principals.face;
  });
  after(() => principals?.close());

  it("alice's promotion is unknown to the operator and the operator's to alice, with the meta tools, the tasks extension and listen", async () => {
    const aliceToken = principals.aliceToken();
    const promote = async (token: string, topic: string) => {
      const call = { name: "execute_tool", arguments: { server: "everything", tool: "simulate-research-query", args: { topic }, timeout_ms: 50 } };
      const answer = await modernRequest(meta, "tools/call", call, plain(token));
      const taskId = answer.body.result?.structuredContent?.task_id as string | undefined;
      assert.ok(taskId, JSON.stringify(answer.body));
      return taskId;
    };
    const herTask = await promote(aliceToken, "her topic");
    const theirTask = await promote(OPERATOR_TOKEN, "their topic");
    for (const [token, taskId] of [
      [OPERATOR_TOKEN, herTask],
      [aliceToken, theirTask],
    ] as const) {
      for (const tool of ["get_task", "get_task_result", "cancel_task"]) {
        const refused = await modernRequest(meta, "tools/call", { name: tool, arguments: { task_id: taskId } }, plain(token));
        assert.equal(refused.body.result?.isError, true, `${tool} of another principal's task: ${JSON.stringify(refused.body)}`);
        assert.match(refused.body.result?.content[0].text as string, /^EMCP_UNKNOWN_TASK/);
      }
      for (const method of ["tasks/get", "tasks/cancel", "tasks/update"]) {
        const params = method === "tasks/update" ? { taskId, inputResponses: {} } : { taskId };
        const refused = await modernRequest(meta, method, params, extended(token));
        assert.equal(refused.body.error?.code, -32602, `${method} of another principal's task: ${JSON.stringify(refused.body)}`);
      }
      const stream = await openListen(meta, { taskIds: [herTask, theirTask] }, { headers: { authorization: `Bearer ${token}` } });
      try {
        const ack = await stream.next((m) => m.method === "notifications/subscriptions/acknowledged", "the acknowledgement");
        const own = token === aliceToken ? herTask : theirTask;
        assert.deepEqual(ack.params?.notifications, { taskIds: [own] });
      } finally {
        stream.close();
      }
    }
    // Each still follows their own (the refused cancels above cancelled nothing).
    for (const [token, taskId, topic] of [
      [aliceToken, herTask, "her topic"],
      [OPERATOR_TOKEN, theirTask, "their topic"],
    ] as const) {
      const result = await modernRequest(meta, "tools/call", { name: "get_task_result", arguments: { task_id: taskId, timeout_ms: 60_000 } }, plain(token));
      assert.match(result.body.result?.content[0].text as string, new RegExp(`Research Report: ${topic}`), JSON.stringify(result.body));
    }
  });
});
