/**
 * The `emceepee` CLI (compiled, test/helpers/cli-build.ts): --help, --version,
 * config and flag validation, `check`, `serve` (HTTP) start-up — banner,
 * listen failures, the beyond-loopback warning, --allowed-hosts/-origins —
 * and SIGTERM, and the `stdio` downstream transport against the real
 * server-everything (and its log level). Health probes, reload, the start-up
 * check and `npm start` are in ops.test.ts. Commands that only print and end
 * (help, schema, check without --connect, config and flag errors) run in one
 * shared CLI process (test/helpers/cli-host.ts); --version, serving, stdio,
 * listen failures and exit paths each spawn the real CLI. The groups (and
 * the spawning cases within them) run at once: each has its own processes,
 * ports and config files, so the file takes about as long as its longest
 * group instead of the sum of every start-up and exit it waits for.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { existsSync, readFileSync } from "node:fs";
import { LATEST_VERSION } from "../../src/store/sqlite/migrations.js";
import { ROOT, block, call, connectClient, everythingStdio } from "../helpers/gateway.js";
import {
  CLI_ARGS,
  assertSameAsDirect,
  connectDirectEverything,
  firstText,
  freePort,
  initializeBody,
  listServers,
  MCP_POST_HEADERS,
  pollFor,
  rawRequest,
  runCli,
  startCliServe,
  stopChild,
  waitExit,
  type RunningCli,
} from "../helpers/core-extra.js";
import { runCliHosted } from "../helpers/cli-host.js";

/** Tests spawn the CLI or ask the shared one, some several times: a bound for a loaded machine, far above the sum of their waits. */
const SLOW = { timeout: 600_000 };

let tmp: Promise<string> | undefined;
/** Config files by name, each written once: cases running at once read the same file (e.g. empty.json) while none rewrites it. */
const written = new Map<string, { text: string; file: Promise<string> }>();
function tempConfig(name: string, content: unknown): Promise<string> {
  const text = typeof content === "string" ? content : JSON.stringify(content);
  const known = written.get(name);
  if (known) {
    assert.equal(known.text, text, `${name} is written with one content`);
    return known.file;
  }
  tmp ??= mkdtemp(path.join(os.tmpdir(), "emceepee-cli-test-"));
  const file = tmp.then(async (dir) => {
    const at = path.join(dir, name);
    await writeFile(at, text);
    return at;
  });
  written.set(name, { text, file });
  return file;
}

after(async () => {
  if (tmp) await rm(await tmp, { recursive: true, force: true });
});

/** `emceepee <args>` run once for the file (the help texts several tests read: once each, not once per test). */
const once = new Map<string, ReturnType<typeof runCli>>();
function runCliOnce(args: string[]): ReturnType<typeof runCli> {
  const key = JSON.stringify(args);
  if (!once.has(key)) once.set(key, runCliHosted(args));
  return once.get(key)!;
}

describe("emceepee CLI (the groups at once)", { concurrency: true }, () => {
  describe("emceepee --help", () => {
    test("the top-level help lists the serve and stdio commands", SLOW, async () => {
      const run = await runCliOnce(["--help"]);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /Usage: emceepee/);
      assert.match(run.stdout, /^\s+serve\b/m);
      assert.match(run.stdout, /^\s+stdio\b/m);
    });

    test("serve --help documents --config, --host, --port, --token and --log-level", SLOW, async () => {
      const run = await runCliOnce(["serve", "--help"]);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /Usage: emceepee serve/);
      for (const flag of [/-c, --config <file>/, /--host <host>/, /-p, --port <port>/, /--token <token>/, /--log-level <level>/]) {
        assert.match(run.stdout, flag);
      }
      assert.match(run.stdout, /0 for any free port/);
    });

    test("stdio --help documents --config and --log-level", SLOW, async () => {
      const run = await runCliOnce(["stdio", "--help"]);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /Usage: emceepee stdio/);
      assert.match(run.stdout, /-c, --config <file>/);
      assert.match(run.stdout, /--log-level <level>/);
      assert.doesNotMatch(run.stdout, /--port/, "stdio has no port");
    });

    test("--help shows the real defaults, not objects", SLOW, async () => {
      const stdio = await runCliOnce(["stdio", "--help"]);
      assert.match(stdio.stdout.replace(/\s+/g, " "), /server:<name> \(one upstream as is\) or virtual:<name> \(a virtual server\) \(default: meta\)/);
      assert.doesNotMatch(stdio.stdout, /\{"kind"|\[object/);
      const serve = await runCliOnce(["serve", "--help"]);
      const flat = serve.stdout.replace(/\s+/g, " ");
      assert.match(flat, /--host <host> interface to bind \(default: gateway\.host, else 127\.0\.0\.1;/);
      assert.match(flat, /--port <port> port to listen on \(default: gateway\.port, else 8808;/);
      assert.match(flat, /--log-level <level> log level of the JSON logs on stderr \(default: gateway\.logLevel, else info\)/);
      for (const flag of ["--allowed-hosts <hosts>", "--allowed-origins <origins>", "--no-upstream-check"]) assert.ok(flat.includes(flag), flag);
      const top = await runCliOnce(["--help"]);
      assert.match(top.stdout, /^\s+check\b/m);
      assert.match(top.stdout, /-V, --version/);
    });

    test("--version prints the package's version, the store schema version and the Node.js version", SLOW, async () => {
      const { version } = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as { version: string };
      const runs = await Promise.all(["--version", "-V"].map((flag) => runCli(ROOT, [flag])));
      for (const run of runs) {
        assert.equal(run.code, 0, run.stderr);
        assert.equal(run.stdout, `emceepee ${version} (store schema ${LATEST_VERSION}, Node.js ${process.versions.node})\n`);
      }
    });

    test(
      "a spawned CLI's stack lines name src/ files and lines (the bundle's source maps)",
      { ...SLOW, skip: process.env.EMCEEPEE_TEST_CLI === "modules" && "the per-module tree has no source maps" },
      async () => {
        // `schema` writes its one line from src/cli/program.ts; a preload makes each stdout write print the stack that wrote it.
        const preload = `const w = process.stdout.write.bind(process.stdout); process.stdout.write = (c, ...r) => w(String(new Error("write").stack) + "\\n", ...r);`;
        const run = await runCli(ROOT, ["schema"], { env: { NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(preload)}` } });
        assert.equal(run.code, 0, run.stderr);
        const line =
          readFileSync(path.join(ROOT, "src/cli/program.ts"), "utf8")
            .split("\n")
            .findIndex((l) => l.includes("JSON.stringify(configJsonSchema()")) + 1;
        assert.ok(line > 0, "src/cli/program.ts writes the schema");
        // The file by its absolute path, in this checkout or in the one whose node_modules/ the bundle's cache is in: a copy
        // of the repository with node_modules/ linked to another's (the lead's timed runs) maps to the other's src/.
        const named = new RegExp(`(/[^\\s:()]+)/src/cli/program\\.ts:${line}:`).exec(run.stdout);
        assert.ok(
          named?.[1] && existsSync(path.join(named[1], "src/cli/program.ts")),
          `a stack line names src/cli/program.ts:${line}: ${run.stdout.slice(0, 600)}`,
        );
      },
    );
  });

  describe("emceepee check", { concurrency: true }, () => {
    test("a valid config: exit 0 and a summary (servers, disabled, warnings, where serve would listen)", SLOW, async () => {
      const file = await tempConfig("check-valid.json", {
        mcpServers: {
          fs: { command: "npx", args: ["-y", "server-fs"], timeout: 30 },
          remote: { url: "https://user:pw@example.com/mcp?key=secret", headers: { Authorization: "Bearer xyz" } },
          off: { command: "node", disabled: true },
        },
        gateway: { port: 9123 },
      });
      const run = await runCliHosted(["check", "--config", file]);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, new RegExp(`^config OK: ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"));
      assert.match(run.stdout, /^servers \(2\):$/m);
      assert.match(run.stdout, /^ {2}fs {2}stdio {2}npx$/m);
      assert.match(run.stdout, /^ {2}remote {2}streamable-http {2}https:\/\/example\.com\/mcp$/m);
      assert.match(run.stdout, /^disabled \(skipped\): off$/m);
      assert.match(run.stdout, /^warning: mcpServers\.fs\.timeout: ignored: /m);
      assert.match(run.stdout, /^serve would listen on http:\/\/127\.0\.0\.1:9123\/mcp \(token: none\)$/m);
      assert.doesNotMatch(run.stdout, /secret|pw@|xyz/, "no credentials are printed");
    });

    test("an invalid config: exit 2 with the message naming the key", SLOW, async () => {
      const file = await tempConfig("check-invalid.json", { mcpServers: { x: { command: "node", args: "a b" } } });
      const run = await runCliHosted(["check", "--config", file]);
      assert.equal(run.code, 2);
      assert.match(run.stderr, /EMCP_CONFIG_INVALID: .*\n.*mcpServers\.x\.args: must be an array of strings/);
      assert.equal(run.stdout, "");
    });

    test("--connect tries each upstream once and reports; exit 1 when one cannot be reached", SLOW, async () => {
      const file = await tempConfig("check-connect.json", {
        mcpServers: { everything: everythingStdio(), broken: { command: "./no-such-server.sh" } },
      });
      const goodFile = await tempConfig("check-good.json", { mcpServers: { everything: everythingStdio() } });
      // The two runs at once: each spawns its own CLI and upstreams.
      const [run, good] = await Promise.all([
        runCli(ROOT, ["check", "--config", file, "--connect"]),
        runCli(ROOT, ["check", "--config", goodFile, "--connect"]),
      ]);
      assert.equal(run.code, 1, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
      assert.match(run.stdout, /^ {2}ok {6}everything {2}\(mcp-servers\/everything [^,]+, \d+ tools\)$/m);
      // The relative command was resolved against the config file's folder (the spawn error names the path).
      assert.match(
        run.stdout,
        new RegExp(`^ {2}FAILED {2}broken {2}.*${path.join(path.dirname(file), "no-such-server.sh").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`, "m"),
      );
      assert.match(run.stdout, /^1 of 2 servers could not be reached$/m);

      assert.equal(good.code, 0, good.stdout + good.stderr);
      assert.match(good.stdout, /^every server answered$/m);
    });

    test("--connect names a refused connection instead of 'fetch failed'", SLOW, async () => {
      const port = await freePort();
      const file = await tempConfig("check-refused.json", { mcpServers: { gone: { url: `http://127.0.0.1:${port}/mcp` } } });
      const run = await runCli(ROOT, ["check", "--config", file, "--connect"]);
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.match(run.stdout, new RegExp(`^ {2}FAILED {2}gone {2}.*connection refused at 127\\.0\\.0\\.1:${port}`, "m"));
      assert.doesNotMatch(run.stdout, /fetch failed/);
    });

    test("the token comes from EMCEEPEE_TOKEN or --token and is validated as serve does", SLOW, async () => {
      const file = await tempConfig("check-token.json", { mcpServers: {} });
      const fromEnv = await runCliHosted(["check", "--config", file], { env: { EMCEEPEE_TOKEN: "a-token-long-enough-1234" } });
      assert.equal(fromEnv.code, 0, fromEnv.stderr);
      assert.match(fromEnv.stdout, /\(token: set\)$/m);
      const short = await runCliHosted(["check", "--config", file, "--token", "short"]);
      assert.equal(short.code, 2);
      assert.match(short.stderr, /--token: token must be at least 16 characters/);
      assert.doesNotMatch(short.stderr, /short/);
    });
  });

  describe("emceepee schema", () => {
    test("prints a JSON Schema of the config file", SLOW, async () => {
      const run = await runCliHosted(["schema"]);
      assert.equal(run.code, 0, run.stderr);
      const schema = JSON.parse(run.stdout) as { $schema: string; properties: Record<string, unknown> };
      assert.equal(schema.$schema, "https://json-schema.org/draft/2020-12/schema");
      assert.deepEqual(Object.keys(schema.properties).sort(), ["$schema", "gateway", "mcpServers"]);
    });
  });

  describe("config and flag validation", () => {
    test("an unknown key in the gateway section fails at start, naming the key and its path", SLOW, async () => {
      const file = await tempConfig("unknown-gateway-key.json", { mcpServers: {}, gateway: { prot: 8080 } });
      const run = await runCliHosted(["serve", "--config", file]);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /EMCP_CONFIG_INVALID/);
      assert.match(run.stderr, /gateway/);
      assert.match(run.stderr, /'prot'/);
      assert.doesNotMatch(run.stdout, /listening/);
    });

    test("an unknown top-level key or server key fails at start, naming the key", SLOW, async () => {
      const top = await runCliHosted(["serve", "--config", await tempConfig("unknown-top-key.json", { mcpServer: {} })]);
      assert.notEqual(top.code, 0);
      assert.match(top.stderr, /'mcpServer'/);

      const server = await runCliHosted([
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
      const run = await runCliHosted(["stdio", "--config", file]);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /gateway\.tasks/);
      assert.match(run.stderr, /'maxTTL'/);
      assert.equal(run.stdout, "", "nothing but MCP may go to stdout");
    });

    test("a config file that does not exist or is not JSON is reported", SLOW, async () => {
      const missing = await runCliHosted(["serve", "--config", path.join(os.tmpdir(), "emceepee-no-such-config.json")]);
      assert.notEqual(missing.code, 0);
      assert.match(missing.stderr, /cannot read config file/);

      const broken = await runCliHosted(["serve", "--config", await tempConfig("broken.json", "{ not json")]);
      assert.notEqual(broken.code, 0);
      assert.match(broken.stderr, /not valid JSON/);
    });

    for (const bad of ["99999", "abc", "-1", "80.5"]) {
      test(`--port ${bad} is rejected`, SLOW, async () => {
        const run = await runCliHosted(["serve", "--config", await tempConfig("empty.json", { mcpServers: {} }), `--port=${bad}`]);
        assert.notEqual(run.code, 0);
        assert.match(run.stderr, /--port/);
        assert.match(run.stderr, /0 to 65535/);
        assert.doesNotMatch(run.stdout, /listening/);
      });
    }

    test("a port out of range in the config file is rejected, naming gateway.port", SLOW, async () => {
      const run = await runCliHosted(["serve", "--config", await tempConfig("bad-port.json", { mcpServers: {}, gateway: { port: 70000 } })]);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /gateway\.port/);
    });

    // Regression: the --port parser used Number(value), and Number("") is 0, so an empty
    // value (e.g. `--port "$PORT"` with PORT unset) silently listened on a random port.
    test("an empty --port value is rejected, not taken as 0", SLOW, async () => {
      const run = await runCliHosted(["serve", "--config", await tempConfig("empty.json", { mcpServers: {} }), "--port", "", "--log-level", "silent"]);
      assert.doesNotMatch(run.stdout, /listening on/, "an empty port must not start a server on a random port");
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /--port/);
    });

    test("a --log-level that is not a level is rejected", SLOW, async () => {
      const run = await runCliHosted(["serve", "--log-level", "loud"]);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /loud/);
    });
  });

  describe("emceepee serve: start-up messages and flags", { concurrency: true }, () => {
    const running: RunningCli[] = [];
    after(async () => {
      await Promise.all(running.map((r) => stopChild(r.child)));
    });
    /** `serve` on loopback with no token and no flags: one process for the two tests that look at it. */
    let loopback: Promise<RunningCli> | undefined;
    const loopbackServe = (): Promise<RunningCli> => {
      loopback ??= tempConfig("empty.json", { mcpServers: {} }).then(async (empty) => {
        const served = await startCliServe(ROOT, ["--config", empty, "--port", "0"]);
        running.push(served);
        return served;
      });
      return loopback;
    };

    test("the banner lists every endpoint: /mcp, /all/mcp, /servers/<name>/mcp for each server, /healthz and /readyz", SLOW, async () => {
      // Nothing connects to these servers (no session, no start-up check): they need not exist.
      const file = await tempConfig("banner.json", { mcpServers: { alpha: { command: "alpha-server" }, "b-2": { url: "http://127.0.0.1:1/mcp" } } });
      const served = await startCliServe(ROOT, ["--config", file, "--port", "0", "--log-level", "silent", "--no-upstream-check"]);
      running.push(served);
      const base = served.url.replace(/\/mcp$/, "");
      const out = served.stdout();
      assert.match(out, /\(upstreams: alpha, b-2\)/);
      for (const url of [`${base}/mcp`, `${base}/all/mcp`, `${base}/servers/alpha/mcp`, `${base}/servers/b-2/mcp`, `${base}/healthz`, `${base}/readyz`]) {
        assert.ok(out.includes(url), `${url} missing from the banner:\n${out}`);
      }
      assert.doesNotMatch(out, /checking each upstream/, "--no-upstream-check");
    });

    test("a port in use fails with exit 2 and says to pick another with --port (or --port 0)", SLOW, async () => {
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
      try {
        const taken = (blocker.address() as net.AddressInfo).port;
        const run = await runCli(ROOT, ["serve", "--config", await tempConfig("empty.json", { mcpServers: {} }), "--port", String(taken)], {
          stopWhenStdout: /listening on/,
        });
        assert.equal(run.code, 2, run.stderr);
        assert.match(
          run.stderr,
          new RegExp(`cannot listen on 127\\.0\\.0\\.1:${taken}: the port is already in use.*--port <n>, or --port 0 for any free port`),
        );
        assert.doesNotMatch(run.stderr, /EADDRINUSE|at Server\./, "no raw errno or stack");
      } finally {
        await new Promise<void>((resolve) => blocker.close(() => resolve()));
      }
    });

    test("binding beyond loopback without a token prints a loud warning; with a token it does not", SLOW, async () => {
      const empty = await tempConfig("empty.json", { mcpServers: {} });
      const open = await startCliServe(ROOT, ["--config", empty, "--host", "0.0.0.0", "--port", "0", "--log-level", "warn"]);
      running.push(open);
      assert.match(open.stderr(), /^emceepee: WARNING: listening on 0\.0\.0\.0, beyond this machine, WITHOUT A TOKEN: .*--token/m);
      assert.match(open.stderr(), /--allowed-hosts/, "remote clients also need their Host accepted");
      assert.match(open.stderr(), /"msg":"listening_beyond_loopback_without_token"/);
      const health = await rawRequest(open.url.replace(/\/mcp$/, "/healthz"), { method: "GET" });
      assert.equal(health.status, 200, "it still serves");

      const tokened = await startCliServe(ROOT, ["--config", empty, "--host", "0.0.0.0", "--port", "0", "--token", "a-token-of-16-chars-or-more"]);
      running.push(tokened);
      assert.doesNotMatch(tokened.stderr(), /WARNING/);
      assert.doesNotMatch((await loopbackServe()).stderr(), /WARNING/);
    });

    test("--allowed-hosts and --allowed-origins widen the Host/Origin checks (and bad values are refused)", SLOW, async () => {
      const empty = await tempConfig("empty.json", { mcpServers: {} });
      const served = await startCliServe(ROOT, [
        "--config",
        empty,
        "--port",
        "0",
        "--log-level",
        "silent",
        "--allowed-hosts",
        "gw.example,box.internal:9000",
        "--allowed-origins",
        "https://app.example.com",
      ]);
      running.push(served);
      const init = (headers: Record<string, string>) => rawRequest(served.url, { headers: { ...MCP_POST_HEADERS, ...headers }, body: initializeBody() });
      const port = new URL(served.url).port;
      assert.equal((await init({ Host: `gw.example:${port}` })).status, 200, "an allowed host name, any port");
      assert.equal((await init({ Host: "box.internal:9000" })).status, 200, "an allowed host:port");
      const foreign = await init({ Host: `evil.example:${port}` });
      assert.equal(foreign.status, 403);
      assert.match(foreign.body, /--allowed-hosts/);
      assert.equal((await init({ Origin: "https://app.example.com" })).status, 200, "an allowed origin");
      assert.equal((await init({ Origin: "https://evil.example.com" })).status, 403);

      const without = await loopbackServe();
      assert.equal((await rawRequest(without.url, { headers: { ...MCP_POST_HEADERS, Host: "gw.example" }, body: initializeBody() })).status, 403);

      const badOrigin = await runCliHosted(["serve", "--config", empty, "--allowed-origins", "https://app.example.com/path"]);
      assert.notEqual(badOrigin.code, 0);
      assert.match(badOrigin.stderr, /--allowed-origins.*'https:\/\/app\.example\.com\/path' is not an origin; write scheme:\/\/host\[:port\]/);
      const badHost = await runCliHosted(["serve", "--config", empty, "--allowed-hosts", "http://gw.example"]);
      assert.notEqual(badHost.code, 0);
      assert.match(badHost.stderr, /--allowed-hosts.*'http:\/\/gw\.example' is not a Host header value/);
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
      const echo = await call(client, "execute_tool", { server: "everything", tool: "echo", args: { message: "from the CLI" } });
      assert.equal(firstText(echo), "Echo: from the CLI");

      child.kill("SIGTERM");
      const { code, signal } = await waitExit(child, 60_000);
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
      // A bound for a loaded machine: this CLI starts beside the other groups' processes (the SDK's default is 60 s).
      await client.connect(transport, { timeout: 180_000 });
      direct = await connectDirectEverything();
      // A first call connects the upstream whether sessions connect eagerly or on first use.
      assert.equal(firstText(await call(client, "execute_tool", { server: "everything", tool: "echo", args: { message: "up" } })), "Echo: up");
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
        const timer = setTimeout(() => reject(new Error(`no initialize response; stdout so far: ${out}`)), 120_000);
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
      const { code, signal } = await waitExit(child, 60_000);
      assert.equal(signal, null);
      assert.equal(code, 0);
    } finally {
      await stopChild(child);
    }
  });

  test("emceepee stdio logs at gateway.logLevel from the config (and --log-level over it)", SLOW, async () => {
    /** Runs one initialize over stdio and returns what went to stderr. */
    const stderrOf = async (config: string, extra: string[] = []): Promise<string> => {
      const child = spawn(process.execPath, [...CLI_ARGS, "stdio", "--config", config, ...extra], { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] });
      try {
        let out = "";
        let err = "";
        child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
        child.stderr.on("data", (c: Buffer) => (err += c.toString("utf8")));
        child.stdin.write(initializeBody(1) + "\n");
        await pollFor(async () => (/"id":1/.test(out) ? true : undefined), "the initialize response", 120_000);
        child.stdin.end();
        assert.equal((await waitExit(child, 60_000)).code, 0);
        return err;
      } finally {
        await stopChild(child);
      }
    };
    const infoFile = await tempConfig("stdio-info.json", { mcpServers: {}, gateway: { logLevel: "info" } });
    const errorFile = await tempConfig("stdio-error.json", { mcpServers: {}, gateway: { logLevel: "error" } });
    // The three processes at once: each its own stdio connection and config.
    const [info, quiet, flag] = await Promise.all([stderrOf(infoFile), stderrOf(errorFile), stderrOf(errorFile, ["--log-level", "info"])]);
    assert.match(info, /"msg":"session_created"/, "info lines are written when the config says info");
    assert.doesNotMatch(quiet, /"level":30/, "no info lines when the config says error");
    assert.match(flag, /"msg":"session_created"/, "--log-level wins over the file");
  });
});
