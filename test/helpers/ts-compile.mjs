/**
 * TypeScript to JavaScript for the test runs, one file at a time, cached by content:
 * node_modules/.cache/emceepee/ts/<hash of compiler, options, path and source>.js.
 * `npm test` fills the cache for every .ts file under src/, test/, bench/ and examples/ in one
 * process (warm()), then every test process loads through test/helpers/ts-hooks.mjs,
 * which reads the cache and compiles (with TypeScript's transpileModule) only what
 * changed since. Plain .mjs so that it loads without a transpiler.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const CACHE = path.join(ROOT, "node_modules/.cache/emceepee/ts");
const require = createRequire(import.meta.url);
/** Bumped when what compile() emits changes for the same input. */
const FORMAT = "2";
const TS_VERSION = JSON.parse(readFileSync(require.resolve("typescript/package.json"), "utf8")).version;

let ts;
let compilerOptions;
function compiler() {
  if (ts) return;
  ts = require("typescript");
  const configFile = path.join(ROOT, "tsconfig.json");
  const read = ts.readConfigFile(configFile, (f) => ts.sys.readFile(f));
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, "\n"));
  const { options } = ts.parseJsonConfigFileContent(read.config, ts.sys, ROOT, undefined, configFile);
  // ES modules, as tsc emits them under NodeNext for this "type": "module" package (transpileModule sees no package.json).
  compilerOptions = {
    ...options,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    declaration: false,
    sourceMap: false,
    inlineSourceMap: true,
    inlineSources: false,
    noEmit: false,
    // The JavaScript runs at the .ts file's own URL: the source map's path is relative to that, not to an outDir.
    outDir: undefined,
    rootDir: undefined,
  };
}

/** Only tsconfig.json changes what compile() emits; read once per process. */
let configHash;
function keyOf(file, source) {
  configHash ??= createHash("sha256")
    .update(readFileSync(path.join(ROOT, "tsconfig.json")))
    .digest("hex");
  return createHash("sha256").update(`${FORMAT}\0${TS_VERSION}\0${configHash}\0${file}\0`).update(source).digest("hex").slice(0, 32);
}

/** The JavaScript for `file` (an absolute .ts path) whose text is `source`: from the cache, else compiled and cached. */
export function compiled(file, source) {
  const cached = path.join(CACHE, `${keyOf(file, source)}.js`);
  try {
    return readFileSync(cached, "utf8");
  } catch {
    /* not compiled yet */
  }
  compiler();
  const { outputText, diagnostics } = ts.transpileModule(source, { compilerOptions, fileName: file, reportDiagnostics: true });
  const errors = (diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length)
    throw new SyntaxError(`${path.relative(ROOT, file)}: ${errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")).join("; ")}`);
  mkdirSync(CACHE, { recursive: true });
  // Written aside and renamed: a process reading it never sees half a file.
  const tmp = `${cached}.${process.pid}.tmp`;
  writeFileSync(tmp, outputText);
  renameSync(tmp, cached);
  return outputText;
}

function sources(dir) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith(".ts") && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** Cached files of sources that no longer exist as they were are removed after this long (other checkouts' runs may still use them). */
const KEEP_MS = 24 * 3600_000;

/**
 * Compiles every .ts under src/, test/ and bench/ not yet in the cache and removes
 * stale entries; the number of files, how many were compiled, how many removed.
 */
export function warm() {
  const files = ["src", "test", "bench", "examples"].flatMap((d) => sources(path.join(ROOT, d)));
  const current = new Set();
  let fresh = 0;
  for (const file of files) {
    const source = readFileSync(file, "utf8");
    const name = `${keyOf(file, source)}.js`;
    current.add(name);
    if (!existsSync(path.join(CACHE, name))) {
      compiled(file, source);
      fresh++;
    }
  }
  let removed = 0;
  const now = Date.now();
  for (const name of readdirSync(CACHE)) {
    if (current.has(name)) continue;
    try {
      if (now - statSync(path.join(CACHE, name)).mtimeMs > KEEP_MS) {
        rmSync(path.join(CACHE, name), { force: true });
        removed++;
      }
    } catch {
      /* another process removed it */
    }
  }
  return { files: files.length, fresh, removed };
}
