/**
 * A session's failed connect is on the Activity record (kind server_failed): "what went wrong at 14:03, and for whom?"
 * must be answerable for an upstream that never came up, not only for one that dropped. In process, a real stdio child.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { waitFor } from "../helpers/tasks.js";

let gw: TestGateway;

before(async () => {
  gw = await startGateway({
    mcpServers: {
      // Writes a line on stderr and exits before it answers initialize.
      broken: { command: process.execPath, args: ["-e", "process.stderr.write('boom: no API key set\\n'); process.exit(3)"] },
    },
    gateway: { activity: { flushMs: 10 } },
  });
});

after(async () => {
  await gw?.close();
});

test("a failed connect is recorded as server_failed with the reason and the stderr line, for the session that tried", async () => {
  const client = await connectClient(gw.url, { name: "activity-failures" });
  try {
    const result = await call(client, "execute_tool", { server: "broken", tool: "anything", args: {} });
    assert.equal(result.isError, true, "the call fails: the upstream never came up");
    const failed = await waitFor(async () => {
      const records = await gw.gateway.context.store.activity.list({ kind: "server_failed", limit: 10 });
      return records.find((r) => r.server === "broken");
    }, "a server_failed record for 'broken'");
    assert.equal(failed.outcome, "failed");
    assert.match(failed.summary ?? "", /boom: no API key set/, "the reason carries the child's stderr line");
    assert.match(failed.sessionHash ?? "", /\S/, "the record names the session (by hash)");
  } finally {
    await client.close();
  }
});
