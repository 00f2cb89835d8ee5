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
import { after, before, describe, it } from "node:test";
import { startRestartingGateway, type RestartingGateway } from "../helpers/era-setups.js";
import { TASKS_EXTENSION, modernRequest, pollModernTask } from "../helpers/modern-requests.js";

const PLAIN = { capabilities: {} };
const EXTENDED = { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } };

describe("meta-face promotions of a 2026-07-28 client across a restart", { timeout: 300_000 }, () => {
  let gateway: RestartingGateway;
  let meta: string;

  before(async () => {
    gateway = await startRestartingGateway("era-meta-restart");
    meta = `${gateway.base}/mcp`;
  });
  after(() => gateway?.close());

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

    await gateway.restart();

    const result = await modernRequest(meta, "tools/call", { name: "get_task_result", arguments: { task_id: plainTask, timeout_ms: 60_000 } }, PLAIN);
    assert.equal(result.body.result?.isError, undefined, JSON.stringify(result.body));
    assert.match(result.body.result?.content[0].text as string, /Research Report: restarts/);
    const report = await pollModernTask(meta, extendedTask, (t) => t.status !== "working" && t.status !== "input_required", "ended", EXTENDED);
    assert.equal(report.status, "completed", JSON.stringify(report));
    assert.match(report.result.content[0].text as string, /Research Report: reboots/);
  });
});
