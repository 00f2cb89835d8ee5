/**
 * Tasks-extension tasks belong to the principal that made them (issue 25,
 * bridge 4; ADR 0032 "Tasks across eras"): a 2026-07-28 request has no
 * session, so alice's task (an OAuth user of a real OpenID provider) is
 * unknown to the static token's operator on the same face, and theirs to her;
 * each sees and ends only their own. server-everything in process.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { OPERATOR_TOKEN, startTwoPrincipals, type TwoPrincipals } from "../helpers/era-setups.js";
import { modernRequest, pollModernTask } from "../helpers/modern-requests.js";
import { openListen } from "../helpers/listen.js";

describe("tasks-extension tasks are the principal's", { timeout: 300_000 }, () => {
  let principals: TwoPrincipals;
  let face: string;
  const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

  before(async () => {
    principals = await startTwoPrincipals((url) => `${new URL(url).origin}/servers/everything/mcp`);
    face = principals.face;
  });
  after(() => principals?.close());

  it("alice's task is unknown to the operator and the operator's to alice; each ends their own", async () => {
    const aliceToken = principals.aliceToken();
    const call = { name: "simulate-research-query", arguments: { topic: "whose task" } };
    const hers = await modernRequest(face, "tools/call", call, as(aliceToken));
    const herTask = hers.body.result?.taskId as string;
    assert.ok(herTask, JSON.stringify(hers.body));
    const theirs = await modernRequest(face, "tools/call", call, as(OPERATOR_TOKEN));
    const theirTask = theirs.body.result?.taskId as string;
    assert.ok(theirTask, JSON.stringify(theirs.body));
    // Across principals: -32602, as for a task that does not exist (no hint that it does).
    for (const [token, taskId] of [
      [OPERATOR_TOKEN, herTask],
      [aliceToken, theirTask],
    ] as const) {
      for (const method of ["tasks/get", "tasks/cancel", "tasks/update"]) {
        const params = method === "tasks/update" ? { taskId, inputResponses: {} } : { taskId };
        const refused = await modernRequest(face, method, params, as(token));
        assert.equal(refused.body.error?.code, -32602, `${method} of another principal's task: ${JSON.stringify(refused.body)}`);
      }
    }
    // Each still sees and ends their own (the refused cancels above cancelled nothing).
    const mine = await modernRequest(face, "tasks/get", { taskId: herTask }, as(aliceToken));
    assert.ok(["working", "completed"].includes(mine.body.result?.status as string), JSON.stringify(mine.body));
    assert.deepEqual((await modernRequest(face, "tasks/cancel", { taskId: theirTask }, as(OPERATOR_TOKEN))).body.result, { resultType: "complete" });
    const done = await pollModernTask(face, herTask, (t) => t.status === "completed", "completed", as(aliceToken));
    assert.match(done.result.content[0].text as string, /Research Report: whose task/);
    const cancelled = await modernRequest(face, "tasks/get", { taskId: theirTask }, as(OPERATOR_TOKEN));
    assert.equal(cancelled.body.result?.status, "cancelled", JSON.stringify(cancelled.body));
  });

  it("subscriptions/listen carries each principal's own task statuses only", async () => {
    const aliceToken = principals.aliceToken();
    const call = { name: "simulate-research-query", arguments: { topic: "whose status" } };
    const herTask = (await modernRequest(face, "tools/call", call, as(aliceToken))).body.result?.taskId as string;
    const theirTask = (await modernRequest(face, "tools/call", call, as(OPERATOR_TOKEN))).body.result?.taskId as string;
    assert.ok(herTask && theirTask);
    const hers = await openListen(face, { taskIds: [herTask, theirTask] }, as(aliceToken));
    const theirs = await openListen(face, { taskIds: [herTask, theirTask] }, as(OPERATOR_TOKEN));
    try {
      const ack = (m: { method?: string }) => m.method === "notifications/subscriptions/acknowledged";
      assert.deepEqual((await hers.next(ack, "alice's acknowledgement")).params?.notifications, { taskIds: [herTask] });
      assert.deepEqual((await theirs.next(ack, "the operator's acknowledgement")).params?.notifications, { taskIds: [theirTask] });
      await modernRequest(face, "tasks/cancel", { taskId: theirTask }, as(OPERATOR_TOKEN));
      await theirs.next(
        (m) => m.method === "notifications/tasks" && m.params?.taskId === theirTask && m.params?.status === "cancelled",
        "the operator's cancelled task",
      );
      const done = await hers.next((m) => m.method === "notifications/tasks" && m.params?.status === "completed", "alice's completed task", 60_000);
      assert.equal(done.params?.taskId, herTask);
      assert.match(done.params?.result.content[0].text as string, /Research Report: whose status/);
      // Neither stream ever carried the other principal's task.
      assert.ok(!hers.messages.some((m) => m.params?.taskId === theirTask), JSON.stringify(hers.messages));
      assert.ok(!theirs.messages.some((m) => m.params?.taskId === herTask), JSON.stringify(theirs.messages));
    } finally {
      hers.close();
      theirs.close();
    }
  });
});
