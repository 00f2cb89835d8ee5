/**
 * Bridge 3 across a restart, with real processes (ADR 0032, "MRTR bridges"):
 * a parked call lives in the replica that parked it. `emceepee serve` with a
 * vault key (the seal's key survives the restart) parks server-everything's
 * elicitation for a 2026-07-28 client; SIGTERM ends the gateway promptly with
 * the call parked; after the restart the client's retry is refused at once
 * with EMCP_BAD_REQUEST_STATE saying the parked request is gone, never a hang.
 * Two gateways sharing one Redis and vault key but not clustered: a retry
 * that reaches the other one is refused saying to turn on gateway.cluster.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { ROOT, everythingStdio } from "../helpers/gateway.js";
import { freePort, startCliServe, stopChild, waitExit, type RunningCli } from "../helpers/core-extra.js";
import { modernRequest } from "../helpers/modern-requests.js";
import { redisSkipReason, startRedis } from "../helpers/redis.js";

const CAPS = { elicitation: { form: {} } };
const skip = redisSkipReason() ?? false;
const stops: Array<() => Promise<void>> = [];
let tmp: string;
const running = new Set<RunningCli>();

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-mrtr-restart-"));
});
after(async () => {
  await Promise.allSettled([...running].map((r) => stopChild(r.child)));
  for (const stop of stops) await stop();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

test("a parked call is lost with a clear error across a restart, and does not hold the shutdown", { timeout: 300_000 }, async () => {
  const config = path.join(tmp, "config.json");
  // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway (issue 21).
  await writeFile(config, JSON.stringify({ mcpServers: { everything: everythingStdio() }, gateway: { upstream: { warmPool: 0 } } }));
  const port = await freePort();
  const env = { EMCEEPEE_VAULT_KEY: randomBytes(32).toString("base64") };
  const start = async () => {
    const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check"], 120_000, env);
    running.add(served);
    return served;
  };
  const url = `http://127.0.0.1:${port}/servers/everything/mcp`;
  const call = { name: "trigger-elicitation-request", arguments: {} };

  const first = await start();
  const asked = await modernRequest(url, "tools/call", call, { capabilities: CAPS });
  assert.equal(asked.body.result?.resultType, "input_required", JSON.stringify(asked.body));
  const key = Object.keys(asked.body.result.inputRequests as object)[0]!;

  first.child.kill("SIGTERM");
  const { code } = await waitExit(first.child, 60_000);
  assert.equal(code, 0, `SIGTERM ends the gateway cleanly with a call parked:\n${first.stderr().slice(-3000)}`);
  running.delete(first);

  await start();
  const retry = await modernRequest(
    url,
    "tools/call",
    { ...call, inputResponses: { [key]: { action: "accept", content: { name: "After restart" } } }, requestState: asked.body.result.requestState },
    { capabilities: CAPS },
  );
  assert.equal(retry.body.error?.code, -32602, JSON.stringify(retry.body));
  assert.equal(retry.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE");
  assert.match(retry.body.error.message, /parked request it stands for is gone/);
  assert.match(retry.body.error.message, /restarted/);
  // The same client starting again is served as usual.
  const again = await modernRequest(url, "tools/call", call, { capabilities: CAPS });
  assert.equal(again.body.result?.resultType, "input_required", JSON.stringify(again.body));
});

test(
  "two gateways on one Redis without gateway.cluster: a retry on the other is refused, saying to turn the cluster on",
  { timeout: 300_000, skip },
  async () => {
    const redis = await startRedis();
    stops.push(() => redis.stop());
    const config = path.join(tmp, "shared.json");
    await writeFile(
      config,
      JSON.stringify({ mcpServers: { everything: everythingStdio() }, gateway: { upstream: { warmPool: 0 }, store: { kind: "redis", url: redis.url } } }),
    );
    const env = { EMCEEPEE_VAULT_KEY: randomBytes(32).toString("base64") };
    const [one, two] = await Promise.all(
      [0, 1].map(async () => {
        const port = await freePort();
        const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check"], 120_000, env);
        running.add(served);
        return `http://127.0.0.1:${port}/servers/everything/mcp`;
      }),
    );
    const call = { name: "trigger-elicitation-request", arguments: {} };
    const asked = await modernRequest(one!, "tools/call", call, { capabilities: CAPS });
    assert.equal(asked.body.result?.resultType, "input_required", JSON.stringify(asked.body));
    const key = Object.keys(asked.body.result.inputRequests as object)[0]!;
    const answers = { inputResponses: { [key]: { action: "accept", content: { name: "Elsewhere" } } }, requestState: asked.body.result.requestState };
    const elsewhere = await modernRequest(two!, "tools/call", { ...call, ...answers }, { capabilities: CAPS });
    assert.equal(elsewhere.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE", JSON.stringify(elsewhere.body));
    assert.match(elsewhere.body.error.message, /gateway\.cluster/);
    // The gateway that parked the call still takes the retry.
    const home = await modernRequest(one!, "tools/call", { ...call, ...answers }, { capabilities: CAPS });
    assert.match(JSON.stringify(home.body.result?.content), /Elsewhere/, JSON.stringify(home.body));
  },
);
