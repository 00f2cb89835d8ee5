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
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ROOT } from "../helpers/gateway.js";
import { freePort, startCliServe, startEverythingHttp, stopChild, waitExit, type ChildServer, type RunningCli } from "../helpers/core-extra.js";
import { modernRequest, pollModernTask } from "../helpers/modern-requests.js";

describe("tasks-extension tasks across a restart", { timeout: 300_000 }, () => {
  let tmp: string;
  let remote: ChildServer;
  let served: RunningCli | undefined;
  let args: string[];
  let face: string;

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-era-tasks-restart-"));
    remote = await startEverythingHttp();
    const config = path.join(tmp, "gateway.json");
    await writeFile(config, JSON.stringify({ mcpServers: { remote: { url: remote.url } } }));
    const port = await freePort();
    args = ["--config", config, "--port", String(port), "--store", `sqlite:${path.join(tmp, "state.db")}`, "--no-upstream-check"];
    served = await startCliServe(ROOT, args);
    face = `http://127.0.0.1:${port}/servers/remote/mcp`;
  });

  after(async () => {
    if (served) await stopChild(served.child);
    await remote?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

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

    served!.child.kill("SIGTERM");
    const { code } = await waitExit(served!.child, 60_000);
    assert.equal(code, 0, served!.stderr().slice(-2000));
    served = await startCliServe(ROOT, args);

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
