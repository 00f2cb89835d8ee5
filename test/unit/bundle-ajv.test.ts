/**
 * The bundle's ajv on first use (scripts/bundle.mjs sdkAjvOnFirstUse, docs/adr/0063): the SDK's ajv provider,
 * bundled with the bundle's plugin, evaluates ajv only when the first schema is compiled, and validates as the
 * SDK's own provider does (same options: formats checked, every error reported). ajv's main file is marked by a
 * second plugin here so the test sees when it is evaluated.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";
import { AjvJsonSchemaValidator as SdkProvider } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import type { JsonSchemaType, jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const { sdkAjvOnFirstUse, PLUGINS } = (await import(pathToFileURL(path.join(ROOT, "scripts/bundle.mjs")).href)) as {
  sdkAjvOnFirstUse: Plugin;
  PLUGINS: Plugin[];
};

test("the bundle is built with the plugin", () => {
  assert.ok(PLUGINS.includes(sdkAjvOnFirstUse), "scripts/bundle.mjs's plugins include sdkAjvOnFirstUse");
});

/** Counts evaluations of ajv's main module in globalThis.__ajvEvaluated. */
const markAjv: Plugin = {
  name: "mark-ajv",
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/]ajv[\\/]dist[\\/]ajv\.js$/ }, (args) => ({
      contents: `globalThis.__ajvEvaluated = (globalThis.__ajvEvaluated ?? 0) + 1;\n${readFileSync(args.path, "utf8")}`,
      resolveDir: path.dirname(args.path),
      loader: "js",
    }));
  },
};

const schemas: JsonSchemaType[] = [
  { type: "object", properties: { name: { type: "string" }, age: { type: "integer", minimum: 0 } }, required: ["name"] },
  { type: "object", properties: { email: { type: "string", format: "email" }, at: { type: "string", format: "date-time" } } },
  { $id: "urn:emceepee:test", type: "array", items: { type: "number" }, maxItems: 2 },
];
const inputs: unknown[] = [
  { name: "Ada" },
  {},
  { name: 1, age: -1 },
  { email: "a@b.example" },
  { email: "nope", at: "yesterday" },
  [1, 2],
  [1, "x", 3],
  "text",
];

test("bundled, the SDK's ajv provider evaluates ajv at the first schema it compiles and validates as the SDK's own", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-bundle-ajv-"));
  try {
    const entry = path.join(dir, "entry.mjs");
    writeFileSync(entry, 'export { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";\n');
    await build({
      absWorkingDir: ROOT,
      entryPoints: [entry],
      nodePaths: [path.join(ROOT, "node_modules")],
      outfile: path.join(dir, "out.mjs"),
      bundle: true,
      format: "esm",
      platform: "node",
      plugins: [sdkAjvOnFirstUse, markAjv],
      banner: { js: 'import { createRequire as __r } from "node:module"; const require = __r(import.meta.url);' },
      logLevel: "silent",
    });
    const g = globalThis as { __ajvEvaluated?: number };
    delete g.__ajvEvaluated;
    const { AjvJsonSchemaValidator } = (await import(pathToFileURL(path.join(dir, "out.mjs")).href)) as {
      AjvJsonSchemaValidator: new () => jsonSchemaValidator;
    };
    const bundled = new AjvJsonSchemaValidator();
    assert.equal(g.__ajvEvaluated, undefined, "imported and constructed: ajv not evaluated yet");
    const own = new SdkProvider();
    for (const schema of schemas) {
      const mine = bundled.getValidator(schema);
      assert.equal(g.__ajvEvaluated, 1, "evaluated once, at the first schema compiled");
      const theirs = own.getValidator(schema);
      for (const input of inputs) assert.deepEqual(mine(input), theirs(input), `${JSON.stringify(schema)} on ${JSON.stringify(input)}`);
    }
    assert.equal(bundled.getValidator(schemas[1]!)({ email: "nope" }).valid, false, "formats are checked");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
