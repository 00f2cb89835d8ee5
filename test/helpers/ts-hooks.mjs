/**
 * Module hooks (synchronous: they serve module.registerHooks and module.register alike) that run the repository's TypeScript from test/helpers/ts-compile.mjs's
 * cache: `node --import ./test/helpers/ts-register.mjs --test file.ts`. A module keeps
 * its own URL (import.meta.url is the .ts file, so ROOT-relative paths in the tests
 * hold); `./x.js` resolves to `./x.ts` beside it, as tsc's NodeNext resolution does.
 * Files outside the repository's own sources (node_modules) load as Node loads them.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ROOT, compiled } from "./ts-compile.mjs";

const NODE_MODULES = path.join(ROOT, "node_modules") + path.sep;
const ours = (file) => file.startsWith(ROOT + path.sep) && !file.startsWith(NODE_MODULES);

export function resolve(specifier, context, nextResolve) {
  const parent = context.parentURL?.startsWith("file:") ? fileURLToPath(context.parentURL) : undefined;
  if (parent && ours(parent) && /\.[cm]?js$/.test(specifier) && (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("file:"))) {
    const target = specifier.startsWith("file:") ? fileURLToPath(specifier) : path.resolve(path.dirname(parent), specifier);
    const ts = target.replace(/\.([cm]?)js$/, ".$1ts");
    if (ours(ts) && !existsSync(target) && existsSync(ts)) return { url: pathToFileURL(ts).href, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

export function load(url, context, nextLoad) {
  if (url.startsWith("file:") && /\.[cm]?ts$/.test(url)) {
    const file = fileURLToPath(url);
    if (ours(file) && !file.endsWith(".d.ts")) {
      return { format: file.endsWith(".cts") ? "commonjs" : "module", source: compiled(file, readFileSync(file, "utf8")), shortCircuit: true };
    }
  }
  return nextLoad(url, context);
}
