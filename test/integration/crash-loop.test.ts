/**
 * A stdio upstream in a crash loop, with real processes (design UP-13): it
 * answers initialize and dies 200 ms later, every time. The reconnect
 * attempts keep counting across the short-lived connections (growing
 * delays), and after maxAttempts the session stops respawning it and says
 * why; the spawns are counted by the fixture itself.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectClient, FIXTURES, startGateway, type TestGateway } from "../helpers/gateway.js";
import { awaitUntil, eventually, EventLedger } from "../helpers/async-extra.js";
import { createLogger } from "../../src/logging.js";

const gateways: TestGateway[] = [];
const clients: Client[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(gateways.map((g) => g.close()));
});

test("an upstream that dies right after each initialize is respawned with growing delays, then given up after maxAttempts with a reason", async () => {
  const spawnLog = path.join(mkdtempSync(path.join(os.tmpdir(), "emceepee-crash-loop-")), "spawns");
  const spawns = () => (existsSync(spawnLog) ? readFileSync(spawnLog, "utf8").split("\n").filter(Boolean).length : 0);
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const gw = await startGateway(
    {
      mcpServers: { crashy: { command: process.execPath, args: [path.join(FIXTURES, "crashy-server.mjs"), "exit-after-initialize", spawnLog] } },
      gateway: {
        upstream: {
          warmPool: 0,
          sharing: { stdio: "session" },
          reconnect: { initialDelayMs: 50, maxDelayMs: 400, jitter: 0, maxAttempts: 3, stableAfterMs: 60_000 },
        },
      },
    },
    { logger: createLogger("info", sink) },
  );
  gateways.push(gw);
  const c = await connectClient(gw.url);
  clients.push(c);
  const ledger = new EventLedger();
  await ledger.call(c, "list_tools", { server: "crashy" });

  // Three reconnects, each counted on from the last (not "attempt 1" each time).
  await awaitUntil(c, ledger, (l) => l.all.filter((e) => e.type === "server_reconnected").length >= 3, 60_000);
  const gaveUp = await eventually("upstream_reconnect_gave_up is logged", () => lines.find((l) => l.msg === "upstream_reconnect_gave_up"), 60_000);
  const attempts = ledger.all.filter((e) => e.type === "server_reconnected").map((e) => e.data.attempts);
  assert.deepEqual(attempts, [1, 2, 3]);
  assert.equal(gaveUp.server, "crashy");
  assert.equal(gaveUp.attempts, 3);
  assert.match(String(gaveUp.reason), /gave up reconnecting 'crashy' after 3 attempts/);
  // The first spawn and one per reconnect; after giving up no timer is left to spawn another.
  assert.equal(spawns(), 4);
  const delays = lines.filter((l) => l.msg === "server_reconnecting").map((l) => l.delayMs);
  assert.deepEqual(delays, [50, 100, 200]);
});
