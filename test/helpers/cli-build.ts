/**
 * The CLI and the fixture servers as the tests spawn them, built once per
 * content of the sources (a plain `node` child instead of tsx transpiling every
 * module in every child). Run this file to build ahead (`npm test` does); any
 * test file also builds on import when a source changed, so one file runs alone
 * without a build step.
 *
 * - The CLI is the bundle the package ships (scripts/bundle.mjs, docs/adr/0039),
 *   run with `--enable-source-maps` so a child's stack lines name src/<file>.ts
 *   (docs/adr/0048): cliNodeArgs(), bundledCliEntry(), cliProgramModule().
 * - The fixtures and the per-module tree (builtDir(): src/ and test/fixtures/
 *   transpiled file by file) stay: test/unit/cli-lazy.test.ts and
 *   demo-config.test.ts read or copy modules one by one.
 *   EMCEEPEE_TEST_CLI=modules spawns that tree's dist/cli/main.js instead of the
 *   bundle, EMCEEPEE_TEST_CLI=tsx src/cli/main.ts through tsx (to rule a build out).
 * - Output: node_modules/.cache/emceepee/test-cli/<hash of the inputs>/{package.json,dist/,test/fixtures/}
 *   and <hash>-bundle/{package.json,dist/cli/} (package.json beside dist/, as in
 *   the package: the CLI reads ../../package.json). Not the repository's dist/:
 *   `npm pack` (package.test.ts) and `npm start` (ops.test.ts) use
 *   test/helpers/dist-build.ts's build.
 * - How: TypeScript's transpileModule with tsconfig.build.json's options, file
 *   by file — what tsc emits for this code (verbatimModuleSyntax makes every
 *   file compile alone), without the type check `npm run typecheck` does; the
 *   bundle is scripts/bundle.mjs run on the sources.
 * - A build goes to a temporary folder renamed into place (buildOnce, for the
 *   compiled tree and the bundle alike): two test processes building at once
 *   both finish, neither sees a half-written tree. A process hashes the inputs
 *   once (the first builtDir()) and keeps that build for its life.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync, copyFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type TypeScript from "typescript";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const CACHE = path.join(ROOT, "node_modules/.cache/emceepee/test-cli");
/** Builds older than this are removed when a new one is made (a test run lasts minutes). */
const KEEP_MS = 6 * 3600_000;

const FIXTURES = path.join(ROOT, "test/fixtures");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const p = path.join(dir, e.name);
      return e.isDirectory() ? sources(p) : e.name.endsWith(".ts") ? [p] : [];
    })
    .sort();
}

/** Hash of everything the build reads: the sources, the tsconfig files and package.json. */
function inputsHash(files: string[]): string {
  const hash = createHash("sha256");
  for (const file of [...files, "tsconfig.json", "tsconfig.build.json", "package.json"].map((f) => path.resolve(ROOT, f))) {
    hash.update(path.relative(ROOT, file)).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex").slice(0, 16);
}

function compile(files: string[], out: string): void {
  const ts = createRequire(import.meta.url)("typescript") as typeof TypeScript;
  const configFile = path.join(ROOT, "tsconfig.build.json");
  const read = ts.readConfigFile(configFile, (f) => ts.sys.readFile(f));
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, "\n"));
  const { options } = ts.parseJsonConfigFileContent(read.config, ts.sys, ROOT, undefined, configFile);
  // ES modules, as tsc emits them under NodeNext for this "type": "module" package (transpileModule sees no package.json).
  const compilerOptions = {
    ...options,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    declaration: false,
    sourceMap: false,
    noEmit: false,
    rootDir: ROOT,
  };
  for (const file of files) {
    const inSrc = !path.relative(path.join(ROOT, "src"), file).startsWith("..");
    const rel = inSrc ? path.join("dist", path.relative(path.join(ROOT, "src"), file)) : path.relative(ROOT, file);
    const { outputText, diagnostics } = ts.transpileModule(readFileSync(file, "utf8"), { compilerOptions, fileName: file, reportDiagnostics: true });
    const errors = (diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
    if (errors.length) throw new Error(`${path.relative(ROOT, file)}: ${errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")).join("; ")}`);
    const target = path.join(out, rel.replace(/\.ts$/, ".js"));
    mkdirSync(path.dirname(target), { recursive: true });
    writeFileSync(target, outputText);
  }
  copyFileSync(path.join(ROOT, "package.json"), path.join(out, "package.json"));
}

function prune(keep: string): void {
  for (const entry of readdirSync(CACHE)) {
    const at = path.join(CACHE, entry);
    if (at === keep) continue;
    try {
      if (Date.now() - statSync(at).mtimeMs > KEEP_MS) rmSync(at, { recursive: true, force: true });
    } catch {
      /* another process pruned it */
    }
  }
}

/**
 * `dir` holding `entry` (a path inside it), made by `make(tmp)` into a temporary folder renamed into place when `entry`
 * is missing; true when this call built it. A process that loses the rename to another's identical build uses that one.
 */
function buildOnce(dir: string, entry: string, make: (tmp: string) => void): boolean {
  if (existsSync(entry)) return false;
  mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  try {
    make(tmp);
    try {
      renameSync(tmp, dir);
    } catch (err) {
      if (!existsSync(entry)) throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return true;
}

let built: string | undefined;

/** The build's folder (holding dist/cli/main.js), built first when a source changed. */
export function builtDir(): string {
  if (built && existsSync(path.join(built, "dist/cli/main.js"))) return built;
  const files = [...sources(path.join(ROOT, "src")), ...sources(FIXTURES)];
  const dir = path.join(CACHE, inputsHash(files));
  if (buildOnce(dir, path.join(dir, "dist/cli/main.js"), (tmp) => compile(files, tmp))) prune(dir);
  return (built = dir);
}

/** The built CLI entry, dist/cli/main.js. */
export function builtCliEntry(): string {
  return path.join(builtDir(), "dist/cli/main.js");
}

/**
 * The CLI as the package ships it: scripts/bundle.mjs's output in `<build>-bundle/dist/cli/emceepee.mjs` (package.json
 * beside dist/), made once per build of the sources.
 */
export function bundledCliEntry(): string {
  const dir = `${builtDir()}-bundle`;
  const entry = path.join(dir, "dist/cli/emceepee.mjs");
  buildOnce(dir, entry, (tmp) => {
    execFileSync(process.execPath, [path.join(ROOT, "scripts/bundle.mjs"), path.join(tmp, "dist")], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
    copyFileSync(path.join(ROOT, "package.json"), path.join(tmp, "package.json"));
  });
  return entry;
}

/** What the tests run: the bundle (default), the per-module tree (EMCEEPEE_TEST_CLI=modules) or src/ through tsx (=tsx). */
function cliKind(): "bundle" | "modules" | "tsx" {
  const kind = process.env.EMCEEPEE_TEST_CLI;
  return kind === "tsx" || kind === "modules" ? kind : "bundle";
}

/**
 * Node arguments that run the CLI: the bundle with source maps on (stack lines name src/ files; about 0.13 s of a
 * spawn's CPU, docs/adr/0048), the per-module entry with EMCEEPEE_TEST_CLI=modules, src/cli/main.ts through tsx with =tsx.
 */
export function cliNodeArgs(): string[] {
  const kind = cliKind();
  if (kind === "tsx") return ["--import", "tsx", path.join(ROOT, "src/cli/main.ts")];
  if (kind === "modules") return [builtCliEntry()];
  return ["--enable-source-maps", bundledCliEntry()];
}

/** The CLI's program module (exports run()) and the Node arguments to load it, as cliNodeArgs() picks the CLI. */
export function cliProgramModule(): { module: string; execArgv: string[] } {
  const kind = cliKind();
  if (kind === "tsx") return { module: path.join(ROOT, "src/cli/program.ts"), execArgv: ["--import", "tsx"] };
  if (kind === "modules") return { module: path.join(builtDir(), "dist/cli/program.js"), execArgv: [] };
  return { module: path.join(path.dirname(bundledCliEntry()), "program.mjs"), execArgv: ["--enable-source-maps"] };
}

/** Node arguments that run the fixture server test/fixtures/<name>.ts (compiled; through tsx with EMCEEPEE_TEST_CLI=tsx). */
export function fixtureNodeArgs(name: string): string[] {
  if (process.env.EMCEEPEE_TEST_CLI === "tsx") return ["--import", "tsx", path.join(FIXTURES, `${name}.ts`)];
  return [path.join(builtDir(), "test/fixtures", `${name}.js`)];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const entry = builtCliEntry();
  const bundled = bundledCliEntry();
  process.stdout.write(`test CLI: ${path.relative(ROOT, bundled)}, fixtures beside ${path.relative(ROOT, entry)} (${Date.now() - started} ms)\n`);
}
