/**
 * A stdio upstream that exits at once is noticed at once (issue 27 item 3:
 * CI saw connects wait out their 30 s timeout). Many real processes that exit
 * immediately, started concurrently — fresh, prestarted (the warm pool's
 * path), and through the gateway's sessions with a warm pool — must each fail
 * promptly, with the connect timeout far above the bound so that a missed
 * exit cannot pass.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { GroupStdioClientTransport } from "../../src/upstream/stdio-transport.js";
import { call, connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { errorCodeOf } from "../helpers/async-extra.js";
import { firstText } from "../helpers/core-extra.js";

/**
 * Half the connect timeout (120 s): a missed exit waits the whole timeout, a noticed one far less even on a
 * loaded 2-core machine (at load 15, 60 processes at once took up to 13.8 s; a 10 s bound failed there).
 */
const PROMPT_MS = 60_000;
const EXITS = ["-c", "echo 'exit-test: refusing to start' >&2; exit 3"];

async function failsPromptly(prestart: boolean): Promise<number> {
  const transport = new GroupStdioClientTransport({ command: "/bin/sh", args: EXITS, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, killGraceMs: 2_000 });
  transport.stderr.resume();
  if (prestart) await transport.prestart();
  const client = new Client({ name: "exit-test", version: "1.0.0" });
  const started = Date.now();
  await assert.rejects(client.connect(transport, { timeout: 120_000 }));
  await transport.close();
  return Date.now() - started;
}

describe("a stdio upstream that exits at once", () => {
  for (const prestart of [false, true]) {
    test(`is noticed promptly, 60 at once (${prestart ? "prestarted, as the warm pool does" : "started by connect"})`, async () => {
      const took = await Promise.all(Array.from({ length: 60 }, () => failsPromptly(prestart)));
      const slow = took.filter((ms) => ms >= PROMPT_MS);
      assert.deepEqual(slow, [], `every connect failed within ${PROMPT_MS} ms (slowest ${Math.max(...took)} ms)`);
    });
  }

  let gw: TestGateway | undefined;
  after(() => gw?.close());

  test("through the gateway: 12 sessions' first calls at once fail with EMCP_UPSTREAM_UNAVAILABLE and the reason, promptly, round after round", async () => {
    gw = await startGateway({
      mcpServers: { gone: { command: "/bin/sh", args: EXITS, sharing: "session" } },
      gateway: { upstream: { warmPool: 4, connectTimeoutMs: 120_000 } },
    });
    const clients = await Promise.all(Array.from({ length: 12 }, () => connectClient(gw!.url)));
    try {
      for (let round = 0; round < 3; round++) {
        await Promise.all(
          clients.map(async (c) => {
            const started = Date.now();
            const r = await call(c, "execute_tool", { server: "gone", tool: "anything", args: {}, timeout_ms: 120_000 });
            const took = Date.now() - started;
            assert.equal(r.isError, true);
            assert.equal(errorCodeOf(r), "EMCP_UPSTREAM_UNAVAILABLE", firstText(r));
            assert.ok(took < PROMPT_MS, `round ${round}: failed after ${took} ms`);
          }),
        );
      }
    } finally {
      await Promise.allSettled(clients.map((c) => c.close()));
    }
  });
});
