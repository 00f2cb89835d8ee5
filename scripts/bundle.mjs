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
 * - ajv (≈ 335 KB, two packages of CommonJS) evaluated when the first JSON
 *   Schema is compiled, not at start: the SDK's Client and Server import its
 *   ajv provider statically whatever validator they are given, and the
 *   provider imports ajv and ajv-formats at its top (docs/adr/0063).
 *
 * Usage: node scripts/bundle.mjs [outDir] (default: dist). Imported, bundle(root, outDir).
 */
import { readFile } from "node:fs/promises";
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

/**
 * The SDK's ajv provider with ajv loaded on first use: its two imports become
 * `require()` calls in the function that builds the default Ajv instance
 * (esbuild keeps a required CommonJS package as a function evaluated at its
 * first call), and that instance is built at the first `getValidator`, not in
 * the constructor. Same options, same formats, same messages. Each edit must
 * match the SDK's file exactly once, else the build fails: a new SDK whose
 * provider changed is looked at again instead of bundled half-edited.
 */
export const sdkAjvOnFirstUse = {
  name: "sdk-ajv-on-first-use",
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/]validation[\\/]ajv-provider\.js$/ }, async (args) => {
      let contents = await readFile(args.path, "utf8");
      const edit = (from, to) => {
        const at = contents.indexOf(from);
        if (at < 0 || contents.indexOf(from, at + 1) >= 0) throw new Error(`${args.path}: expected "${from}" once (scripts/bundle.mjs, sdkAjvOnFirstUse)`);
        contents = contents.slice(0, at) + to + contents.slice(at + from.length);
      };
      edit("import Ajv from 'ajv';\n", "");
      edit("import _addFormats from 'ajv-formats';\n", "");
      edit(
        "function createDefaultAjvInstance() {\n    const ajv = new Ajv({",
        "function createDefaultAjvInstance() {\n    const Ajv = require('ajv').default;\n    const ajv = new Ajv({",
      );
      edit("const addFormats = _addFormats;", "const addFormats = require('ajv-formats').default;");
      edit("this._ajv = ajv ?? createDefaultAjvInstance();", "if (ajv) this._ajvInstance = ajv;");
      edit(
        "export class AjvJsonSchemaValidator {",
        "export class AjvJsonSchemaValidator {\n    get _ajv() {\n        return (this._ajvInstance ??= createDefaultAjvInstance());\n    }",
      );
      return { contents, resolveDir: path.dirname(args.path), loader: "js" };
    });
  },
};

/** The bundle's plugins (test/unit/bundle-ajv.test.ts checks sdkAjvOnFirstUse is one of them). */
export const PLUGINS = [zodEnglishOnly, sdkAjvOnFirstUse];

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
    plugins: PLUGINS,
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
