/**
 * How `npm test` loads the TypeScript (test/helpers/ts-register.mjs, ts-hooks.mjs,
 * ts-compile.mjs): a module runs at its own .ts URL (so ROOT-relative paths in the
 * tests hold), `./x.js` imports resolve to `./x.ts`, stack traces point at .ts
 * lines, and the compiled text is cached by content.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const REGISTER = path.join(ROOT, "test/helpers/ts-register.mjs");

interface TsCompile {
  compiled: (file: string, source: string) => string;
}

test("a module loads at its .ts path, its ./x.js imports resolve to .ts files, and its stack frames name .ts lines", { timeout: 120_000 }, async () => {
  // src/config/load.ts imports its neighbours as ./x.js (NodeNext style); parseConfig throws from a known line.
  const script = `
    const { parseConfig } = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, "src/config/load.ts")).href)});
    try { parseConfig("not an object"); } catch (err) { console.log(err.stack); }`;
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", REGISTER, "--input-type=module", "-e", script], { cwd: ROOT });
  const frame = /\((\/[^():]+\.ts):(\d+):\d+\)/.exec(stdout);
  assert.ok(frame, `no .ts frame in:\n${stdout}`);
  assert.equal(frame[1], path.join(ROOT, "src/config/load.ts"));
  const line = readFileSync(frame[1], "utf8").split("\n")[Number(frame[2]) - 1] ?? "";
  assert.match(line, /throw new GatewayError\(/, `the frame's line ${frame[2]} is not the throw: ${line}`);
});

test("the compiled text: types gone, cached by content, a syntax error names the file", async () => {
  const { compiled } = (await import(pathToFileURL(path.join(ROOT, "test/helpers/ts-compile.mjs")).href)) as TsCompile;
  const file = path.join(ROOT, "test/unit/ts-hooks-probe.ts");
  const one = compiled(file, "export const a: number = 1;\n");
  assert.match(one, /^export const a = 1;/);
  assert.doesNotMatch(one, /number/);
  const two = compiled(file, "export const a: number = 2;\n");
  assert.match(two, /^export const a = 2;/, "a changed source is compiled again, not served from the cache");
  assert.equal(compiled(file, "export const a: number = 1;\n"), one);
  assert.throws(
    () => compiled(file, "export const = ;\n"),
    (err: Error) => err instanceof SyntaxError && err.message.startsWith("test/unit/ts-hooks-probe.ts: "),
  );
});
