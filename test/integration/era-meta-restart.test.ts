/**
 * A 2026-07-28 client's meta-face promotion across a gateway restart (issue
 * 25, "Durability"; ADR 0032 "The meta face across eras", ADR 0014): the real
 * CLI on a SQLite file, server-everything over Streamable HTTP as the
 * upstream (its tasks outlive the gateway). A promoted execute_tool runs as
 * the upstream's task under the principal's meta host; after SIGTERM and a new
 * start on the same port and file, a later request of the same caller follows
 * it — with get_task_result (meta tools) and with tasks/get (the tasks
 * extension) — and gets the upstream's result.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ROOT } from "../helpers/gateway.js";
import { freePort, startCliServe, startEverythingHttp, stopChild, waitExit, type ChildServer, type RunningCli } from "../helpers/core-extra.js";
import { TASKS_EXTENSION, modernRequest, pollModernTask } from "../helpers/modern-requests.js";

const PLAIN = { capabilities: {} };
const EXTENDED = { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } };

describe("meta-face promotions of a 2026-07-28 client across a restart", { timeout: 300_000 }, () => {
  let tmp: string;
  let remote: ChildServer;
  let served: RunningCli | undefined;
  let args: string[];
  let meta: string;

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-era-meta-restart-"));
    remote = await startEverythingHttp();
    const config = path.join(tmp, "gateway.json");
    await writeFile(config, JSON.stringify({ mcpServers: { remote: { url: remote.url } } }));
    const port = await freePort();
    args = ["--config", config, "--port", String(port), "--store", `sqlite:${path.join(tmp, "state.db")}`, "--no-upstream-check"];
    served = await startCliServe(ROOT, args);
    meta = `http://127.0.0.1:${port}/mcp`;
  });

  after(async () => {
    if (served) await stopChild(served.child);
    await remote?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it("a promoted execute_tool is followed after SIGTERM and a new start, with the meta tools and with the tasks extension", async () => {
    const research = { server: "remote", tool: "simulate-research-query" };
    const plain = await modernRequest(
      meta,
      "tools/call",
      { name: "execute_tool", arguments: { ...research, args: { topic: "restarts" }, timeout_ms: 50 } },
      PLAIN,
    );
    const plainTask = plain.body.result?.structuredContent?.task_id as string;
    assert.ok(plainTask, JSON.stringify(plain.body));
    const extended = await modernRequest(meta, "tools/call", { name: "execute_tool", arguments: { ...research, args: { topic: "reboots" } } }, EXTENDED);
    assert.equal(extended.body.result?.resultType, "task", JSON.stringify(extended.body));
    const extendedTask = extended.body.result?.taskId as string;

    served!.child.kill("SIGTERM");
    const { code } = await waitExit(served!.child, 60_000);
    assert.equal(code, 0, served!.stderr().slice(-2000));
    served = await startCliServe(ROOT, args);

    const result = await modernRequest(meta, "tools/call", { name: "get_task_result", arguments: { task_id: plainTask, timeout_ms: 60_000 } }, PLAIN);
    assert.equal(result.body.result?.isError, undefined, JSON.stringify(result.body));
    assert.match(result.body.result?.content[0].text as string, /Research Report: restarts/);
    const report = await pollModernTask(meta, extendedTask, (t) => t.status !== "working" && t.status !== "input_required", "ended", EXTENDED);
    assert.equal(report.status, "completed", JSON.stringify(report));
    assert.match(report.result.content[0].text as string, /Research Report: reboots/);
  });
});
