#!/usr/bin/env node
/**
 * The executable as one esbuild bundle (docs/adr/0039): `npm run build` runs
 * this after tsc. Node's ES module loader costs per file, and a gateway loads
 * about 560 modules; bundled, the CLI starts in about half the CPU.
 *
 * - Entries: src/cli/main.ts → dist/cli/emceepee.mjs (package.json `bin`) and
 *   src/cli/program.ts → dist/cli/program.mjs (`npm start` calls its run()).
 *   Code splitting: each `import()` of the CLI (the gateway, the config
 *   loader, jose, …) is a chunk of its own beside them, loaded when first
 *   used, so `--version` and `--help` load little.
 * - External (loaded from node_modules at run time, as before): native and
 *   optional packages, and those loaded only when configured (OpenTelemetry,
 *   ioredis, pino-pretty, undici, Cedar's wasm, QuickJS, server-everything).
 * - Chunks sit in dist/cli/, the depth of every src/<folder>/ file, so
 *   `createRequire(import.meta.url)("../../package.json")` and the other
 *   import.meta.url-relative paths find the same files as in dist/.
 * - Linked source maps (names and lines, no sources): with
 *   `node --enable-source-maps` a stack line names src/<file>.ts.
 *
 * Usage: node scripts/bundle.mjs [outDir] (default: dist). Imported, bundle(root, outDir).
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Packages the bundle leaves to node_modules. */
export const EXTERNAL = [
  "better-sqlite3",
  "better-sqlite3-napi",
  "@cedar-policy/cedar-wasm",
  "quickjs-emscripten",
  "ioredis",
  "@opentelemetry/*",
  "pino-pretty",
  "undici",
  "@modelcontextprotocol/server-everything",
];

/** Builds the bundle of `root`'s src/cli into `<outDir>/cli/`. */
export async function bundle(root = ROOT, outDir = path.join(root, "dist")) {
  await build({
    absWorkingDir: root,
    entryPoints: { emceepee: "src/cli/main.ts", program: "src/cli/program.ts" },
    outdir: path.join(outDir, "cli"),
    outExtension: { ".js": ".mjs" },
    chunkNames: "chunk-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    tsconfig: path.join(root, "tsconfig.build.json"),
    external: EXTERNAL,
    // CommonJS packages inside an ES module bundle call require() for node: built-ins.
    banner: { js: 'import { createRequire as __emceepeeRequire } from "node:module"; const require = __emceepeeRequire(import.meta.url);' },
    sourcemap: "linked",
    sourcesContent: false,
    // The bundled packages' licence comments (`/*! … */`, `@license`) kept at the end of each file.
    legalComments: "eof",
    // Class and function names as in the source (error names, stack lines).
    keepNames: true,
    logLevel: "warning",
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2] ? path.resolve(process.argv[2]) : path.join(ROOT, "dist");
  await bundle(ROOT, out);
}
