/**
 * A gateway-owned task of a 2026-07-28 client that waits for a person
 * (issue 25, bridges 4 and 5; seed 002, GV-13): a governance rule sends
 * server-everything's echo to `approve`, so the call becomes a task before
 * anything goes upstream. The modern client sees it through the tasks
 * extension — `working` with "Awaiting approval" (there is nothing it can
 * answer: a person decides) — and, once approved, completed with the result,
 * on tasks/get and on its subscriptions/listen stream. In process.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startApprovalGateway, type ApprovalGateway } from "../helpers/era-setups.js";
import type { TestGateway } from "../helpers/gateway.js";
import { openListen } from "../helpers/listen.js";
import { modernRequest, pollModernTask } from "../helpers/modern-requests.js";

const TOKEN = "era-approval-token-0123456789";
const auth = { headers: { authorization: `Bearer ${TOKEN}` } };

describe("a modern client's call that needs approval", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let face: string;
  let approve: ApprovalGateway["approve"];
  before(async () => {
    ({ gw, approve } = await startApprovalGateway(TOKEN));
    face = gw.url.replace(/\/mcp$/, "/servers/everything/mcp");
  });
  after(() => gw.close());

  it("is a task at once, working 'Awaiting approval' until a person approves, then completed with the result (tasks/get and listen)", async () => {
    const created = await modernRequest(face, "tools/call", { name: "echo", arguments: { message: "modern approval" } }, auth);
    const task = created.body.result!;
    assert.equal(task.resultType, "task", JSON.stringify(created.body));
    const taskId = task.taskId as string;
    const waiting = await modernRequest(face, "tasks/get", { taskId }, auth);
    assert.equal(waiting.body.result?.status, "working", JSON.stringify(waiting.body));
    assert.match(String(waiting.body.result?.statusMessage), /Awaiting approval/);
    const stream = await openListen(face, { taskIds: [taskId] }, auth);
    try {
      const ack = await stream.next((m) => m.method === "notifications/subscriptions/acknowledged", "the acknowledgement");
      assert.deepEqual(ack.params?.notifications, { taskIds: [taskId] });
      await approve(taskId);
      const done = await stream.next((m) => m.method === "notifications/tasks" && m.params?.status === "completed", "completed on the stream");
      assert.equal(done.params?.result.content[0].text, "Echo: modern approval");
      const got = await pollModernTask(face, taskId, (t) => t.status === "completed", "completed", auth);
      assert.equal(got.result.content[0].text, "Echo: modern approval");
    } finally {
      stream.close();
    }
  });
});
