/**
 * What a process loads (docs/adr/0017-lazy-start.md): `--version` and
 * `--help` load commander and the CLI's option parsers, not the gateway; a
 * gateway without tracing, Redis, SQLite or pretty logs does not load
 * OpenTelemetry's SDK, ioredis, better-sqlite3, pino-pretty or undici, nor the
 * console's pages, minisearch or oauth4webapi (docs/adr/0045). Each case runs
 * in a child process with test/fixtures/module-log.mjs listing its modules,
 * loading the TypeScript as the test process does (test/helpers/ts-register.mjs,
 * or tsx with EMCEEPEE_TEST_TS=tsx); the children run at once.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { LATEST_VERSION } from "../../src/store/sqlite/migrations.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HOOK = path.join(ROOT, "test/fixtures/module-log.mjs");
/** How the children load src/*.ts: the compiled cache npm test fills (tsx transpiled every module again in every child). */
const LOADER = process.env.EMCEEPEE_TEST_TS === "tsx" ? "tsx" : path.join(ROOT, "test/helpers/ts-register.mjs");
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string };

/** Optional packages a process should load only when it uses them (undici: servers added at runtime). */
const OPTIONAL = [
  "@opentelemetry/sdk-trace-node",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/exporter-trace-otlp-proto",
  "@opentelemetry/core",
  "@opentelemetry/sdk-logs",
  "@opentelemetry/exporter-logs-otlp-http",
  "ioredis",
  "better-sqlite3",
  "pino-pretty",
  "undici",
];

interface Loaded {
  stdout: string;
  /** Package names (node_modules/<name>/…) and src/ files (relative) loaded. */
  packages: Set<string>;
  sources: Set<string>;
}

async function loadedBy(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Loaded> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-modules-"));
  const log = path.join(dir, "modules.txt");
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", LOADER, "--import", HOOK, ...args], {
      cwd: ROOT,
      env: { ...process.env, OTEL_TRACES_EXPORTER: "none", ...env, EMCEEPEE_TEST_MODULE_LOG: log },
      timeout: 120_000,
    });
    const files = readFileSync(log, "utf8")
      .split("\n")
      .filter((line) => line.startsWith("esm file:") || line.startsWith("cjs /"))
      .map((line) => (line.startsWith("esm ") ? fileURLToPath(line.slice(4)) : line.slice(4)));
    const packages = new Set<string>();
    const sources = new Set<string>();
    for (const file of files) {
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file.slice(file.lastIndexOf("node_modules/")));
      if (m) packages.add(m[1]!);
      else if (file.startsWith(path.join(ROOT, "src") + path.sep)) sources.add(path.relative(ROOT, file));
    }
    return { stdout, packages, sources };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("what a process loads (the children at once)", { concurrency: true }, () => {
  test("--version prints the package version and loads neither the gateway nor its dependencies", async () => {
    const { stdout, packages, sources } = await loadedBy(["src/cli/main.ts", "--version"]);
    assert.equal(stdout.trim(), `emceepee ${pkg.version} (store schema ${LATEST_VERSION}, Node.js ${process.versions.node})`);
    assert.ok(packages.has("commander"), "the module log sees the CLI's own packages");
    for (const name of [...OPTIONAL, "zod", "@modelcontextprotocol/sdk", "pino"]) assert.ok(!packages.has(name), `--version loaded ${name}`);
    assert.ok(!sources.has("src/server/gateway.ts"), "--version loaded the gateway");
    assert.ok(!sources.has("src/config/schema.ts"), "--version loaded the config schema");
  });

  test("--help and serve --help print usage without loading the gateway", async () => {
    const cases = [["--help"], ["serve", "--help"]];
    const runs = await Promise.all(cases.map((args) => loadedBy(["src/cli/main.ts", ...args])));
    for (const [i, { stdout, packages, sources }] of runs.entries()) {
      const args = cases[i]!;
      assert.match(stdout, /Usage: emceepee/);
      for (const name of [...OPTIONAL, "zod", "@modelcontextprotocol/sdk"]) assert.ok(!packages.has(name), `${args.join(" ")} loaded ${name}`);
      assert.ok(!sources.has("src/server/gateway.ts"), `${args.join(" ")} loaded the gateway`);
    }
    const help = runs[1]!.stdout.replace(/\s+/g, " ");
    // The defaults --help shows come from config/cli-defaults.ts, which the schema uses too.
    assert.match(help, /else 127\.0\.0\.1;/);
    assert.match(help, /else 8808;/);
  });

  /** A child that starts a gateway (memory store, JSON logs) on a free port, prints its URL and closes it. */
  const START_AND_CLOSE = `
import { createGateway, createLogger } from "./src/index.ts";
const config = { mcpServers: {}, gateway: { port: 0, store: { kind: "memory" } } };
const gateway = createGateway(config, { logger: createLogger("silent", undefined, process.env.LOG_FORMAT) });
const { url } = await gateway.listen();
console.log(url);
await gateway.close();
`;

  /** The plain gateway's child, once for the two tests that read it. */
  let plainRun: Promise<Loaded> | undefined;
  const plainGateway = (): Promise<Loaded> => (plainRun ??= loadedBy(["--input-type=module", "-e", START_AND_CLOSE]));

  test("a gateway without tracing, Redis, SQLite or pretty logs loads none of them; asking for them loads them", async () => {
    // The same gateway with console tracing and pretty logs (at once): the module log does see them when they are used.
    const [plain, traced] = await Promise.all([
      plainGateway(),
      loadedBy(["--input-type=module", "-e", START_AND_CLOSE], { OTEL_TRACES_EXPORTER: "console", LOG_FORMAT: "pretty" }),
    ]);
    assert.match(plain.stdout, /^http:\/\//);
    assert.ok(plain.sources.has("src/server/gateway.ts"), "the module log sees the gateway");
    for (const name of OPTIONAL) assert.ok(!plain.packages.has(name), `a plain gateway loaded ${name}`);

    for (const name of ["@opentelemetry/sdk-trace-node", "@opentelemetry/sdk-trace-base", "pino-pretty"])
      assert.ok(traced.packages.has(name), `tracing on did not load ${name}`);
    assert.ok(!traced.packages.has("ioredis") && !traced.packages.has("better-sqlite3"));
  });

  /** Packages of inbound OAuth (jose) and the console's OIDC login (openid-client): loaded only when configured and used (docs/adr/0039). */
  const LOGIN = ["jose", "openid-client"];

  test("a gateway without inbound OAuth or console login loads neither jose nor openid-client; with OAuth, jose is loaded", async () => {
    const withOAuth = START_AND_CLOSE.replace(
      'store: { kind: "memory" }',
      'store: { kind: "memory" }, auth: { oauth: { issuers: ["https://login.example"] } }',
    );
    assert.notEqual(withOAuth, START_AND_CLOSE);
    const [plain, oauth] = await Promise.all([plainGateway(), loadedBy(["--input-type=module", "-e", withOAuth])]);
    assert.ok(plain.sources.has("src/console/lazy.ts"), "the module log sees the console's shell");
    for (const name of LOGIN) assert.ok(!plain.packages.has(name), `a gateway without OAuth loaded ${name}`);
    assert.ok(oauth.packages.has("jose"), "a gateway with OAuth did not load jose");
  });

  test("a started gateway has not loaded the console's pages, the tool search index or the token exchange (docs/adr/0045)", async () => {
    const { packages, sources } = await plainGateway();
    assert.ok(sources.has("src/faces/meta/tools/search.ts") && sources.has("src/upstream/auth/token-exchange.ts"), "the module log sees their callers");
    for (const name of ["minisearch", "oauth4webapi"]) assert.ok(!packages.has(name), `a started gateway loaded ${name}`);
    for (const file of ["src/console/index.ts", "src/console/views/overview.ts", "src/faces/meta/search/index.ts"])
      assert.ok(!sources.has(file), `a started gateway loaded ${file}`);
  });
});
