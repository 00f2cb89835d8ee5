#!/usr/bin/env node
/**
 * `npm test`: builds the CLI and fixtures the tests spawn (test/helpers/cli-build.ts),
 * then runs the type check, the lint and every test file (unit, integration,
 * and the shared-upstream pass in test/shared/) at the same time: the checks
 * are single-threaded and the tests often wait on other processes, so on two
 * cores they overlap well. The checks' output is printed after the tests; the
 * exit code is non-zero when any of them failed. See test/README.md.
 */
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** Test files run at once: 2 (the cores) and more would oversubscribe with the checks beside them. */
const CONCURRENCY = process.env.EMCEEPEE_TEST_CONCURRENCY ?? "2";

function run(command, args, buffered) {
  const started = Date.now();
  const child = spawn(command, args, { cwd: ROOT, stdio: buffered ? ["ignore", "pipe", "pipe"] : "inherit" });
  let output = "";
  if (buffered) {
    child.stdout.on("data", (c) => (output += c));
    child.stderr.on("data", (c) => (output += c));
  }
  return new Promise((resolve) => {
    child.once("error", (err) => resolve({ code: 1, output: `${output}${String(err)}\n`, ms: Date.now() - started }));
    child.once("close", (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), output, ms: Date.now() - started }));
  });
}

const npm = process.env.npm_execpath ? [process.execPath, [process.env.npm_execpath]] : ["npm", []];
const files = (dir) =>
  readdirSync(path.join(ROOT, dir))
    .filter((f) => f.endsWith(".test.ts"))
    .sort()
    .map((f) => `${dir}/${f}`);

const build = await run(process.execPath, ["--import", "tsx", "test/helpers/cli-build.ts"], true);
process.stdout.write(build.output);
if (build.code !== 0) process.exit(build.code);

const checks = [
  ["typecheck", run(npm[0], [...npm[1], "run", "--silent", "typecheck"], true)],
  ["lint", run(npm[0], [...npm[1], "run", "--silent", "lint"], true)],
];
const tests = await run(
  process.execPath,
  [
    "--import",
    "tsx",
    "--test",
    `--test-concurrency=${CONCURRENCY}`,
    "--test-timeout=900000",
    ...files("test/unit"),
    ...files("test/integration"),
    ...files("test/shared"),
  ],
  false,
);
let failed = tests.code !== 0;
for (const [name, pending] of checks) {
  const { code, output, ms } = await pending;
  process.stdout.write(`\n# ${name}: ${code === 0 ? "ok" : `FAILED (exit ${code})`} in ${(ms / 1000).toFixed(1)} s\n${code === 0 ? "" : output}`);
  failed ||= code !== 0;
}
process.stdout.write(`# tests: ${tests.code === 0 ? "ok" : "FAILED"} in ${(tests.ms / 1000).toFixed(1)} s\n`);
process.exit(failed ? 1 : 0);
