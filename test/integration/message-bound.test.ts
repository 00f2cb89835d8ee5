/**
 * gateway.upstream.maxMessageBytes (design LM-6, issue 20): an upstream
 * message over the bound fails its call with EMCP_RESPONSE_TOO_LARGE on both
 * faces, over stdio and Streamable HTTP (SSE and JSON answers), the
 * connection goes on, nothing of it reaches the replay store, and the
 * gateway's heap comes back; a result under the bound but over the SDK's old
 * 10 MB stdio buffer gets through while another session is answered.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ROOT, call, connectClient, fixtureArgs, startGateway, type TestGateway } from "../helpers/gateway.js";
import { cliNodeArgs } from "../helpers/cli-build.js";

const MB = 1_000_000;
const OPTS = { timeout: 300_000 };

function stdioEntry() {
  return { command: process.execPath, args: fixtureArgs("big-result-server"), cwd: ROOT };
}

/** The fixture over Streamable HTTP (SSE answers, or JSON bodies with `json`). */
async function startHttpFixture(json: boolean): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [...fixtureArgs("big-result-server"), "--http", ...(json ? ["--json"] : [])], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`fixture exited with ${code}`)));
  });
  return { url, child };
}

async function transparentClient(gw: TestGateway, server: string): Promise<Client> {
  const client = new Client({ name: "bound-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`/servers/${server}/mcp`, gw.url)));
  return client;
}

function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === "text" ? first.text : "";
}

/** The call's rejection, asserted to be EMCP_RESPONSE_TOO_LARGE naming the server and the bound. */
async function assertTooLarge(promise: Promise<unknown>, server: string): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof McpError, String(err));
    assert.match(err.message, /EMCP_RESPONSE_TOO_LARGE/);
    assert.match(err.message, new RegExp(`'${server}'`));
    assert.match(err.message, /gateway\.upstream\.maxMessageBytes \(16 MiB\)/);
    assert.equal((err.data as { code?: string }).code, "EMCP_RESPONSE_TOO_LARGE");
    return true;
  });
}

describe("upstream message bound", { timeout: 600_000 }, () => {
  let gw: TestGateway;
  const fixtures: ChildProcess[] = [];

  before(async () => {
    const sse = await startHttpFixture(false);
    const json = await startHttpFixture(true);
    fixtures.push(sse.child, json.child);
    gw = await startGateway({ mcpServers: { big: stdioEntry(), "big-sse": { url: sse.url }, "big-json": { url: json.url } } });
  });
  after(async () => {
    await gw?.close();
    for (const child of fixtures) child.kill();
  });

  for (const server of ["big", "big-sse", "big-json"]) {
    test(`${server}: a 20 MB result fails with EMCP_RESPONSE_TOO_LARGE on the transparent face, and the connection goes on`, async () => {
      const client = await transparentClient(gw, server);
      try {
        await assertTooLarge(client.callTool({ name: "big", arguments: { bytes: 20 * MB } }, undefined, OPTS), server);
        const echo = (await client.callTool({ name: "echo", arguments: { message: "after" } }, undefined, OPTS)) as CallToolResult;
        assert.equal(textOf(echo), "after");
      } finally {
        await client.close();
      }
    });

    test(`${server}: a 20 MB result fails with EMCP_RESPONSE_TOO_LARGE on the meta face`, async () => {
      const client = await connectClient(gw.url);
      try {
        const result = await call(client, "execute_tool", { server, tool: "big", args: { bytes: 20 * MB } });
        assert.equal(result.isError, true);
        const text = textOf(result);
        assert.match(text, /^EMCP_RESPONSE_TOO_LARGE: upstream '[^']+' sent a message/);
        assert.match(text, new RegExp(`'${server}'`));
        assert.match(text, /gateway\.upstream\.maxMessageBytes/);
      } finally {
        await client.close();
      }
    });
  }

  test("stdio: a 12 MB result (over the SDK's 10 MB ReadBuffer, under the bound) succeeds", async () => {
    const client = await transparentClient(gw, "big");
    try {
      const result = (await client.callTool({ name: "big", arguments: { bytes: 12 * MB } }, undefined, OPTS)) as CallToolResult;
      assert.equal(textOf(result).length, 12 * MB);
    } finally {
      await client.close();
    }
  });

  test("stdio: a 9 MB result succeeds, and another session's small call made meanwhile is answered", async () => {
    const a = await transparentClient(gw, "big");
    const b = await transparentClient(gw, "big");
    try {
      await b.callTool({ name: "echo", arguments: { message: "warm" } }, undefined, OPTS); // b's upstream is running
      const big = a.callTool({ name: "big", arguments: { bytes: 9 * MB } }, undefined, OPTS) as Promise<CallToolResult>;
      const small = (await b.callTool({ name: "echo", arguments: { message: "meanwhile" } }, undefined, OPTS)) as CallToolResult;
      assert.equal(textOf(small), "meanwhile");
      assert.equal(textOf(await big).length, 9 * MB);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe("upstream message bound: the gateway process", { timeout: 600_000 }, () => {
  test("after oversized answers the heap returns near its baseline and the replay store holds nothing of them", async (t) => {
    const { url, child: fixture } = await startHttpFixture(false);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-bound-"));
    const config = path.join(dir, "config.json");
    fs.writeFileSync(config, JSON.stringify({ mcpServers: { big: stdioEntry(), "big-sse": { url } } }));
    const gateway = spawn(
      process.execPath,
      [
        "--expose-gc",
        // The compiled CLI (test/helpers/cli-build.ts) with the benches' GC probe (plain JavaScript).
        "--import",
        path.join(ROOT, "bench/lib/gc-probe.mjs"),
        ...cliNodeArgs(),
        "serve",
        "--config",
        config,
        "--port",
        "0",
        "--log-level",
        "silent",
        "--store",
        `sqlite:${path.join(dir, "state.db")}`,
      ],
      { cwd: ROOT, env: { ...process.env, XDG_STATE_HOME: dir }, stdio: ["ignore", "pipe", "inherit", "ipc"] },
    );
    try {
      const meta = await new Promise<string>((resolve, reject) => {
        let out = "";
        gateway.stdout!.on("data", (c: Buffer) => {
          out += c.toString();
          const m = /listening on (http:\/\/\S+)/.exec(out);
          if (m?.[1]) resolve(m[1]);
        });
        gateway.once("exit", (code) => reject(new Error(`gateway exited with ${code}`)));
      });
      let probe = 0;
      const heapAfterGc = () =>
        new Promise<number>((resolve) => {
          const id = ++probe;
          const onMessage = (m: { type?: string; id?: number; memory?: NodeJS.MemoryUsage }) => {
            if (m.type !== "gc" || m.id !== id) return;
            gateway.off("message", onMessage);
            resolve(m.memory!.heapUsed);
          };
          gateway.on("message", onMessage);
          gateway.send({ type: "gc", id });
        });
      const gw = { url: meta } as TestGateway;
      const clients = { big: await transparentClient(gw, "big"), "big-sse": await transparentClient(gw, "big-sse") };
      for (const client of Object.values(clients)) await client.callTool({ name: "echo", arguments: { message: "warm" } }, undefined, OPTS);
      const baseline = await heapAfterGc();
      for (let round = 0; round < 2; round++) {
        for (const [server, client] of Object.entries(clients)) {
          await assertTooLarge(client.callTool({ name: "big", arguments: { bytes: 20 * MB } }, undefined, OPTS), server);
        }
      }
      const afterwards = await heapAfterGc();
      t.diagnostic(
        `gateway heap after a full GC: ${(baseline / 2 ** 20).toFixed(1)} MiB before, ${(afterwards / 2 ** 20).toFixed(1)} MiB after four 20 MB answers`,
      );
      assert.ok(afterwards < baseline + 64 * 1024 * 1024, `heap ${afterwards} after, ${baseline} before`);
      // Nothing oversized was ever written: SQLite files do not shrink when rows are deleted.
      const stored = fs.readdirSync(dir).reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
      assert.ok(stored < 8 * 1024 * 1024, `the state files hold ${stored} bytes`);
      t.diagnostic(`state files: ${stored} bytes`);
      for (const client of Object.values(clients)) await client.close();
    } finally {
      if (gateway.exitCode === null && gateway.signalCode === null) {
        const exited = new Promise((resolve) => gateway.once("exit", resolve));
        gateway.kill("SIGTERM");
        await exited;
      }
      fixture.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
