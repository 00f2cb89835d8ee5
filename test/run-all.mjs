#!/usr/bin/env node
/**
 * `npm test`: builds the CLI and fixtures the tests spawn (test/helpers/cli-build.ts),
 * then runs every test file: test/unit as one process (test/unit/all.ts),
 * test/integration and the shared-upstream pass (test/shared), four files at a
 * time (they mostly wait on child processes and timers).
 * `npm run check` (this file with --check): the type check and the lint, at once.
 * CI runs both (.ci/run); the decision and its numbers are in test/README.md.
 *
 * EMCEEPEE_TEST_CONCURRENCY: files at once (default 4). EMCEEPEE_TEST_TIMES=out.tsv
 * also writes each file's time (bench/test-times-reporter.mjs).
 */
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const CONCURRENCY = process.env.EMCEEPEE_TEST_CONCURRENCY ?? "4";

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

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

if (process.argv.includes("--check")) {
  const npm = process.env.npm_execpath ? [process.execPath, [process.env.npm_execpath]] : ["npm", []];
  const checks = [
    ["typecheck", run(npm[0], [...npm[1], "run", "--silent", "typecheck"], true)],
    ["lint", run(npm[0], [...npm[1], "run", "--silent", "lint"], true)],
  ];
  let failed = false;
  for (const [name, pending] of checks) {
    const { code, output, ms } = await pending;
    process.stdout.write(`# ${name}: ${code === 0 ? "ok" : `FAILED (exit ${code})`} in ${seconds(ms)}\n${code === 0 ? "" : output}`);
    failed ||= code !== 0;
  }
  process.exit(failed ? 1 : 0);
}

const files = (dir) =>
  readdirSync(path.join(ROOT, dir))
    .filter((f) => f.endsWith(".test.ts"))
    .sort()
    .map((f) => `${dir}/${f}`);

const build = await run(process.execPath, ["--import", "tsx", "test/helpers/cli-build.ts"], true);
process.stdout.write(build.output);
if (build.code !== 0) process.exit(build.code);

const reporters = process.env.EMCEEPEE_TEST_TIMES
  ? [
      `--test-reporter=${process.stdout.isTTY ? "spec" : "tap"}`,
      "--test-reporter-destination=stdout",
      "--test-reporter=./bench/test-times-reporter.mjs",
      `--test-reporter-destination=${process.env.EMCEEPEE_TEST_TIMES}`,
    ]
  : [];
const tests = await run(
  process.execPath,
  [
    "--import",
    "tsx",
    "--test",
    `--test-concurrency=${CONCURRENCY}`,
    "--test-timeout=900000",
    ...reporters,
    "test/unit/all.ts",
    ...files("test/integration"),
    ...files("test/shared"),
  ],
  false,
);
process.stdout.write(`# tests: ${tests.code === 0 ? "ok" : "FAILED"} in ${seconds(tests.ms)}\n`);
process.exit(tests.code === 0 ? 0 : 1);
