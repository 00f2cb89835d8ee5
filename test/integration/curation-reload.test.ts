/**
 * SIGHUP reloads governance and rate limits in the real CLI (issue 24,
 * docs/adr/0024): `emceepee serve` with a remote echo server (in the test
 * process: the reload is the subject, not the upstream's process; docs/adr/0062); a client
 * connected to /servers/everything/mcp is told tools/list_changed when the
 * reloaded curation renames a tool, and then sees the new name; a rate limit
 * added by the reload applies at once; a file whose governance block is
 * invalid is logged (config_reload_failed) and the curation in force stays.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { Client as SdkClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ROOT, connectClient } from "../helpers/gateway.js";
import { statelessEchoHandler } from "../helpers/echo-upstream.js";
import { CLI_ARGS, logLines, pollFor, startCliServe, stopChild, type RunningCli } from "../helpers/core-extra.js";

let tmp: string | undefined;
let served: RunningCli | undefined;
const clients: Client[] = [];
/** The upstream `everything`: echo over Streamable HTTP, in this process (no upstream process under the CLIs; issue 21). */
let upstream: Server | undefined;
let upstreamUrl: string;

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-curation-reload-"));
  const listener = createServer(statelessEchoHandler("remote-echo", "Echo: "));
  upstream = listener;
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/mcp`;
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  if (served) await stopChild(served.child);
  upstream?.closeAllConnections();
  await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function config(echoName: string, extra: Record<string, unknown> = {}) {
  return {
    mcpServers: { everything: { url: upstreamUrl } },
    gateway: {
      governance: {
        curation: [{ server: "everything", tool: "echo", name: echoName }],
        virtualServers: [{ name: "kit", tools: [{ server: "everything", tool: "echo", as: "shout" }] }],
      },
      ...extra,
    },
  };
}

const text = (r: unknown) => ((r as CallToolResult).content ?? []).map((c) => ("text" in c ? c.text : "")).join(" ");

/** Both cases at once (issue 21): each runs its own gateway processes on its own config file. */
describe("curation and rate limits from the config file, in the real CLI", { concurrency: true }, () => {
  test(
    "SIGHUP: a renamed tool reaches a connected client with tools/list_changed; a new rate limit applies; a bad governance block keeps the one in force",
    { timeout: 240_000 },
    async () => {
      const file = path.join(tmp!, "config.json");
      await writeFile(file, JSON.stringify(config("say")));
      served = await startCliServe(ROOT, ["--port", "0", "--config", file, "--store", "memory", "--log-level", "info", "--no-upstream-check"]);
      const s = served;
      const client = await connectClient(s.url.replace(/\/mcp$/, "/servers/everything/mcp"));
      clients.push(client);
      let changed = 0;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
      const names = async () => (await client.listTools()).tools.map((t) => t.name);
      assert.ok((await names()).includes("say"));
      assert.match(text(await client.callTool({ name: "say", arguments: { message: "one" } })), /one/);
      // The banner names the virtual server's URL, and it serves its one tool.
      assert.match(s.stdout(), /virtual server\s+http:\/\/\S+\/v\/kit\/mcp/);
      const kit = await connectClient(s.url.replace(/\/mcp$/, "/v/kit/mcp"));
      clients.push(kit);
      assert.deepEqual(
        (await kit.listTools()).tools.map((t) => t.name),
        ["shout"],
      );

      // Renamed again, and one call of echo a minute: no restart needed.
      await writeFile(
        file,
        JSON.stringify(config("speak", { rateLimits: [{ name: "echo-slowly", scope: "tool", tool: "echo", capacity: 1, refillPerMinute: 1 }] })),
      );
      s.child.kill("SIGHUP");
      const reloaded = await pollFor(async () => logLines(s.stderr(), "config_reloaded")[0], "config_reloaded", 60_000);
      assert.ok(reloaded.listChanged >= 1, JSON.stringify(reloaded));
      assert.deepEqual(logLines(s.stderr(), "config_reload_settings_need_restart"), [], "governance and rateLimits need no restart");
      await pollFor(async () => (changed >= 1 ? true : undefined), "tools/list_changed on the connected client", 60_000);
      const now = await names();
      assert.ok(now.includes("speak") && !now.includes("say") && !now.includes("echo"), now.join(", "));
      assert.match(text(await client.callTool({ name: "speak", arguments: { message: "two" } })), /two/);
      const limited = await client.callTool({ name: "speak", arguments: { message: "three" } }).then(
        (r) => text(r),
        (e: unknown) => String(e),
      );
      assert.match(limited, /echo-slowly|rate limit/, "the limit added by the reload refuses the second call");

      // A governance block that does not validate: logged, the curation in force stays, no list_changed.
      const before = changed;
      await writeFile(
        file,
        JSON.stringify({ ...config("again"), gateway: { governance: { curation: [{ server: "everything", tool: "echo", name: "bad name!" }] } } }),
      );
      s.child.kill("SIGHUP");
      const failed = await pollFor(async () => logLines(s.stderr(), "config_reload_failed")[0], "config_reload_failed", 60_000);
      assert.match(String(failed.reason), /curation/);
      assert.ok((await names()).includes("speak"));
      assert.equal(changed, before);
      assert.equal(s.child.exitCode, null, "SIGHUP never ends the gateway");
    },
  );

  test(
    "emceepee stdio --face virtual:<name> serves the virtual server's tools; an unknown name is refused naming the known ones",
    { timeout: 120_000 },
    async () => {
      const file = path.join(tmp!, "stdio.json");
      await writeFile(file, JSON.stringify(config("say")));
      const client = new SdkClient({ name: "stdio-virtual", version: "1.0.0" });
      await client.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [...CLI_ARGS, "stdio", "--config", file, "--face", "virtual:kit"],
          cwd: ROOT,
          stderr: "ignore",
        }),
      );
      clients.push(client);
      assert.deepEqual(
        (await client.listTools()).tools.map((t) => t.name),
        ["shout"],
      );
      assert.match(text(await client.callTool({ name: "shout", arguments: { message: "piped" } })), /piped/);

      const refused = new SdkClient({ name: "stdio-virtual-unknown", version: "1.0.0" });
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [...CLI_ARGS, "stdio", "--config", file, "--face", "virtual:nope"],
        cwd: ROOT,
        stderr: "pipe",
      });
      let stderr = "";
      transport.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
      await assert.rejects(refused.connect(transport));
      await pollFor(async () => (/virtual:nope: no such virtual server.*have: kit/.test(stderr) ? true : undefined), "the refusal on stderr", 30_000);
      await refused.close().catch(() => undefined);
    },
  );
});
