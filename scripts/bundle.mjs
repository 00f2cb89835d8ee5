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
 * - zod's messages in English only: zod re-exports its 50 locales
 *   (`z.locales`, ≈ 360 KB of a gateway's start) as one namespace, so the
 *   bundle would compile them all at every start; no emceepee code calls
 *   `z.config(z.locales.xx())`, and English is zod's default (docs/adr/0045).
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

/** zod's locale index as the bundle sees it: English only (the default the schemas register themselves). */
export const zodEnglishOnly = {
  name: "zod-english-only",
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: 'export { default as en } from "./en.js";\n',
      resolveDir: path.dirname(args.path),
      loader: "js",
    }));
  },
};

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
    plugins: [zodEnglishOnly],
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
