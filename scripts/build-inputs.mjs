/**
 * What `npm start` (scripts/start.mjs) compares to decide whether dist/ is
 * current: one line per input (path, size, mtime of src/** and the tsconfig
 * files), recorded after a successful build in node_modules/.cache/emceepee/
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
  const list = [...files(path.join(root, "src")), path.join(root, "tsconfig.json"), path.join(root, "tsconfig.build.json")].sort();
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
