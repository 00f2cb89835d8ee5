/**
 * What `npm start` (scripts/start.mjs) compares to decide whether dist/ is
 * current: one line per input (path, size, mtime of src/**, the tsconfig
 * files, scripts/bundle.mjs and package.json), recorded after a successful build in node_modules/.cache/emceepee/
 * (not in dist/, which is published). Its own module so that a test can record
 * a dist/ it built elsewhere (test/helpers/dist-build.ts) as current.
 */
import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : [p];
  });
}

/** The recorded build's inputs, in `root`'s node_modules. */
export function stampPath(root) {
  return path.join(root, "node_modules/.cache/emceepee/build-inputs");
}

/** One line per input: path, size, mtime. */
export function buildInputs(root) {
  // The bundle's settings and package.json (its externals are read from node_modules at run time) are inputs too.
  const extra = ["tsconfig.json", "tsconfig.build.json", "scripts/bundle.mjs", "package.json"].map((f) => path.join(root, f));
  const list = [...files(path.join(root, "src")), ...extra].sort();
  return list.map((file) => {
    const { size, mtimeMs } = statSync(file);
    return `${path.relative(root, file)}\t${size}\t${mtimeMs}`;
  });
}

/** Records `inputs` (default: the current ones) as what dist/ was built from. */
export function recordBuild(root, inputs = buildInputs(root)) {
  const stamp = stampPath(root);
  mkdirSync(path.dirname(stamp), { recursive: true });
  writeFileSync(stamp, inputs.join("\n"));
}
