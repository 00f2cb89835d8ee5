import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { loadConfig, parseConfig } from "../../src/config/load.js";
import { isStdioConfig, remoteTransportOf, type RemoteServerConfig } from "../../src/config/schema.js";
import { describeTarget } from "../../src/upstream/registry.js";

function configError(pattern?: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof GatewayError, `expected GatewayError, got ${String(err)}`);
    assert.equal(err.code, ErrorCodes.CONFIG_INVALID);
    if (pattern) assert.match(err.message, pattern);
    return true;
  };
}

describe("parseConfig: defaults", () => {
  test("an empty object gets every documented default", () => {
    const c = parseConfig({});
    assert.deepEqual(c.mcpServers, {});
    const g = c.gateway;
    assert.equal(g.port, 8808);
    assert.equal(g.host, "127.0.0.1");
    assert.equal(g.token, undefined);
    assert.deepEqual(g.allowedHosts, []);
    assert.deepEqual(g.allowedOrigins, []);
    assert.equal(g.logLevel, "info");
    assert.equal(g.tools.defaultTimeoutMs, 120_000);
    assert.deepEqual(g.tasks, {
      defaultTtlMs: 300_000,
      maxTtlMs: 1_800_000,
      completedRetentionMs: 300_000,
      maxTasksPerSession: 100,
      maxRetainedPerSession: 200,
      maxRetainedResultBytes: 64 * 1024 * 1024,
      upstreamCancelTimeoutMs: 5_000,
    });
    assert.equal(g.pendingRequests.timeoutMs, 600_000);
    assert.equal(g.pendingRequests.maxPerSession, 100);
    assert.equal(g.events.maxEvents, 1000);
    assert.equal(g.events.warningThreshold, 0.8);
    assert.equal(g.buffers.maxNotificationsPerServer, 100);
    assert.equal(g.buffers.maxLogsPerServer, 500);
    assert.equal(g.awaitActivity.defaultTimeoutMs, 30_000);
  });

  test("a partial section keeps the defaults of its other keys", () => {
    const c = parseConfig({ gateway: { port: 9000, tasks: { maxTtlMs: 60_000 } } });
    assert.equal(c.gateway.port, 9000);
    assert.equal(c.gateway.host, "127.0.0.1");
    assert.equal(c.gateway.tasks.maxTtlMs, 60_000);
    assert.equal(c.gateway.tasks.defaultTtlMs, 300_000);
    assert.equal(c.gateway.tasks.completedRetentionMs, 300_000);
  });

  test("stdio servers get args [] by default and keep env/cwd", () => {
    const c = parseConfig({ mcpServers: { fs: { command: "npx", env: { A: "1" }, cwd: "/tmp" } } });
    const fs = c.mcpServers["fs"];
    assert.ok(fs && isStdioConfig(fs));
    assert.deepEqual(fs.args, []);
    assert.deepEqual(fs.env, { A: "1" });
    assert.equal(fs.cwd, "/tmp");
  });

  test("the result is frozen", () => {
    assert.equal(Object.isFrozen(parseConfig({})), true);
  });
});

describe("parseConfig: rejections", () => {
  test("an unknown key is rejected with its path", () => {
    assert.throws(() => parseConfig({ gateway: { tasks: { maxTTL: 5 } } }, "test.json"), configError(/gateway\.tasks.*'maxTTL'|gateway\.tasks\.maxTTL/));
    assert.throws(() => parseConfig({ gateway: { tasks: { maxTTL: 5 } } }, "test.json"), configError(/invalid test\.json/));
  });

  test("unknown top-level and gateway keys are rejected and named", () => {
    assert.throws(() => parseConfig({ servers: {} }), configError(/'servers'/));
    assert.throws(() => parseConfig({ gateway: { prot: 1 } }), configError(/gateway.*'prot'/));
    assert.throws(() => parseConfig({ mcpServers: { fs: { command: "x", argz: [] } } }), configError(/mcpServers\.fs/));
  });

  test("a server with neither command nor url is rejected with a hint", () => {
    assert.throws(() => parseConfig({ mcpServers: { broken: { args: ["x"] } } }), configError(/mcpServers\.broken.*either `command` \(stdio\) or `url`/));
  });

  test("an empty command is rejected", () => {
    assert.throws(() => parseConfig({ mcpServers: { s: { command: "" } } }), configError(/mcpServers\.s/));
  });

  test("a bad or non-http url is rejected", () => {
    assert.throws(() => parseConfig({ mcpServers: { r: { url: "not a url" } } }), configError(/mcpServers\.r\.url: url must be an http\(s\) URL/));
    assert.throws(() => parseConfig({ mcpServers: { r: { url: "ftp://example.com/mcp" } } }), configError(/mcpServers\.r\.url/));
  });

  test("invalid server names are rejected", () => {
    assert.throws(() => parseConfig({ mcpServers: { "bad name!": { command: "x" } } }), configError(/bad name!/));
    assert.throws(() => parseConfig({ mcpServers: { "-dash": { command: "x" } } }), configError());
  });

  test("invalid values are rejected with their path", () => {
    assert.throws(() => parseConfig({ gateway: { port: 70000 } }), configError(/gateway\.port/));
    assert.throws(() => parseConfig({ gateway: { tasks: { defaultTtlMs: -1 } } }), configError(/gateway\.tasks\.defaultTtlMs/));
    assert.throws(() => parseConfig({ gateway: { token: "short" } }), configError(/gateway\.token: token must be at least 16 characters/));
    assert.throws(() => parseConfig({ gateway: { logLevel: "loud" } }), configError(/gateway\.logLevel/));
  });

  test("several problems are all reported, one per line", () => {
    try {
      parseConfig({ gateway: { port: "x", tasks: { maxTTL: 1 } } });
      assert.fail("should have thrown");
    } catch (err) {
      assert.ok(err instanceof GatewayError);
      assert.match(err.message, /gateway\.port/);
      assert.match(err.message, /maxTTL/);
      assert.ok(err.message.split("\n").length >= 3);
    }
  });
});

describe("parseConfig: remote servers", () => {
  test("type http / transport sse / streamable-http are accepted", () => {
    const c = parseConfig({
      mcpServers: {
        a: { type: "http", url: "http://localhost:3000/mcp" },
        b: { transport: "sse", url: "https://example.com/sse", headers: { Authorization: "Bearer x" } },
        c: { type: "streamable-http", url: "https://example.com/mcp" },
        d: { url: "https://example.com/mcp" },
        e: { type: "sse", url: "https://example.com/sse" },
      },
    });
    const remote = (name: string) => {
      const s = c.mcpServers[name];
      assert.ok(s && !isStdioConfig(s), `${name} must be remote`);
      return s;
    };
    assert.equal(remoteTransportOf(remote("a")), "streamable-http");
    assert.equal(remoteTransportOf(remote("b")), "sse");
    assert.deepEqual(remote("b").headers, { Authorization: "Bearer x" });
    assert.equal(remoteTransportOf(remote("c")), "streamable-http");
    assert.equal(remoteTransportOf(remote("d")), "streamable-http");
    assert.equal(remoteTransportOf(remote("e")), "sse");
  });

  test("a stdio config cannot say type http, and a remote one cannot have a command", () => {
    assert.throws(() => parseConfig({ mcpServers: { a: { type: "http", command: "x" } } }), configError(/mcpServers\.a/));
    assert.throws(() => parseConfig({ mcpServers: { a: { url: "http://x/", command: "x" } } }), configError(/mcpServers\.a/));
  });

  test("describeTarget never shows credentials or query strings", () => {
    const c = parseConfig({ mcpServers: { a: { url: "https://user:secret@example.com/mcp?key=abc" }, s: { command: "node" } } });
    const d = describeTarget(c.mcpServers["a"]!);
    assert.equal(d.transport, "streamable-http");
    assert.equal(d.target, "https://example.com/mcp");
    assert.doesNotMatch(d.target, /secret|abc/);
    assert.deepEqual(describeTarget(c.mcpServers["s"]!), { transport: "stdio", target: "node" });
  });
});

describe("loadConfig", () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "emceepee-config-test-"));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function write(name: string, content: unknown): Promise<string> {
    const file = path.join(dir, name);
    await writeFile(file, typeof content === "string" ? content : JSON.stringify(content));
    return file;
  }

  test("reads a JSON file and applies defaults", async () => {
    const file = await write("basic.json", { mcpServers: { fs: { command: "npx", args: ["-y", "server-fs"] } } });
    const c = await loadConfig({ file, env: {} });
    assert.deepEqual(c.mcpServers["fs"], { command: "npx", args: ["-y", "server-fs"] });
    assert.equal(c.gateway.port, 8808);
    assert.equal(c.gateway.host, "127.0.0.1");
    assert.equal(c.gateway.tools.defaultTimeoutMs, 120_000);
    assert.equal(c.gateway.pendingRequests.timeoutMs, 600_000);
  });

  test("invalid JSON is reported clearly with the file path", async () => {
    const file = await write("broken.json", '{ "mcpServers": { ');
    await assert.rejects(loadConfig({ file, env: {} }), (err: unknown) => {
      configError(/is not valid JSON/)(err);
      assert.ok((err as Error).message.includes(path.resolve(file)));
      return true;
    });
  });

  test("a missing file is reported with its path", async () => {
    const file = path.join(dir, "does-not-exist.json");
    await assert.rejects(loadConfig({ file, env: {} }), configError(/cannot read config file .*does-not-exist\.json/));
  });

  test("schema errors name the file", async () => {
    const file = await write("unknown-key.json", { gateway: { tasks: { maxTTL: 1 } } });
    await assert.rejects(loadConfig({ file, env: {} }), (err: unknown) => {
      configError(/maxTTL/)(err);
      assert.ok((err as Error).message.includes(path.resolve(file)));
      return true;
    });
  });

  test("${VAR} and ${VAR:-default} are interpolated in string values", async () => {
    const file = await write("env.json", {
      mcpServers: {
        api: {
          url: "https://${API_HOST}/mcp",
          headers: { Authorization: "Bearer ${API_TOKEN}", "X-Region": "${REGION:-eu-west-1}" },
        },
        local: { command: "${CMD:-node}", args: ["${ARG1}", "--flag=${UNSET:-fallback}", "${EMPTY:-}"] },
      },
      gateway: { host: "${HOST:-127.0.0.1}", port: 9001 },
    });
    const c = await loadConfig({ file, env: { API_HOST: "api.example.com", API_TOKEN: "t0k3n", ARG1: "server.js", HOST: "0.0.0.0" } });
    const api = c.mcpServers["api"] as RemoteServerConfig;
    assert.equal(api.url, "https://api.example.com/mcp");
    assert.deepEqual(api.headers, { Authorization: "Bearer t0k3n", "X-Region": "eu-west-1" });
    const local = c.mcpServers["local"];
    assert.ok(local && isStdioConfig(local));
    assert.equal(local.command, "node");
    assert.deepEqual(local.args, ["server.js", "--flag=fallback", ""]);
    assert.equal(c.gateway.host, "0.0.0.0", "a set variable wins over its default");
    assert.equal(c.gateway.port, 9001, "non-string values are untouched");
  });

  test("${VAR:-default} uses the default when VAR is set but empty, like the shell; ${VAR} keeps the empty value", async () => {
    const file = await write("env-empty.json", { mcpServers: { local: { command: "${CMD:-node}", args: ["${EMPTY}"] } } });
    const c = await loadConfig({ file, env: { CMD: "", EMPTY: "" } });
    const local = c.mcpServers["local"];
    assert.ok(local && isStdioConfig(local));
    assert.equal(local.command, "node");
    assert.deepEqual(local.args, [""]);
  });

  test("a missing variable without default is an error naming it and where it was used", async () => {
    const file = await write("missing-var.json", { mcpServers: { api: { url: "https://x/mcp", headers: { Authorization: "Bearer ${API_TOKEN}" } } } });
    await assert.rejects(loadConfig({ file, env: {} }), (err: unknown) => {
      configError(/API_TOKEN/)(err);
      assert.match((err as Error).message, /mcpServers\.api\.headers\.Authorization/);
      assert.match((err as Error).message, /not set/);
      return true;
    });
  });

  test("the env option is used instead of process.env", async () => {
    const name = "EMCEEPEE_TEST_ONLY_IN_PROCESS_ENV";
    process.env[name] = "from-process";
    try {
      const file = await write("env-option.json", { mcpServers: { s: { command: "${" + name + "}" } } });
      await assert.rejects(loadConfig({ file, env: {} }), configError(new RegExp(name)));
      const c = await loadConfig({ file });
      const s = c.mcpServers["s"];
      assert.ok(s && isStdioConfig(s));
      assert.equal(s.command, "from-process");
    } finally {
      delete process.env[name];
    }
  });

  test("overrides replace the file's gateway values; undefined overrides are ignored", async () => {
    const file = await write("overrides.json", { gateway: { port: 9000, host: "0.0.0.0", logLevel: "debug" } });
    const c = await loadConfig({ file, env: {}, overrides: { port: 9100, host: undefined, token: undefined } });
    assert.equal(c.gateway.port, 9100);
    assert.equal(c.gateway.host, "0.0.0.0", "an undefined override keeps the file's value");
    assert.equal(c.gateway.logLevel, "debug");
    assert.equal(c.gateway.token, undefined);
  });

  test("invalid overrides are rejected, named as the flag", async () => {
    await assert.rejects(loadConfig({ env: {}, overrides: { port: -5 } }), configError(/--port: .*got the number -5/));
  });

  test("without a file: the embedded demo config (server-everything over stdio)", async () => {
    const c = await loadConfig({ env: {} });
    assert.deepEqual(Object.keys(c.mcpServers), ["everything"]);
    const e = c.mcpServers["everything"];
    assert.ok(e && isStdioConfig(e));
    assert.equal(e.command, process.execPath);
    assert.equal(e.args.at(-1), "stdio");
    assert.match(e.args[0] ?? "", /server-everything/);
    assert.equal(c.gateway.port, 8808);
  });
});
