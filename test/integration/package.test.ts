/**
 * The package as a user gets it: `npm pack` of a copy of the repository whose
 * dist/ is what `npm run build` (the prepack script) makes, shared with
 * ops.test.ts through test/helpers/dist-build.ts instead of a build of the
 * repository's dist/ per file (issue 21), the tarball installed into an empty project, then
 * `npx emceepee --help`, `npx emceepee serve --port 0` on the embedded demo
 * config (server-everything resolved from the install folder, not the repo),
 * and the public API imported by name, at run time and by TypeScript through
 * `exports`/`types`. Everything shares one pack and one install (the slow
 * part, reported as test diagnostics); nothing is written into the repo. The install runs with --ignore-scripts and then
 * takes the SQLite binding's native module that `npm ci` already compiled in
 * the repo (same version, same Node): compiling it again took minutes on a
 * busy machine and told nothing about the package. Which installed packages
 * carry install scripts is read from their package.json files instead.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ROOT, call, connectClient, waitConnected } from "../helpers/gateway.js";
import { cliEnv, firstText, listServers, pollFor, stopChild, waitExit } from "../helpers/core-extra.js";
import { stageRepository } from "../helpers/dist-build.js";
import { outermostWith, processesWith, waitForNoProcesses } from "../helpers/processes.js";

const SLOW = { timeout: 120_000 };

/** The names `import … from "emceepee"` gives at run time: the whole public surface (types aside). */
const PUBLIC_VALUES = ["ErrorCodes", "GatewayError", "createGateway", "createLogger", "loadConfig", "parseConfig"];

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command to completion (killed after timeoutMs); `input` is written to its stdin. */
async function run(command: string, args: string[], options: { cwd: string; timeoutMs?: number; input?: string }): Promise<Run> {
  const started = Date.now();
  const child = spawn(command, args, { cwd: options.cwd, stdio: ["pipe", "pipe", "pipe"] });
  const out = collect(child);
  child.stdin?.end(options.input ?? "");
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  try {
    const { code, signal } = await waitExit(child, options.timeoutMs ?? 60_000);
    await closed;
    return { code, signal, stdout: out.stdout(), stderr: out.stderr(), ms: Date.now() - started };
  } catch (err) {
    await stopChild(child);
    throw new Error(`${command} ${args.join(" ")}: ${String(err)}\nstdout: ${out.stdout()}\nstderr: ${out.stderr()}`);
  }
}

function collect(child: ChildProcess): { stdout(): string; stderr(): string } {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  return { stdout: () => stdout, stderr: () => stderr };
}

function ok(r: Run, what: string): void {
  assert.equal(r.code, 0, `${what} exited with ${r.code ?? r.signal}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
}

let tmp: string;
let app: string;
let packed: { filename: string; files: Array<{ path: string }> };
let installScripts: string[];
let timings: string;

before(
  async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-package-test-"));
    // The repository with a current dist/ (prepack's `npm run build`, made once per content of src/ and shared); its
    // scripts are not run again (the "prepack builds dist/" test below checks that they are that build).
    const checkout = path.join(tmp, "checkout");
    const staged = Date.now();
    await stageRepository(checkout);
    const stageMs = Date.now() - staged;
    // Bounds for a loaded 2-core machine (the install), not a speed.
    const pack = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", tmp], { cwd: checkout, timeoutMs: 600_000 });
    ok(pack, "npm pack");
    packed = (JSON.parse(pack.stdout) as Array<typeof packed>)[0]!;
    app = path.join(tmp, "app");
    await mkdir(app);
    await writeFile(path.join(app, "package.json"), JSON.stringify({ name: "emceepee-consumer", private: true, type: "module" }));
    const install = await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts", path.join(tmp, packed.filename)], {
      cwd: app,
      timeoutMs: 600_000,
    });
    ok(install, "npm install of the tarball");
    installScripts = await packagesWithInstallScripts(path.join(app, "node_modules"));
    await useBuiltSqliteBinding(path.join(app, "node_modules"));
    timings = `dist/ built or reused and the repository copied: ${stageMs} ms; npm pack: ${pack.ms} ms; npm install of the tarball: ${install.ms} ms`;
  },
  { timeout: 900_000 },
);

/** `name@version (hook)` of every installed package that runs something at install (a gyp file is an implicit `node-gyp rebuild`). */
async function packagesWithInstallScripts(nodeModules: string): Promise<string[]> {
  const found: string[] = [];
  const visit = async (dir: string): Promise<void> => {
    let entries: string[];
    try {
      entries = await readdir(dir);
    } catch {
      return;
    }
    for (const entry of entries) {
      if (entry.startsWith(".")) continue;
      const at = path.join(dir, entry);
      if (entry.startsWith("@")) {
        await visit(at);
        continue;
      }
      const manifest = path.join(at, "package.json");
      if (!existsSync(manifest)) continue;
      const pkg = JSON.parse(await readFile(manifest, "utf8")) as { name: string; version: string; scripts?: Record<string, string> };
      const hooks = ["preinstall", "install", "postinstall"].filter((h) => pkg.scripts?.[h]);
      if (!hooks.length && existsSync(path.join(at, "binding.gyp"))) hooks.push("binding.gyp");
      if (hooks.length) found.push(`${pkg.name}@${pkg.version} (${hooks.join(", ")})`);
      await visit(path.join(at, "node_modules"));
    }
  };
  await visit(nodeModules);
  return found;
}

/** The repo's compiled better-sqlite3 module, copied into the install (the versions must match; else it is compiled there). */
async function useBuiltSqliteBinding(nodeModules: string): Promise<void> {
  const version = async (dir: string) => (JSON.parse(await readFile(path.join(dir, "package.json"), "utf8")) as { version: string }).version;
  const built = path.join(ROOT, "node_modules", "better-sqlite3");
  const installed = path.join(nodeModules, "better-sqlite3");
  const binary = path.join("build", "Release", "better_sqlite3.node");
  if ((await version(built)) === (await version(installed)) && existsSync(path.join(built, binary))) {
    await mkdir(path.join(installed, "build", "Release"), { recursive: true });
    await copyFile(path.join(built, binary), path.join(installed, binary));
    return;
  }
  ok(await run("npm", ["rebuild", "better-sqlite3"], { cwd: path.dirname(nodeModules), timeoutMs: 600_000 }), "npm rebuild better-sqlite3");
}

after(async () => {
  if (!tmp) return;
  for (const pid of processesWith(tmp)) process.kill(pid, "SIGKILL");
  await rm(tmp, { recursive: true, force: true });
});

describe("the tarball", () => {
  test("prepack builds dist/ from empty with tsconfig.build.json, then the CLI's bundle (what test/helpers/dist-build.ts runs for the pack)", async () => {
    const { scripts, bin } = JSON.parse(await readFile(path.join(ROOT, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
      bin: Record<string, string>;
    };
    assert.equal(scripts.prepack, "npm run build", "npm pack and npm publish build first");
    assert.match(
      scripts.build ?? "",
      /rmSync\('dist'.*&& tsc -p tsconfig\.build\.json && node scripts\/bundle\.mjs$/,
      "the build starts from an empty dist/, is tsc -p tsconfig.build.json, then the bundle (docs/adr/0039)",
    );
    assert.equal(bin.emceepee, "dist/cli/emceepee.mjs", "the executable is the bundle");
  });

  test("holds dist/ (built from the current src; source maps only of the bundle, naming src/ files), README, LICENSE and package.json only", async (t) => {
    t.diagnostic(timings);
    const paths = packed.files.map((f) => f.path);
    for (const needed of [
      "package.json",
      "README.md",
      "LICENSE",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/cli/main.js",
      "dist/cli/emceepee.mjs",
      "dist/cli/program.mjs",
    ]) {
      assert.ok(paths.includes(needed), `${needed} missing from the tarball: ${paths.join(", ")}`);
    }
    const extra = paths.filter((p) => !["package.json", "README.md", "LICENSE"].includes(p) && !p.startsWith("dist/"));
    assert.deepEqual(extra, [], "only dist/ besides package.json, README and LICENSE");
    const maps = paths.filter((p) => p.endsWith(".map"));
    assert.deepEqual(
      maps.filter((p) => !/^dist\/cli\/[^/]+\.mjs\.map$/.test(p)),
      [],
      "no source maps of tsc's output; the bundle's (dist/cli/*.mjs.map) make `node --enable-source-maps` stack lines name src/ files",
    );
    const entryMap = JSON.parse(await readFile(path.join(app, "node_modules", "emceepee", "dist/cli/program.mjs.map"), "utf8")) as {
      sources: string[];
      sourcesContent?: unknown;
    };
    assert.ok(
      entryMap.sources.some((s) => s.endsWith("src/cli/program.ts")),
      `the bundle's map names src/cli/program.ts: ${entryMap.sources.slice(0, 5).join(", ")}`,
    );
    assert.equal(entryMap.sourcesContent, undefined, "names and lines only: the sources are not shipped");
    const stale = paths.filter((p) => p.endsWith(".js") && !existsSync(path.join(ROOT, "src", p.slice("dist/".length).replace(/\.js$/, ".ts"))));
    assert.deepEqual(stale, [], "every dist/*.js is built from a file in src/ (the build starts from an empty dist/)");
  });

  test("installs with no install script of its own, and main, types, bin and exports point at installed files", async () => {
    // The one install script a consumer meets is the SQLite binding's native build (ADR 0007); emceepee itself has none.
    assert.deepEqual(
      installScripts.filter((p) => !p.startsWith("better-sqlite3@")),
      [],
      `only the SQLite binding may carry an install script: ${installScripts.join(", ")}`,
    );
    assert.ok(
      installScripts.some((p) => p.startsWith("better-sqlite3@")),
      "the scan sees the SQLite binding's script",
    );
    const dir = path.join(app, "node_modules", "emceepee");
    const pkg = JSON.parse(await readFile(path.join(dir, "package.json"), "utf8")) as {
      main: string;
      types: string;
      bin: Record<string, string>;
      exports: Record<string, string | Record<string, string>>;
      scripts?: Record<string, string>;
    };
    for (const hook of ["preinstall", "install", "postinstall", "prepare"]) {
      assert.equal(pkg.scripts?.[hook], undefined, `package.json must not have a ${hook} script: it runs (or warns) on every install`);
    }
    const root = pkg.exports["."] as Record<string, string>;
    const targets = {
      main: pkg.main,
      types: pkg.types,
      "bin.emceepee": pkg.bin.emceepee,
      'exports["."].types': root.types,
      'exports["."].import': root.import,
    };
    for (const [field, target] of Object.entries(targets)) {
      assert.ok(target, `package.json has no ${field}`);
      assert.ok(existsSync(path.join(dir, target)), `package.json ${field} points at ${target}, which the package does not contain`);
    }
    assert.equal(path.resolve(dir, root.import!), path.resolve(dir, pkg.main), "main and exports agree");
    assert.equal(path.resolve(dir, root.types!), path.resolve(dir, pkg.types), "types and exports agree");
  });
});

describe("npx emceepee, from the installed package", () => {
  test("--help exits 0 with the usage", SLOW, async () => {
    const r = await run("npx", ["--no", "--", "emceepee", "--help"], { cwd: app });
    ok(r, "npx emceepee --help");
    assert.match(r.stdout, /Usage: emceepee/);
    assert.match(r.stdout, /^\s+serve\b/m);
    assert.match(r.stdout, /^\s+stdio\b/m);
  });

  test("serve --port 0 answers MCP with the demo upstream, and SIGTERM ends it with exit 0 and no process left", SLOW, async () => {
    // Its own state file (serve keeps state in SQLite by default), never the user's.
    const bin = path.join(app, "node_modules", ".bin", "emceepee");
    const npx = spawn("npx", ["--no", "--", "emceepee", "serve", "--port", "0", "--log-level", "warn"], {
      cwd: app,
      env: cliEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const out = collect(npx);
    try {
      const url = await pollFor(async () => /listening on (http:\/\/\S+)/.exec(out.stdout())?.[1], `the URL on stdout (stderr: ${out.stderr()})`, 60_000);
      const client = await connectClient(url);
      try {
        assert.equal(client.getServerVersion()?.name, "emceepee");
        // The demo config's server-everything is found in the install folder (not the repo) and connects.
        await waitConnected(client, "everything");
        const sum = await call(client, "execute_tool", { server: "everything", tool: "get-sum", args: { a: 1, b: 2 } });
        assert.equal(firstText(sum), "The sum of 1 and 2 is 3.");
      } finally {
        await client.close();
      }
      // npx runs the bin under `sh -c`, which does not pass signals on: signal the gateway's own process,
      // as a process manager would. npx then exits with the gateway's exit code.
      // Outermost: the session's end refills the warm pool, and a child being spawned carries the gateway's
      // command line until it execs (CI saw it, 2026-11-28).
      const [pid, ...more] = outermostWith(bin);
      assert.ok(pid, `no process runs ${bin}`);
      assert.deepEqual(more, [], "one gateway process");
      process.kill(pid, "SIGTERM");
      const exit = await waitExit(npx, 30_000);
      assert.deepEqual(exit, { code: 0, signal: null }, `SIGTERM must end emceepee with exit 0 (stderr: ${out.stderr()})`);
      assert.deepEqual(await waitForNoProcesses(app), [], "the gateway and its server-everything child are gone");
    } finally {
      await stopChild(npx);
      // Killing npx does not reach the gateway (sh passes no signal on): a failed assertion must not leave it
      // and its upstreams running into the next test, which counts the processes in the same folder.
      const signal = (pids: number[], sig: NodeJS.Signals) =>
        pids.forEach((p) => {
          try {
            process.kill(p, sig);
          } catch {
            /* gone meanwhile */
          }
        });
      signal(processesWith(bin), "SIGTERM");
      signal(await waitForNoProcesses(bin, 15_000), "SIGKILL");
    }
  });
});

describe("the public API, imported from the installed package", () => {
  test("named exports only; createGateway starts gateways from loadConfig() and from a plain object, and close() lets the process exit", SLOW, async () => {
    // Runs in the consumer folder, so "emceepee" resolves through its node_modules. It prints one JSON line per
    // step, keeps both gateways up until stdin ends, then closes them and must exit on its own (no timer left behind).
    const script = `
      const out = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
      const api = await import("emceepee");
      const { createGateway, loadConfig, parseConfig, GatewayError, ErrorCodes } = api;
      out({ exports: Object.keys(api).sort(), hasDefault: "default" in api });
      const internal = await import("emceepee/dist/config/load.js").then(() => "importable", (e) => e.code);
      let configError;
      try {
        createGateway({ gateway: { prot: 8080 } });
      } catch (e) {
        configError = { gatewayError: e instanceof GatewayError, code: e.code, message: e.message };
      }
      out({ internal, configError, expectedCode: ErrorCodes.CONFIG_INVALID, parsedPort: parseConfig({}).gateway.port });
      const demo = createGateway(await loadConfig({ overrides: { port: 0 } }));
      const plain = createGateway({ mcpServers: {}, gateway: { port: 0 } });
      const demoUrl = (await demo.listen()).url;
      const plainUrl = (await plain.listen()).url;
      const health = await (await fetch(plainUrl.replace(/\\/mcp$/, "/healthz"))).json();
      out({ demoUrl, health });
      process.stdin.resume();
      process.stdin.once("end", async () => {
        await Promise.all([demo.close(), plain.close()]);
        let afterClose;
        try {
          await demo.listen();
        } catch (e) {
          afterClose = e.code;
        }
        out({ closed: true, afterClose });
      });
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { cwd: app, stdio: ["pipe", "pipe", "pipe"] });
    const out = collect(child);
    // Complete lines only: a chunk may end inside one.
    const lines = () =>
      out
        .stdout()
        .split("\n")
        .slice(0, -1)
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as Record<string, any>);
    try {
      const { demoUrl } = await pollFor(async () => lines().find((l) => "demoUrl" in l), `the gateways to listen (stderr: ${out.stderr()})`, 60_000);
      const [surface, errors, started] = lines();
      assert.deepEqual(surface, { exports: PUBLIC_VALUES, hasDefault: false }, "exactly the public names, no default export");
      assert.equal(errors?.internal, "ERR_PACKAGE_PATH_NOT_EXPORTED", "internal modules are not importable");
      assert.equal(errors?.configError?.gatewayError, true);
      assert.equal(errors?.configError?.code, "EMCP_CONFIG_INVALID");
      assert.equal(errors?.expectedCode, "EMCP_CONFIG_INVALID");
      assert.match(errors?.configError?.message, /createGateway\(\)[\s\S]*'prot'/, "the error names the bad key");
      assert.equal(errors?.parsedPort, 8808, "parseConfig fills in defaults");
      assert.equal(started?.health?.status, "ok", "the plain-object gateway serves /healthz");

      const client = await connectClient(demoUrl as string);
      try {
        await waitConnected(client, "everything");
        assert.deepEqual(
          (await listServers(client)).map((s) => s.name),
          ["everything"],
        );
      } finally {
        await client.close();
      }
      child.stdin?.end();
      const exit = await waitExit(child, 30_000);
      assert.deepEqual(exit, { code: 0, signal: null }, `the script must exit by itself once both gateways closed (stderr: ${out.stderr()})`);
      assert.deepEqual(lines().at(-1), { closed: true, afterClose: "EMCP_CLOSED" });
      assert.deepEqual(await waitForNoProcesses(app), [], "close() ended the demo upstream");
    } finally {
      await stopChild(child);
    }
  });

  test("TypeScript resolves the types through exports and checks a consumer against them", SLOW, async () => {
    await writeFile(
      path.join(app, "consumer.ts"),
      `import { createGateway, parseConfig, ErrorCodes, GatewayError, type Gateway, type GatewayConfig, type ErrorCodeName, type ServerConfig } from "emceepee";
const server: ServerConfig = { command: "node", args: [] };
const config: GatewayConfig = parseConfig({ mcpServers: { server } });
const gateway: Gateway = createGateway(config, {});
const code: ErrorCodeName = ErrorCodes.CONFIG_INVALID;
export const used = [gateway, code, GatewayError, createGateway({ gateway: { port: 0 } })] as const;
// @ts-expect-error the port is a number
createGateway({ gateway: { port: "8808" } });
// @ts-expect-error internals are not exported
await import("emceepee/dist/server/gateway.js");
`,
    );
    await writeFile(
      path.join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ["node"],
          typeRoots: [path.join(ROOT, "node_modules", "@types")],
        },
        files: ["consumer.ts"],
      }),
    );
    const r = await run(process.execPath, [path.join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], { cwd: app });
    ok(r, "tsc on a consumer of the installed package");
  });
});
