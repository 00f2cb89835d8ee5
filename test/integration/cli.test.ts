/**
 * The `emceepee` CLI run from source as a child process: --help, config and
 * flag validation, `serve` (HTTP) start-up and SIGTERM, and the `stdio`
 * downstream transport against the real server-everything.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ROOT, block, call, connectClient, waitConnected } from "../helpers/gateway.js";
import {
  CLI_ARGS,
  assertSameAsDirect,
  connectDirectEverything,
  firstText,
  initializeBody,
  listServers,
  runCli,
  startCliServe,
  stopChild,
  waitExit,
  type RunningCli,
} from "../helpers/core-extra.js";

const SLOW = { timeout: 120_000 };

let tmp: string | undefined;
async function tempConfig(name: string, content: unknown): Promise<string> {
  tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-cli-test-"));
  const file = path.join(tmp, name);
  await writeFile(file, typeof content === "string" ? content : JSON.stringify(content));
  return file;
}

after(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe("emceepee --help", () => {
  test("the top-level help lists the serve and stdio commands", SLOW, async () => {
    const run = await runCli(ROOT, ["--help"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /Usage: emceepee/);
    assert.match(run.stdout, /^\s+serve\b/m);
    assert.match(run.stdout, /^\s+stdio\b/m);
  });

  test("serve --help documents --config, --host, --port, --token and --log-level", SLOW, async () => {
    const run = await runCli(ROOT, ["serve", "--help"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /Usage: emceepee serve/);
    for (const flag of [/-c, --config <file>/, /--host <host>/, /-p, --port <port>/, /--token <token>/, /--log-level <level>/]) {
      assert.match(run.stdout, flag);
    }
    assert.match(run.stdout, /0 for any free port/);
  });

  test("stdio --help documents --config and --log-level", SLOW, async () => {
    const run = await runCli(ROOT, ["stdio", "--help"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /Usage: emceepee stdio/);
    assert.match(run.stdout, /-c, --config <file>/);
    assert.match(run.stdout, /--log-level <level>/);
    assert.doesNotMatch(run.stdout, /--port/, "stdio has no port");
  });
});

describe("config and flag validation", () => {
  test("an unknown key in the gateway section fails at start, naming the key and its path", SLOW, async () => {
    const file = await tempConfig("unknown-gateway-key.json", { mcpServers: {}, gateway: { prot: 8080 } });
    const run = await runCli(ROOT, ["serve", "--config", file]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /EMCP_CONFIG_INVALID/);
    assert.match(run.stderr, /gateway/);
    assert.match(run.stderr, /'prot'/);
    assert.doesNotMatch(run.stdout, /listening/);
  });

  test("an unknown top-level key or server key fails at start, naming the key", SLOW, async () => {
    const top = await runCli(ROOT, ["serve", "--config", await tempConfig("unknown-top-key.json", { mcpServer: {} })]);
    assert.notEqual(top.code, 0);
    assert.match(top.stderr, /'mcpServer'/);

    const server = await runCli(ROOT, [
      "serve",
      "--config",
      await tempConfig("unknown-server-key.json", { mcpServers: { x: { command: "node", argz: ["a"] } } }),
    ]);
    assert.notEqual(server.code, 0);
    assert.match(server.stderr, /mcpServers\.x/);
    assert.match(server.stderr, /'argz'/);
  });

  test("stdio checks the config the same way", SLOW, async () => {
    const file = await tempConfig("unknown-gateway-key-stdio.json", { mcpServers: {}, gateway: { tasks: { maxTTL: 5 } } });
    const run = await runCli(ROOT, ["stdio", "--config", file]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /gateway\.tasks/);
    assert.match(run.stderr, /'maxTTL'/);
    assert.equal(run.stdout, "", "nothing but MCP may go to stdout");
  });

  test("a config file that does not exist or is not JSON is reported", SLOW, async () => {
    const missing = await runCli(ROOT, ["serve", "--config", path.join(os.tmpdir(), "emceepee-no-such-config.json")]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /cannot read config file/);

    const broken = await runCli(ROOT, ["serve", "--config", await tempConfig("broken.json", "{ not json")]);
    assert.notEqual(broken.code, 0);
    assert.match(broken.stderr, /not valid JSON/);
  });

  for (const bad of ["99999", "abc", "-1", "80.5"]) {
    test(`--port ${bad} is rejected`, SLOW, async () => {
      const run = await runCli(ROOT, ["serve", "--config", await tempConfig("empty.json", { mcpServers: {} }), `--port=${bad}`]);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /--port/);
      assert.match(run.stderr, /0 to 65535/);
      assert.doesNotMatch(run.stdout, /listening/);
    });
  }

  test("a port out of range in the config file is rejected, naming gateway.port", SLOW, async () => {
    const run = await runCli(ROOT, ["serve", "--config", await tempConfig("bad-port.json", { mcpServers: {}, gateway: { port: 70000 } })]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /gateway\.port/);
  });

  // Regression: the --port parser used Number(value), and Number("") is 0, so an empty
  // value (e.g. `--port "$PORT"` with PORT unset) silently listened on a random port.
  test("an empty --port value is rejected, not taken as 0", SLOW, async () => {
    const run = await runCli(ROOT, ["serve", "--config", await tempConfig("empty.json", { mcpServers: {} }), "--port", "", "--log-level", "silent"], {
      stopWhenStdout: /listening on/,
    });
    assert.doesNotMatch(run.stdout, /listening on/, "an empty port must not start a server on a random port");
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /--port/);
  });

  test("a --log-level that is not a level is rejected", SLOW, async () => {
    const run = await runCli(ROOT, ["serve", "--log-level", "loud"]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /loud/);
  });
});

describe("emceepee serve --port 0", () => {
  let served: RunningCli | undefined;
  let client: Client | undefined;

  before(async () => {
    served = await startCliServe(ROOT, ["--port", "0", "--log-level", "silent"]);
  });

  after(async () => {
    await client?.close().catch(() => undefined);
    if (served) await stopChild(served.child);
  });

  test("prints the listening URL with the demo upstream, answers MCP initialize, and exits 0 on SIGTERM", SLOW, async () => {
    const { url, child } = served!;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.notEqual(new URL(url).port, "0");
    assert.match(served!.stdout(), /\(upstreams: everything\)/);

    client = await connectClient(url);
    assert.equal(client.getServerVersion()?.name, "emceepee");
    const tools = (await client.listTools()).tools.map((t) => t.name);
    for (const name of ["list_servers", "list_tools", "execute_tool", "add_server", "remove_server", "get_notifications", "get_logs"]) {
      assert.ok(tools.includes(name), `${name} missing from ${tools.join(", ")}`);
    }
    await waitConnected(client, "everything");
    const echo = await call(client, "execute_tool", { server: "everything", tool: "echo", args: { message: "from the CLI" } });
    assert.equal(firstText(echo), "Echo: from the CLI");

    child.kill("SIGTERM");
    const { code, signal } = await waitExit(child, 30_000);
    assert.equal(signal, null, `killed by ${signal}; stderr: ${served!.stderr()}`);
    assert.equal(code, 0, `stderr: ${served!.stderr()}`);
  });
});

describe("emceepee stdio (demo config, server-everything)", () => {
  let client!: Client;
  let direct: Client | undefined;
  let transport: StdioClientTransport | undefined;
  const protocolErrors: Error[] = [];
  let stderr = "";

  before(async () => {
    transport = new StdioClientTransport({ command: process.execPath, args: [...CLI_ARGS, "stdio"], cwd: ROOT, stderr: "pipe" });
    transport.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    client = new Client({ name: "stdio-test-client", version: "1.0.0" });
    client.onerror = (err) => protocolErrors.push(err);
    await client.connect(transport);
    direct = await connectDirectEverything();
    await waitConnected(client, "everything");
  });

  after(async () => {
    await client.close().catch(() => undefined);
    await direct?.close().catch(() => undefined);
  });

  test("initialize answers as emceepee with the meta-tools", SLOW, async () => {
    assert.equal(client.getServerVersion()?.name, "emceepee");
    assert.ok(client.getServerCapabilities()?.tools);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    for (const name of ["list_servers", "list_tools", "execute_tool", "add_server", "remove_server"]) {
      assert.ok(tools.includes(name), `${name} missing from ${tools.join(", ")}`);
    }
  });

  test("list_servers shows server-everything connected", SLOW, async () => {
    const servers = await listServers(client);
    const everything = servers.find((s) => s.name === "everything");
    assert.ok(everything, JSON.stringify(servers));
    assert.equal(everything.status, "connected");
    assert.deepEqual(everything.server_info, JSON.parse(JSON.stringify(direct!.getServerVersion())));
  });

  test("list_tools and execute_tool equal a direct SDK client's results", SLOW, async () => {
    await assertSameAsDirect(client, "everything", direct!);
  });

  test("errors come back as isError results with stable codes", SLOW, async () => {
    const unknown = await call(client, "execute_tool", { server: "nowhere", tool: "echo", args: {} });
    assert.equal(unknown.isError, true);
    assert.match(firstText(unknown), /^EMCP_UNKNOWN_SERVER/);
    const wrongType = await call(client, "execute_tool", { server: 42, tool: "echo" });
    assert.equal(wrongType.isError, true);
    assert.match(firstText(wrongType), /server/);
    assert.ok(block(await call(client, "list_servers"), "servers"), "still serving after errors");
  });

  test("stdout carried only MCP messages", SLOW, async () => {
    assert.deepEqual(
      protocolErrors.map((e) => e.message),
      [],
      `stderr: ${stderr}`,
    );
  });
});

test("emceepee stdio exits 0 by itself when stdin ends", SLOW, async () => {
  const empty = await tempConfig("stdio-empty.json", { mcpServers: {} });
  const child = spawn(process.execPath, [...CLI_ARGS, "stdio", "--config", empty, "--log-level", "silent"], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "pipe"],
  });
  try {
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
    child.stderr.resume();
    child.stdin.write(initializeBody(7) + "\n");
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no initialize response; stdout so far: ${out}`)), 60_000);
      const onData = () => {
        const nl = out.indexOf("\n");
        if (nl >= 0) {
          clearTimeout(timer);
          child.stdout.off("data", onData);
          resolve(out.slice(0, nl));
        }
      };
      child.stdout.on("data", onData);
    });
    const msg = JSON.parse(line) as { id?: unknown; result?: { serverInfo?: { name?: string } } };
    assert.equal(msg.id, 7);
    assert.equal(msg.result?.serverInfo?.name, "emceepee");
    child.stdin.end();
    const { code, signal } = await waitExit(child, 30_000);
    assert.equal(signal, null);
    assert.equal(code, 0);
  } finally {
    await stopChild(child);
  }
});
