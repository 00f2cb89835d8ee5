/**
 * The README's OAuth setup works as written: examples/oauth/provider.ts runs
 * as its own process, examples/oauth/emceepee.json loads as the gateway's
 * config (its issuer pointed at that process), and an SDK client that follows
 * the spec's discovery logs in through the provider's login page and calls a
 * tool; the console's client is registered at the provider.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { loadConfig } from "../../src/config/load.js";
import { createGateway } from "../../src/server/gateway.js";
import { freePort } from "../helpers/core-extra.js";
import { inProcess, inProcessTransportFactory } from "../helpers/in-process.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";

const EXAMPLE = path.resolve(import.meta.dirname, "../../examples/oauth");
const TS_REGISTER = pathToFileURL(path.resolve(import.meta.dirname, "../helpers/ts-register.mjs")).href;

describe("examples/oauth: the README's complete OAuth setup", () => {
  let provider: ChildProcess;
  let issuer: string;
  let close: (() => Promise<void>) | undefined;

  before(async () => {
    const port = await freePort();
    // Through the compiled loader (test/helpers/ts-register.mjs, as npm test loads the tests), not tsx: half the CPU.
    provider = spawn(process.execPath, ["--import", TS_REGISTER, path.join(EXAMPLE, "provider.ts")], {
      env: { ...process.env, OIDC_PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    provider.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    issuer = await new Promise<string>((resolve, reject) => {
      provider.stdout!.on("data", (c: Buffer) => {
        out += c.toString();
        const m = /OpenID provider at (\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      provider.once("exit", (code) => reject(new Error(`the example provider exited (${code}): ${out}`)));
    });
  });
  after(async () => {
    await close?.();
    provider.kill("SIGTERM");
  });

  test("the example config loads, and a spec-following client logs in at the example provider and calls a tool", async () => {
    const loaded = await loadConfig({ file: path.join(EXAMPLE, "emceepee.json") });
    assert.deepEqual(loaded.gateway.auth.oauth.issuers, ["http://127.0.0.1:9400"], "the README's issuer");
    assert.equal(loaded.gateway.console.oidc?.clientId, "emceepee-console");
    const config = {
      ...loaded,
      // The example's upstream, in this process: the test is about the login, not the upstream's process (ADR 0059).
      mcpServers: { everything: inProcess("everything") },
      gateway: {
        ...loaded.gateway,
        port: 0,
        logLevel: "silent" as const,
        auth: { ...loaded.gateway.auth, oauth: { ...loaded.gateway.auth.oauth, issuers: [issuer] } },
      },
    };
    const gateway = createGateway(config, { transportFactory: inProcessTransportFactory() });
    const { url } = await gateway.listen();
    close = () => gateway.close();

    const face = url.replace(/\/mcp$/, "/servers/everything/mcp");
    const { client } = await loginAndConnect(face, "alice", new MemoryOAuthClient("http://127.0.0.1:1/callback"));
    try {
      const r = (await client.callTool({ name: "echo", arguments: { message: "hi" } })) as CallToolResult;
      assert.match(JSON.stringify(r.content), /hi/);
    } finally {
      await client.close();
    }

    // The console's client is known to the provider (its authorization request is not refused as an unknown client).
    const res = await fetch(
      `${issuer}/auth?client_id=emceepee-console&response_type=code&scope=openid&redirect_uri=${encodeURIComponent("http://127.0.0.1:8808/console/callback")}&code_challenge=${"a".repeat(43)}&code_challenge_method=S256`,
      { redirect: "manual" },
    );
    assert.equal(res.status, 303, `the provider refused the console's client: ${res.status} ${await res.text()}`);
  });
});
