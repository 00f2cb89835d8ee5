/**
 * The package's dist/ as `npm run build` makes it (tsc -p tsconfig.build.json: a
 * type-checked build with declarations), built once per content of its inputs
 * and shared by the test files that need a real dist/ (package.test.ts packs it,
 * ops.test.ts runs `npm start` on it), instead of each rebuilding the
 * repository's dist/ from empty while the other files run (issue 21).
 *
 * - Output: node_modules/.cache/emceepee/dist/<hash of src/, the tsconfig files,
 *   package.json, scripts/bundle.mjs and TypeScript's and esbuild's versions>/dist/:
 *   tsc's output and the CLI's bundle (scripts/bundle.mjs), as the build script.
 * - One builder at a time: `<hash>.lock/` (mkdir is atomic) holds the builder's
 *   pid; others wait for the result, and take over a lock whose process is gone.
 *   `npm test` (test/run-all.mjs) starts a build in the background before the
 *   files run; the files that need it wait for it here.
 * - stageRepository() copies the repository's files (what git tracks or would,
 *   not node_modules/ or dist/) into a folder with that dist/: a checkout whose
 *   dist/ is current, for `npm pack` and `npm start`.
 */
import { spawn } from "node:child_process";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const CACHE = path.join(ROOT, "node_modules/.cache/emceepee/dist");
const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");
const BUNDLE = path.join(ROOT, "scripts/bundle.mjs");
/** Builds older than this are removed when a new one is made. */
const KEEP_MS = 6 * 3600_000;
/** A type-checked build of src/ on a loaded 2-core machine: a bound, not a speed. */
const BUILD_WAIT_MS = 15 * 60_000;

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

/** Hash of what the build reads: every file under src/, the tsconfig files, package.json, the bundler script, the compilers' versions. */
function inputsHash(): string {
  const hash = createHash("sha256");
  for (const compiler of ["typescript", "esbuild"]) {
    const { version } = JSON.parse(readFileSync(path.join(ROOT, "node_modules", compiler, "package.json"), "utf8")) as { version: string };
    hash.update(`${compiler} ${version}\0`);
  }
  const inputs = ["tsconfig.json", "tsconfig.build.json", "package.json", "scripts/bundle.mjs"].map((f) => path.join(ROOT, f));
  for (const file of [...walk(path.join(ROOT, "src")).sort(), ...inputs]) {
    hash.update(path.relative(ROOT, file)).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex").slice(0, 16);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Runs `node <args>` in the repository; rejects with its output when it fails. */
function runNode(args: string[], what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (output += c.toString("utf8")));
    child.once("error", reject);
    child.once("close", (code, signal) => (code === 0 ? resolve() : reject(new Error(`${what} failed (${code ?? signal}); fix the build first:\n${output}`))));
  });
}

/**
 * The build script's two steps into `outDir`: tsc -p tsconfig.build.json (a type error fails the build, as `npm run build`
 * does), then the CLI's bundle (scripts/bundle.mjs).
 */
async function build(outDir: string): Promise<void> {
  await runNode([TSC, "-p", "tsconfig.build.json", "--outDir", outDir], "tsc -p tsconfig.build.json");
  await runNode([BUNDLE, outDir], "node scripts/bundle.mjs");
}

function prune(keep: string): void {
  for (const entry of readdirSync(CACHE)) {
    const at = path.join(CACHE, entry);
    if (at === keep || entry.endsWith(".lock")) continue;
    const builder = /\.tmp-(\d+)$/.exec(entry)?.[1];
    try {
      // A build some older process left when it was killed, or a build not used for a while.
      if ((builder && !alive(Number(builder))) || Date.now() - statSync(at).mtimeMs > KEEP_MS) rmSync(at, { recursive: true, force: true });
    } catch {
      /* another process pruned it */
    }
  }
}

/** Takes the lock (true), or says another live process holds it (false); a lock whose process is gone is taken over. */
function tryLock(lock: string): boolean {
  try {
    mkdirSync(lock);
    writeFileSync(path.join(lock, "pid"), String(process.pid));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  let holder = NaN;
  try {
    holder = Number(readFileSync(path.join(lock, "pid"), "utf8"));
  } catch {
    /* being written or removed: ask again */
    return false;
  }
  if (Number.isInteger(holder) && holder > 0 && alive(holder)) return false;
  rmSync(lock, { recursive: true, force: true });
  return false;
}

/** The folder holding a current dist/ (dist/cli/emceepee.mjs, dist/index.d.ts…), built first or waited for when the inputs changed. */
export async function builtDist(): Promise<string> {
  const dir = path.join(CACHE, inputsHash());
  const done = path.join(dir, "dist/cli/program.mjs");
  const lock = `${dir}.lock`;
  mkdirSync(CACHE, { recursive: true });
  const until = Date.now() + BUILD_WAIT_MS;
  while (!existsSync(done)) {
    if (tryLock(lock)) {
      try {
        if (existsSync(done)) break;
        const tmp = `${dir}.tmp-${process.pid}`;
        rmSync(tmp, { recursive: true, force: true });
        try {
          await build(path.join(tmp, "dist"));
          renameSync(tmp, dir);
        } finally {
          rmSync(tmp, { recursive: true, force: true });
        }
        prune(dir);
      } finally {
        rmSync(lock, { recursive: true, force: true });
      }
      break;
    }
    if (Date.now() > until) throw new Error(`waited ${BUILD_WAIT_MS / 60_000} min for another process's build of dist/ (${lock})`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return dir;
}

/** The repository's files as git sees them (tracked, or untracked and not ignored); without git, every file but node_modules/, dist/ and .git/. */
function repositoryFiles(): string[] {
  try {
    return execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    })
      .split("\0")
      .filter((f) => f && existsSync(path.join(ROOT, f)));
  } catch {
    const skip = new Set(["node_modules", "dist", ".git"]);
    return readdirSync(ROOT)
      .filter((e) => !skip.has(e))
      .flatMap((e) => (statSync(path.join(ROOT, e)).isDirectory() ? walk(path.join(ROOT, e)) : [path.join(ROOT, e)]))
      .map((f) => path.relative(ROOT, f));
  }
}

/**
 * A copy of the repository in `into` with the current dist/ (builtDist()): what a checkout holds after `npm run build`.
 * `nodeModules`: a node_modules/ of links to the repository's packages (its own .cache/, so what runs there keeps its
 * records apart from the repository's).
 */
export async function stageRepository(into: string, options: { nodeModules?: boolean } = {}): Promise<void> {
  const built = await builtDist();
  for (const file of repositoryFiles()) {
    const target = path.join(into, file);
    mkdirSync(path.dirname(target), { recursive: true });
    cpSync(path.join(ROOT, file), target, { preserveTimestamps: true });
  }
  rmSync(path.join(into, "dist"), { recursive: true, force: true });
  cpSync(path.join(built, "dist"), path.join(into, "dist"), { recursive: true });
  if (options.nodeModules) {
    const modules = path.join(into, "node_modules");
    mkdirSync(modules, { recursive: true });
    for (const entry of readdirSync(path.join(ROOT, "node_modules"))) {
      if (entry !== ".cache") symlinkSync(path.join(ROOT, "node_modules", entry), path.join(modules, entry));
    }
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const dir = await builtDist();
  process.stdout.write(`test dist/: ${path.relative(ROOT, dir)}/dist (${Date.now() - started} ms)\n`);
}
