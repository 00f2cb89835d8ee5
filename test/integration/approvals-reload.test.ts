/**
 * SIGHUP reloads governance.approvals in the real CLI (issue 24, docs/adr/0025):
 * `emceepee serve` with a remote echo server (in the test process: the reload is
 * the subject, not the upstream's process; docs/adr/0062) and a rule sending echo to
 * approval; after the reload a new approval is told to the webhook the file
 * now names, expires after the reloaded ttlMs, and a plain call is held for
 * the reloaded holdMs; governance.audit.storeArguments turned on by the same
 * reload puts the arguments in the webhook's body — no restart.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ROOT, connectClient } from "../helpers/gateway.js";
import { statelessEchoHandler } from "../helpers/echo-upstream.js";
import { logLines, pollFor, startCliServe, stopChild, type RunningCli } from "../helpers/core-extra.js";

let tmp: string | undefined;
let served: RunningCli | undefined;
let hooks: Server | undefined;
/** The upstream `everything`: echo over Streamable HTTP, in this process (no upstream process under the CLI; issue 21). */
let upstream: Server | undefined;
let upstreamUrl: string;
const clients: Client[] = [];

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  if (served) await stopChild(served.child);
  for (const listener of [hooks, upstream]) {
    listener?.closeAllConnections();
    await new Promise((resolve) => (listener ? listener.close(resolve) : resolve(undefined)));
  }
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function config(approvals: Record<string, unknown>, storeArguments = false) {
  const rules = [{ id: "echo-needs-a-person", server: "everything", tool: "echo", action: "approve" }];
  return {
    mcpServers: { everything: { url: upstreamUrl } },
    gateway: { governance: { profile: "enforce", rules, approvals, audit: { storeArguments } } },
  };
}

test("SIGHUP: governance.approvals and audit.storeArguments apply to the next approval without a restart", { timeout: 240_000 }, async () => {
  const received: Array<Record<string, unknown>> = [];
  hooks = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      received.push({ path: req.url, ...(JSON.parse(body) as Record<string, unknown>) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => hooks!.listen(0, "127.0.0.1", resolve));
  const hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hook`;
  const echo = createServer(statelessEchoHandler("remote-echo", "Echo: "));
  upstream = echo;
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/mcp`;

  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-approvals-reload-"));
  const file = path.join(tmp, "config.json");
  await writeFile(file, JSON.stringify(config({ holdMs: 1_500, ttlMs: 600_000 })));
  served = await startCliServe(ROOT, ["--port", "0", "--config", file, "--store", "memory", "--log-level", "info", "--no-upstream-check"]);
  const s = served;

  await writeFile(file, JSON.stringify(config({ holdMs: 2_345, ttlMs: 123_456, webhooks: [{ url: hookUrl, format: "json" }] }, true)));
  s.child.kill("SIGHUP");
  const reloaded = await pollFor(async () => logLines(s.stderr(), "config_reloaded")[0], "config_reloaded", 60_000);
  assert.deepEqual(logLines(s.stderr(), "config_reload_settings_need_restart"), [], JSON.stringify(reloaded));

  const client = await connectClient(s.url.replace(/\/mcp$/, "/servers/everything/mcp"));
  clients.push(client);
  // A plain call (no task) is held for holdMs, then withdrawn naming it: the reloaded value, not the one at start.
  const held = await client.callTool({ name: "echo", arguments: { message: "hold me" } }).then(
    (r) => JSON.stringify(r),
    (e: unknown) => String(e),
  );
  assert.match(held, /within 2345ms/, held);
  const hook = await pollFor(async () => received[0], "the reloaded webhook told of the approval", 60_000);
  assert.equal(hook.path, "/hook");
  assert.equal(hook.type, "approval_requested");
  assert.equal(hook.rule, "echo-needs-a-person");
  assert.equal(Date.parse(String(hook.expiresAt)) - Date.parse(String(hook.createdAt)), 123_456, "the reloaded ttlMs");
  assert.deepEqual(hook.arguments, { message: "hold me" }, "the reloaded audit.storeArguments: the webhook carries the arguments");
  assert.equal(s.child.exitCode, null);
});
