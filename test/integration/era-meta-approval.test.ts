/**
 * A gateway-owned task on the meta face that waits for a person (issue 25,
 * bridge 4; GV-13; ADR 0032 "The meta face across eras"): a governance rule
 * sends server-everything's echo to `approve`, so a 2026-07-28 client's
 * execute_tool is a task at once. With the tasks extension it is a 2026-07-28
 * task (`working`, "Awaiting approval", then completed with the result on
 * tasks/get and its subscriptions/listen stream); without it the same kind of
 * task is followed with the meta tools in later requests (get_task,
 * get_task_result), as a 2025 client does. In process.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startApprovalGateway, type ApprovalGateway } from "../helpers/era-setups.js";
import type { TestGateway } from "../helpers/gateway.js";
import { openListen } from "../helpers/listen.js";
import { TASKS_EXTENSION, modernRequest, pollModernTask } from "../helpers/modern-requests.js";

const TOKEN = "era-meta-approval-token-0123456789";
const headers = { authorization: `Bearer ${TOKEN}` };
const EXTENDED = { headers, capabilities: { extensions: { [TASKS_EXTENSION]: {} } } };
const PLAIN = { headers, capabilities: {} };

describe("a modern client's meta call that needs approval", { timeout: 120_000 }, () => {
  let gw: TestGateway;
  let meta: string;
  let approve: ApprovalGateway["approve"];
  before(async () => {
    ({ gw, approve } = await startApprovalGateway(TOKEN));
    meta = gw.url;
  });
  after(() => gw.close());

  it("with the tasks extension: a task at once, 'Awaiting approval' until approved, then completed (tasks/get and listen)", async () => {
    const call = { name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: "meta approval" } } };
    const created = await modernRequest(meta, "tools/call", call, EXTENDED);
    const task = created.body.result!;
    assert.equal(task.resultType, "task", JSON.stringify(created.body));
    const taskId = task.taskId as string;
    const waiting = await modernRequest(meta, "tasks/get", { taskId }, EXTENDED);
    assert.equal(waiting.body.result?.status, "working", JSON.stringify(waiting.body));
    assert.match(String(waiting.body.result?.statusMessage), /Awaiting approval/);
    const stream = await openListen(meta, { taskIds: [taskId] }, { headers });
    try {
      const ack = await stream.next((m) => m.method === "notifications/subscriptions/acknowledged", "the acknowledgement");
      assert.deepEqual(ack.params?.notifications, { taskIds: [taskId] });
      await approve(taskId);
      const done = await stream.next((m) => m.method === "notifications/tasks" && m.params?.status === "completed", "completed on the stream");
      assert.equal(done.params?.result.content[0].text, "Echo: meta approval");
      const got = await pollModernTask(meta, taskId, (t) => t.status === "completed", "completed", EXTENDED);
      assert.equal(got.result.content[0].text, "Echo: meta approval");
    } finally {
      stream.close();
    }
  });

  it("without the extension: the promotion's task is followed with get_task and get_task_result in later requests", async () => {
    const call = { name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: "meta approval, plain" } } };
    const promoted = await modernRequest(meta, "tools/call", call, PLAIN);
    const taskId = promoted.body.result?.structuredContent?.task_id as string;
    assert.ok(taskId, JSON.stringify(promoted.body));
    assert.ok(promoted.body.result?.structuredContent?.approval?.id, "the promotion names the approval");
    const got = await modernRequest(meta, "tools/call", { name: "get_task", arguments: { task_id: taskId } }, PLAIN);
    assert.equal(got.body.result?.structuredContent?.task?.status, "input_required", JSON.stringify(got.body));
    await approve(taskId);
    const result = await modernRequest(meta, "tools/call", { name: "get_task_result", arguments: { task_id: taskId, timeout_ms: 60_000 } }, PLAIN);
    assert.equal(result.body.result?.content[0].text, "Echo: meta approval, plain", JSON.stringify(result.body));
  });
});
