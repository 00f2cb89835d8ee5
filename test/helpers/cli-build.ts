/**
 * The CLI and the fixture servers as the tests spawn them: src/ and
 * test/fixtures/ compiled once to plain JavaScript, so a child is a plain
 * `node …/cli/main.js` instead of tsx transpiling every module in every child
 * (about 1.3 s of CPU more per CLI spawn, 0.3 s per fixture). Run this file to
 * build ahead (`npm test` does); any test file also builds on import when a
 * source changed, so one file runs alone without a build step.
 *
 * - Output: node_modules/.cache/emceepee/test-cli/<hash of the inputs>/{package.json,dist/,test/fixtures/}
 *   (package.json beside dist/, as in the package: the CLI reads ../../package.json).
 *   Not the repository's dist/: `npm pack` (package.test.ts) and `npm start`
 *   (ops.test.ts) rebuild that from empty while other files run.
 * - How: TypeScript's transpileModule with tsconfig.build.json's options, file
 *   by file — what tsc emits for this code (verbatimModuleSyntax makes every
 *   file compile alone), without the type check `npm run typecheck` does.
 * - A build goes to a temporary folder renamed into place (buildOnce, for the
 *   compiled tree and the bundle alike): two test processes building at once
 *   both finish, neither sees a half-written tree. A process hashes the inputs
 *   once (the first builtDir()) and keeps that build for its life.
 * - EMCEEPEE_TEST_CLI=tsx runs src/cli/main.ts through tsx instead (as before).
 * - Not the bundle the package ships (scripts/bundle.mjs, docs/adr/0039): the
 *   tests run per-module code, which cli-lazy.test.ts reads module by module;
 *   package.test.ts and ops.test.ts run the bundle (npx emceepee, npm start).
 *   bundledCliEntry() builds the bundle beside this build, for the benches.
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
 * beside dist/), made once per build of the sources (benches measure what ships).
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

/** Node arguments that run the CLI: the built entry, or src/cli/main.ts through tsx with EMCEEPEE_TEST_CLI=tsx. */
export function cliNodeArgs(): string[] {
  if (process.env.EMCEEPEE_TEST_CLI === "tsx") return ["--import", "tsx", path.join(ROOT, "src/cli/main.ts")];
  return [builtCliEntry()];
}

/** Node arguments that run the fixture server test/fixtures/<name>.ts (compiled; through tsx with EMCEEPEE_TEST_CLI=tsx). */
export function fixtureNodeArgs(name: string): string[] {
  if (process.env.EMCEEPEE_TEST_CLI === "tsx") return ["--import", "tsx", path.join(FIXTURES, `${name}.ts`)];
  return [path.join(builtDir(), "test/fixtures", `${name}.js`)];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const entry = builtCliEntry();
  process.stdout.write(`test CLI: ${path.relative(ROOT, entry)} (${Date.now() - started} ms)\n`);
}
