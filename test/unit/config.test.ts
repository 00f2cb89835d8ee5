import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { formatZodError, loadConfig, parseConfig, parseConfigDetailed } from "../../src/config/load.js";
import { isStdioConfig, remoteTransportOf, serverConfigSchema, type RemoteServerConfig, type ServerConfig } from "../../src/config/server-entry.js";
import { describeTarget } from "../../src/upstream/registry.js";

function configError(pattern?: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof GatewayError, `expected GatewayError, got ${String(err)}`);
    assert.equal(err.code, ErrorCodes.CONFIG_INVALID);
    if (pattern) assert.match(err.message, pattern);
    return true;
  };
}

/** The error's message, asserting it is EMCP_CONFIG_INVALID. */
function configErrorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    configError()(err);
    return (err as GatewayError).message;
  }
  assert.fail("expected an EMCP_CONFIG_INVALID error");
}

/** The problem lines (`  - ...`) of a config error. */
function problems(message: string): string[] {
  return message
    .split("\n")
    .filter((l) => l.startsWith("  - "))
    .map((l) => l.slice(4));
}

function remote(c: { mcpServers: Record<string, ServerConfig> }, name: string): RemoteServerConfig {
  const s = c.mcpServers[name];
  assert.ok(s && !isStdioConfig(s), `${name} must be a remote server`);
  return s;
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
      maxPerPrincipal: 500,
      maxRetainedPerSession: 200,
      maxRetainedResultBytes: 64 * 1024 * 1024,
      upstreamCancelTimeoutMs: 5_000,
      progressKeepAliveMs: 15_000,
    });
    assert.equal(g.upstream.taskPollTimeoutMs, 10_000);
    assert.equal(g.http.sseKeepAliveMs, 15_000);
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
    assert.throws(() => parseConfig({ mcpServer: {} }), configError(/'mcpServer'/));
    assert.throws(() => parseConfig({ gatway: {} }), configError(/'gatway' \(did you mean 'gateway'\?\)/));
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

describe("parseConfig: a bad server entry is reported by server, key, problem and fix", () => {
  const cases: { what: string; servers: Record<string, unknown>; says: string }[] = [
    {
      what: "args given as one string",
      servers: { fs: { command: "npx", args: "a b" } },
      says: 'mcpServers.fs.args: must be an array of strings (got the string "a b"); write ["a", "b"]',
    },
    {
      what: "an unsupported transport",
      servers: { x: { url: "https://example.com/mcp", transport: "websocket" } },
      says: 'mcpServers.x.transport: "websocket" is not supported; use "streamable-http"',
    },
    {
      what: "an unsupported type",
      servers: { x: { url: "https://example.com/mcp", type: "ws" } },
      says: 'mcpServers.x.type: "ws" is not supported; use "streamable-http"',
    },
    {
      what: "both command and url",
      servers: { x: { command: "npx", url: "https://example.com/mcp" } },
      says: 'mcpServers.x: has both "command" and "url"; a server is either stdio (command) or remote (url); remove one of them',
    },
    {
      what: "a server name with a space",
      servers: { "my server": { command: "npx" } },
      says: 'mcpServers["my server"]: server names may only contain letters, digits, "_", "-", "."',
    },
    {
      what: "a server name starting with a dash",
      servers: { "-dash": { command: "npx" } },
      says: 'mcpServers["-dash"]: server names may only contain letters, digits, "_", "-", "." (1-64 characters, starting with a letter or digit); this one starts with "-"; rename it, e.g. "dash"',
    },
    {
      what: "a misspelt key",
      servers: { fs: { command: "npx", argz: ["-y"] } },
      says: "mcpServers.fs: unknown key 'argz' (did you mean 'args'?); a stdio server accepts command, args, env, cwd, secrets, type, transport, sharing, disabled, timeout,",
    },
    {
      what: "a remote key on a stdio server",
      servers: { fs: { command: "npx", headers: { A: "b" } } },
      says: "mcpServers.fs: 'headers' is for remote (url) servers, and this one is stdio (it has \"command\"); remove 'headers'",
    },
    {
      what: "a stdio key on a remote server",
      servers: { r: { url: "https://example.com/mcp", args: ["x"] } },
      says: "mcpServers.r: 'args' is for stdio (command) servers, and this one is remote (it has a url); remove 'args'",
    },
    {
      what: "a remote type on a stdio server",
      servers: { a: { type: "http", command: "x" } },
      says: 'mcpServers.a.type: "http" is a remote transport, but this server has "command" (stdio); write "stdio" or remove "type"',
    },
    {
      what: "type stdio on a remote server",
      servers: { a: { type: "stdio", url: "https://example.com/mcp" } },
      says: 'mcpServers.a.type: "stdio" needs "command", but this server has a url (remote)',
    },
    {
      what: "type and transport that disagree",
      servers: { a: { url: "https://example.com/mcp", type: "sse", transport: "streamable-http" } },
      says: 'mcpServers.a: "transport" says "streamable-http" but "type" says "sse"; keep one of them',
    },
    {
      what: "a number among the args",
      servers: { a: { command: "x", args: ["--port", 8080] } },
      says: 'mcpServers.a.args[1]: must be a string (got the number 8080); write "8080"',
    },
    {
      what: "a number in env",
      servers: { a: { command: "x", env: { PORT: 8080 } } },
      says: 'mcpServers.a.env.PORT: must be a string (got the number 8080); write "8080"',
    },
    {
      what: "command and args in one array",
      servers: { a: { command: ["npx", "-y"] } },
      says: 'mcpServers.a.command: must be a string (got an array); put the program in "command" and its arguments in "args"',
    },
    {
      what: "an empty command",
      servers: { a: { command: "" } },
      says: 'mcpServers.a.command: must not be empty; write the program to run, e.g. "npx"',
    },
    {
      what: "disabled as a string",
      servers: { a: { command: "x", disabled: "yes" } },
      says: 'mcpServers.a.disabled: must be true or false (got the string "yes"); write true to skip this server',
    },
    {
      what: "an entry that is a string",
      servers: { a: "npx server" },
      says: 'mcpServers.a: must be an object: {"command": "...", "args": [...]} for a stdio server or {"url": "https://..."} for a remote one (got the string "npx server")',
    },
    {
      what: "neither command nor url",
      servers: { a: { type: "http", headers: {} } },
      says: "mcpServers.a: a server needs either `command` (stdio) or `url` (streamable-http / sse), and this one has neither (its keys: type, headers); add one of them",
    },
  ];
  for (const c of cases) {
    test(c.what, () => {
      const message = configErrorOf(() => parseConfig({ mcpServers: c.servers }, "test.json"));
      assert.ok(message.includes(c.says), `expected ${JSON.stringify(c.says)} in:\n${message}`);
      assert.equal(problems(message).length, 1, `one problem, one line:\n${message}`);
      assert.doesNotMatch(message, /Invalid key in record|Invalid input/);
    });
  }

  test("only the server with neither key gets the generic either-command-or-url message", () => {
    for (const c of cases.filter((c) => !c.what.startsWith("neither"))) {
      assert.doesNotMatch(
        configErrorOf(() => parseConfig({ mcpServers: c.servers })),
        /needs either/,
        c.what,
      );
    }
  });

  test("every problem line ends in what to do", () => {
    for (const c of cases) {
      for (const line of problems(configErrorOf(() => parseConfig({ mcpServers: c.servers })))) {
        assert.match(line, /; (write|use|remove|rename|put|add|keep|fix|change|see)\b[^;]*$/, line);
      }
    }
  });

  test("problems in several servers are all reported, one line each", () => {
    const message = configErrorOf(() => parseConfig({ mcpServers: { a: { command: "x", args: "y" }, b: { url: "nope" }, ok: { command: "node" } } }));
    const lines = problems(message);
    assert.equal(lines.length, 2, message);
    assert.match(lines[0]!, /^mcpServers\.a\.args: /);
    assert.match(lines[1]!, /^mcpServers\.b\.url: url must be an http\(s\) URL \(got the string "nope"\)/);
  });

  test("add_server's schema gives the same messages", () => {
    const parsed = serverConfigSchema.safeParse({ command: "npx", args: "-y server" });
    assert.ok(!parsed.success);
    assert.match(formatZodError(parsed.error), /args: must be an array of strings \(got the string "-y server"\); write \["-y", "server"\]/);
    const ok = serverConfigSchema.safeParse({ url: "https://example.com/sse", transport: "sse" });
    assert.deepEqual(ok.data, { url: "https://example.com/sse", transport: "sse" });
  });

  test("gateway values name the key, the value given and where to look", () => {
    const message = configErrorOf(() => parseConfig({ gateway: { port: "eighty", prot: 1 } }));
    assert.match(message, /gateway\.port: .*\(got the string "eighty"\); see docs\/config\.md/);
    assert.match(message, /gateway: unknown key 'prot' \(did you mean 'port'\?\); accepted keys: host, port, /);
    assert.match(
      configErrorOf(() => parseConfig({ mcpServer: {} })),
      /unknown key 'mcpServer' \(did you mean 'mcpServers'\?\); accepted keys: mcpServers, gateway/,
    );
  });

  test("a gateway token is never echoed in a message", () => {
    const message = configErrorOf(() => parseConfig({ gateway: { token: "sekrit" } }));
    assert.match(message, /gateway\.token: token must be at least 16 characters/);
    assert.doesNotMatch(message, /sekrit/);
  });
});

describe("parseConfig: configs copied from other MCP clients", () => {
  test("Cline (cline_mcp_settings.json): disabled, autoApprove, timeout, type, transportType", () => {
    const { config, warnings, disabledServers } = parseConfigDetailed({
      mcpServers: {
        github: {
          command: "npx",
          args: ["-y", "@modelcontextprotocol/server-github"],
          env: { GITHUB_PERSONAL_ACCESS_TOKEN: "x" },
          disabled: false,
          autoApprove: [],
          timeout: 60,
          type: "stdio",
        },
        docs: { type: "streamableHttp", url: "https://example.com/mcp", disabled: false, autoApprove: ["search"] },
        legacy: { transportType: "sse", url: "https://example.com/sse" },
        off: { command: "node", args: ["server.js"], disabled: true, autoApprove: ["x"], timeout: 30 },
      },
    });
    assert.deepEqual(Object.keys(config.mcpServers), ["github", "docs", "legacy"]);
    assert.deepEqual(disabledServers, ["off"]);
    assert.deepEqual(config.mcpServers["github"], {
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-github"],
      env: { GITHUB_PERSONAL_ACCESS_TOKEN: "x" },
    });
    assert.equal(remoteTransportOf(remote(config, "docs")), "streamable-http");
    assert.equal(remoteTransportOf(remote(config, "legacy")), "sse");
    assert.equal(warnings.length, 2, warnings.join("\n"));
    assert.match(warnings[0]!, /^mcpServers\.github\.timeout: ignored: .*gateway\.upstream\.requestTimeoutMs/);
    assert.match(warnings[1]!, /^mcpServers\.docs\.autoApprove: ignored: emceepee asks for no approvals/);
  });

  test("Claude Code (.mcp.json): type stdio / http / sse", () => {
    const { config, warnings } = parseConfigDetailed({
      mcpServers: {
        local: { type: "stdio", command: "npx", args: ["-y", "server"], env: {} },
        api: { type: "http", url: "https://api.example.com/mcp", headers: { Authorization: "Bearer t" } },
        events: { type: "sse", url: "https://api.example.com/sse" },
      },
    });
    assert.deepEqual(config.mcpServers["local"], { command: "npx", args: ["-y", "server"], env: {} });
    assert.deepEqual(remote(config, "api"), { url: "https://api.example.com/mcp", transport: "streamable-http", headers: { Authorization: "Bearer t" } });
    assert.equal(remoteTransportOf(remote(config, "events")), "sse");
    assert.deepEqual(warnings, []);
  });

  test("Windsurf (mcp_config.json): serverUrl, disabled, disabledTools", () => {
    const { config, warnings, disabledServers } = parseConfigDetailed({
      mcpServers: {
        search: { serverUrl: "https://search.example.com/mcp", headers: { "X-Key": "k" } },
        git: { command: "uvx", args: ["mcp-server-git"], disabled: false, disabledTools: ["git_reset"], env: {} },
        ollama: { command: "py", args: ["-m", "mcp_ollama"], disabled: true, env: {} },
      },
    });
    assert.deepEqual(remote(config, "search"), { url: "https://search.example.com/mcp", headers: { "X-Key": "k" } });
    assert.equal(remoteTransportOf(remote(config, "search")), "streamable-http");
    assert.deepEqual(disabledServers, ["ollama"]);
    assert.deepEqual(Object.keys(config.mcpServers), ["search", "git"]);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /^mcpServers\.git\.disabledTools: not applied: the tools listed \(git_reset\) stay visible/);
  });

  test("Roo Code / Kilo Code: alwaysAllow, watchPaths, type streamable-http", () => {
    const { config, warnings } = parseConfigDetailed({
      mcpServers: {
        fs: { command: "node", args: ["fs.js"], alwaysAllow: ["read_file"], watchPaths: ["fs.js"], timeout: 120 },
        api: { type: "streamable-http", url: "https://example.com/mcp", alwaysAllow: [] },
      },
    });
    assert.equal(remoteTransportOf(remote(config, "api")), "streamable-http");
    assert.deepEqual(
      warnings.map((w) => w.split(":")[0]),
      ["mcpServers.fs.timeout", "mcpServers.fs.alwaysAllow", "mcpServers.fs.watchPaths"],
    );
  });

  test("Windsurf's url and serverUrl together are one too many", () => {
    const message = configErrorOf(() => parseConfig({ mcpServers: { s: { url: "https://a/mcp", serverUrl: "https://b/mcp" } } }));
    assert.match(message, /mcpServers\.s: has both "url" and "serverUrl" \(Windsurf's name for url\); keep one of them/);
  });

  test("a disabled server is still checked, so a typo does not hide until it is switched on", () => {
    const message = configErrorOf(() => parseConfig({ mcpServers: { off: { command: "x", disabled: true, evn: {} } } }));
    assert.match(message, /mcpServers\.off: unknown key 'evn' \(did you mean 'env'\?\)/);
  });

  test("a key no known client writes is still an error that lists the accepted keys", () => {
    const message = configErrorOf(() => parseConfig({ mcpServers: { r: { url: "https://example.com/mcp", retries: 3 } } }));
    assert.match(
      message,
      /mcpServers\.r: unknown key 'retries'; a remote server accepts url, headers, auth, secrets, type, transport, sharing, disabled, timeout, autoApprove, alwaysAllow, disabledTools, watchPaths, transportType, serverUrl; fix or remove 'retries'/,
    );
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
    await assert.rejects(loadConfig({ env: {}, overrides: { allowedOrigins: "https://a.example" } }), configError(/--allowed-origins: /));
  });

  test("--allowed-hosts / --allowed-origins replace the file's lists", async () => {
    const file = await write("allowed.json", { gateway: { allowedHosts: ["file.example"], allowedOrigins: ["https://file.example"] } });
    const c = await loadConfig({ file, env: {}, overrides: { allowedHosts: ["gw.example:8808"], allowedOrigins: undefined } });
    assert.deepEqual(c.gateway.allowedHosts, ["gw.example:8808"]);
    assert.deepEqual(c.gateway.allowedOrigins, ["https://file.example"]);
  });

  test("the file is validated on its own: a bad gateway.port is an error even when --port overrides it", async () => {
    const file = await write("bad-port-overridden.json", { gateway: { port: "eighty" } });
    await assert.rejects(loadConfig({ file, env: {}, overrides: { port: 9000 } }), (err: unknown) => {
      configError(/gateway\.port: .*\(got the string "eighty"\)/)(err);
      assert.ok((err as Error).message.includes(`invalid config file ${path.resolve(file)}`));
      assert.doesNotMatch((err as Error).message, /--port/);
      return true;
    });
  });

  test("a bad flag is reported as the flag's, never as the embedded demo config's, and the token is not echoed", async () => {
    await assert.rejects(loadConfig({ env: {}, overrides: { token: "abc" } }), (err: unknown) => {
      configError(
        /^invalid command-line option:\n {2}- --token: token must be at least 16 characters \(got a 3-character string\); change the value of --token$/,
      )(err);
      assert.doesNotMatch((err as Error).message, /demo|abc/);
      return true;
    });
    const file = await write("fine.json", { mcpServers: {} });
    await assert.rejects(
      loadConfig({ file, env: {}, overrides: { port: 70000, logLevel: "loud" } }),
      configError(/--port: .*\(got the number 70000\); change the value of --port\n {2}- --log-level: .*\(got the string "loud"\)/),
    );
  });

  test("a token from EMCEEPEE_TOKEN is reported as EMCEEPEE_TOKEN's", async () => {
    await assert.rejects(
      loadConfig({ env: { EMCEEPEE_TOKEN: "short" }, overrides: { token: "short" } }),
      configError(/EMCEEPEE_TOKEN: token must be at least 16 characters \(got a 5-character string\); change the value of EMCEEPEE_TOKEN/),
    );
  });

  test("returns warnings and disabled servers for the CLI to log, and leaves disabled servers out", async () => {
    const file = await write("cline.json", {
      mcpServers: {
        on: { command: "node", args: ["a.js"], timeout: 60, autoApprove: [] },
        off: { command: "node", args: ["b.js"], disabled: true },
      },
    });
    const c = await loadConfig({ file, env: {} });
    assert.deepEqual(Object.keys(c.mcpServers), ["on"]);
    assert.deepEqual(c.disabledServers, ["off"]);
    assert.equal(c.warnings.length, 1);
    assert.match(c.warnings[0]!, /^mcpServers\.on\.timeout: ignored: /);
    assert.equal(Object.isFrozen(c), true);
    const demo = await loadConfig({ env: {} });
    assert.deepEqual([demo.warnings, demo.disabledServers], [[], []]);
  });

  test("Cursor's ${env:NAME} and ${userHome} are interpolated; ${workspaceFolder} is named as unknowable", async () => {
    const file = await write("cursor.json", {
      mcpServers: {
        api: { url: "https://example.com/mcp", headers: { Authorization: "Bearer ${env:API_TOKEN}" } },
        fs: { command: "npx", args: ["server-fs", "${userHome}/projects"] },
      },
    });
    const c = await loadConfig({ file, env: { API_TOKEN: "t0k3n", HOME: "/home/op" } });
    assert.deepEqual(remote(c, "api").headers, { Authorization: "Bearer t0k3n" });
    const fs = c.mcpServers["fs"];
    assert.ok(fs && isStdioConfig(fs));
    assert.deepEqual(fs.args, ["server-fs", "/home/op/projects"]);

    await assert.rejects(loadConfig({ file, env: {} }), configError(/mcpServers\.api\.headers\.Authorization: environment variable API_TOKEN is not set/));
    const ws = await write("cursor-ws.json", { mcpServers: { fs: { command: "npx", args: ["${workspaceFolder}"] } } });
    await assert.rejects(
      loadConfig({ file: ws, env: {} }),
      configError(/mcpServers\.fs\.args\[0\]: \$\{workspaceFolder\} is Cursor's project folder.*; write the path instead/),
    );
  });

  test("Cursor's envFile is read relative to the config file and merged under env (env wins)", async () => {
    await mkdir(path.join(dir, "envs"), { recursive: true });
    await writeFile(
      path.join(dir, "envs", "server.env"),
      ["# secrets", "export API_KEY=abc123", 'QUOTED="two\\nlines"', "SINGLE='$NOT_EXPANDED'", "PLAIN=value # comment", "SHARED=from-file", ""].join("\n"),
    );
    const file = await write("envfile.json", { mcpServers: { s: { command: "node", envFile: "envs/server.env", env: { SHARED: "from-env" } } } });
    const c = await loadConfig({ file, env: {} });
    const s = c.mcpServers["s"];
    assert.ok(s && isStdioConfig(s));
    assert.deepEqual(s.env, { API_KEY: "abc123", QUOTED: "two\nlines", SINGLE: "$NOT_EXPANDED", PLAIN: "value", SHARED: "from-env" });
    assert.equal("envFile" in s, false);

    const missing = await write("envfile-missing.json", { mcpServers: { s: { command: "node", envFile: "nope.env" } } });
    await assert.rejects(
      loadConfig({ file: missing, env: {} }),
      configError(/mcpServers\.s\.envFile: cannot read .*nope\.env: .*; fix the path \(relative paths start at the config file's folder\) or remove envFile/),
    );
    await writeFile(path.join(dir, "bad.env"), "API_KEY abc\n");
    const bad = await write("envfile-bad.json", { mcpServers: { s: { command: "node", envFile: "bad.env" } } });
    await assert.rejects(loadConfig({ file: bad, env: {} }), configError(/mcpServers\.s\.envFile .*bad\.env\) line 1: expected KEY=VALUE/));
  });

  test("a relative cwd and a relative command path start at the config file's folder, whatever emceepee's working directory", async () => {
    await mkdir(path.join(dir, "nested"), { recursive: true });
    const file = await write("nested/relative.json", {
      mcpServers: {
        cwdOnly: { command: "node", args: ["server.js"], cwd: "tools" },
        commandOnly: { command: "./bin/server.sh" },
        both: { command: "../run.sh", cwd: "app/sub" },
        parent: { command: "../bin/x", cwd: "." },
        bare: { command: "npx", args: ["./relative-arg"] },
        absolute: { command: "/usr/bin/env", cwd: "/srv" },
        remote: { url: "https://example.com/mcp" },
      },
    });
    const folder = path.join(dir, "nested");
    const stdio = (c: Awaited<ReturnType<typeof loadConfig>>, name: string) => {
      const s = c.mcpServers[name];
      assert.ok(s && isStdioConfig(s), name);
      return s;
    };
    const cwdBefore = process.cwd();
    process.chdir(os.tmpdir()); // emceepee's own working directory must not matter
    let c: Awaited<ReturnType<typeof loadConfig>>;
    try {
      c = await loadConfig({ file: path.relative(os.tmpdir(), file), env: {} });
    } finally {
      process.chdir(cwdBefore);
    }
    assert.deepEqual(stdio(c, "cwdOnly"), { command: "node", args: ["server.js"], cwd: path.join(folder, "tools") }, "a bare command stays for PATH");
    assert.deepEqual(stdio(c, "commandOnly"), { command: path.join(folder, "bin/server.sh"), args: [] });
    assert.deepEqual(stdio(c, "both"), { command: path.join(folder, "app/run.sh"), args: [], cwd: path.join(folder, "app/sub") }, "command after cd cwd");
    assert.equal(stdio(c, "parent").command, path.join(dir, "bin/x"));
    assert.deepEqual(stdio(c, "bare"), { command: "npx", args: ["./relative-arg"] }, "args are the server's to read");
    assert.deepEqual(stdio(c, "absolute"), { command: "/usr/bin/env", args: [], cwd: "/srv" });
    assert.deepEqual(c.mcpServers["remote"], { url: "https://example.com/mcp" });
  });

  test("envFile on a remote server is an error, as Cursor reads it for stdio servers only", async () => {
    const file = await write("envfile-remote.json", { mcpServers: { r: { url: "https://example.com/mcp", envFile: ".env" } } });
    await assert.rejects(loadConfig({ file, env: {} }), configError(/mcpServers\.r: unknown key 'envFile'; a remote server accepts/));
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
