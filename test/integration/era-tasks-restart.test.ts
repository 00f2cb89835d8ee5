/**
 * A 2026-07-28 client's tasks across a gateway restart (issue 25, "Durability";
 * ADR 0032 "Tasks across eras"): the real CLI on a SQLite file, server-everything
 * over Streamable HTTP as the upstream. After SIGTERM and a new start on the
 * same port and file, the caller's task host is the same session id again, so
 * its tasks answer tasks/get: a result stored before the restart is inlined,
 * a gateway-owned call that was running reads failed (its result is unknown),
 * and an upstream task (simulate-research-query) goes on and its result comes.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startRestartingGateway, type RestartingGateway } from "../helpers/era-setups.js";
import { modernRequest, pollModernTask } from "../helpers/modern-requests.js";

describe("tasks-extension tasks across a restart", { timeout: 300_000 }, () => {
  let gateway: RestartingGateway;
  let face: string;

  before(async () => {
    gateway = await startRestartingGateway("era-tasks-restart");
    face = `${gateway.base}/servers/remote/mcp`;
  });
  after(() => gateway?.close());

  it("a stored result, a running gateway call and an upstream task answer tasks/get after SIGTERM and a new start", async () => {
    const start = async (name: string, args: Record<string, unknown>) => {
      const created = await modernRequest(face, "tools/call", { name, arguments: args });
      assert.equal(created.body.result?.resultType, "task", `${name}: ${JSON.stringify(created.body)}`);
      return created.body.result.taskId as string;
    };
    const research = await start("simulate-research-query", { topic: "restarts" });
    const long = await start("trigger-long-running-operation", { duration: 120, steps: 120 });
    const sum = await start("trigger-long-running-operation", { duration: 1, steps: 1 });
    await pollModernTask(face, sum, (t) => t.status === "completed", "completed");

    await gateway.restart();

    const done = await modernRequest(face, "tasks/get", { taskId: sum });
    assert.equal(done.body.result?.status, "completed", JSON.stringify(done.body));
    assert.match(JSON.stringify(done.body.result?.result), /Long running operation completed/);
    const cut = await modernRequest(face, "tasks/get", { taskId: long });
    assert.equal(cut.body.result?.status, "failed", JSON.stringify(cut.body));
    assert.match(JSON.stringify(cut.body.result?.error), /restart/i);
    const report = await pollModernTask(face, research, (t) => t.status !== "working" && t.status !== "input_required", "ended");
    assert.equal(report.status, "completed", JSON.stringify(report));
    assert.match(report.result.content[0].text as string, /Research Report: restarts/);
  });
});
