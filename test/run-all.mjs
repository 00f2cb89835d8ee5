#!/usr/bin/env node
/**
 * `npm test`: builds the CLI and fixtures the tests spawn (test/helpers/cli-build.ts),
 * starts the package's dist/ build that package.test and ops.test share
 * (test/helpers/dist-build.ts; in the background, they wait for it), then runs every test file: test/unit as one process (test/unit/all.ts),
 * test/integration and the shared-upstream pass (test/shared), longest first,
 * several files at a time (they mostly wait on child processes and timers).
 * `npm run test:files` (this file with --files): the same without the build step.
 * `npm run check` (this file with --check): the type check and the lint, at once.
 * CI runs both (.ci/run); the decision and its numbers are in test/README.md.
 *
 * EMCEEPEE_TEST_CONCURRENCY: files at once (default below). EMCEEPEE_TEST_TIMES=out.tsv
 * also writes each file's time (bench/test-times-reporter.mjs). The failed tests are listed again at the end.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/**
 * Files at once: three times the cores on an idle machine, fewer as the 1-minute load average rises (one fewer per
 * unit of load), down to the cores. The files mostly wait: on 2 cores a quiet run used ≈ 1.1 cores with four at
 * once, and six at once took 302 → 230 s of wall for the same CPU (test/README.md, "Session 18 (lead)"). At load
 * 25, four files at once starved timing-sensitive tests (calls meant to be promoted finished first, a 30 s
 * condition bound ran out) that pass with two under load 15.
 */
const CORES = os.availableParallelism();
const LOAD = os.loadavg()[0];
const CONCURRENCY = process.env.EMCEEPEE_TEST_CONCURRENCY ?? String(Math.max(CORES, Math.min(3 * CORES, Math.round(3 * CORES - LOAD))));

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

/**
 * Integration and shared-pass files that share a process (test/batches/batches.json, test/helpers/batch.ts):
 * each batch is one test file to the runner, test/batches/<name>.ts, and its files are not
 * run again on their own. A test process costs about 2 s of CPU before its first test (test/README.md, "Batches").
 */
const BATCHES = JSON.parse(readFileSync(path.join(ROOT, "test/batches/batches.json"), "utf8"));
const batched = new Set(Object.values(BATCHES).flat());
for (const file of batched) if (!files(path.dirname(file)).includes(file)) throw new Error(`test/batches/batches.json: no test file ${file}`);
const batchEntries = Object.keys(BATCHES).map((name) => `test/batches/${name}.ts`);

/**
 * Longest first, so that no long file starts near the end while the others are done:
 * the per-file times of the last measured run (bench/test-times.tsv, written by
 * EMCEEPEE_TEST_TIMES; from an older table, the shared pass's one row split evenly); a file not in it counts as 20 s.
 */
function longestFirst(list) {
  const ms = new Map();
  try {
    for (const line of readFileSync(path.join(ROOT, "bench/test-times.tsv"), "utf8").split("\n").slice(1)) {
      const [file, , , time] = line.split("\t");
      if (file && time) ms.set(file, Number(time));
    }
  } catch {
    /* no times recorded: alphabetical */
  }
  const shared = files("test/shared").length;
  const one = (file) => ms.get(file) ?? (file.startsWith("test/shared/") && ms.get("test/shared/*") ? ms.get("test/shared/*") / shared : 20_000);
  // A batch takes as long as its files together (the reporter records them one by one).
  const guess = (file) => (file.startsWith("test/batches/") ? BATCHES[path.basename(file, ".ts")].reduce((sum, f) => sum + one(f), 0) : one(file));
  return list
    .map((file, i) => ({ file, i, ms: guess(file) }))
    .sort((a, b) => b.ms - a.ms || a.i - b.i)
    .map((e) => e.file);
}

/**
 * Test files load the TypeScript through test/helpers/ts-register.mjs: compiled once
 * here (only what changed since the last run) into a cache every test process reads,
 * instead of tsx transforming src/ again in each (test/README.md, "Running compiled").
 * EMCEEPEE_TEST_TS=tsx runs them through tsx as before.
 */
const TSX = process.env.EMCEEPEE_TEST_TS === "tsx";
const LOADER = TSX ? ["--import", "tsx"] : ["--import", path.join(ROOT, "test/helpers/ts-register.mjs")];
/**
 * `--files` (`npm run test:files`): no build step; a file that spawns the CLI or needs dist/ builds what it needs when
 * it is stale (test/helpers/cli-build.ts, dist-build.ts), as when it runs alone.
 */
const BUILD = !process.argv.includes("--files");
const NO_BUILD = Promise.resolve({ code: 0, output: "", ms: 0 });
// The type-checked dist/ build (about 30 s of CPU) runs beside the first files; the two that need it wait for it.
// Both builds start before the compile cache is filled below (one thread; 6.5 s from cold in a fresh checkout), which
// left the second core idle: they only read src/ and load a few helpers (compiled on load, the cache takes whole files).
const distBuild = BUILD ? run(process.execPath, [...LOADER, "test/helpers/dist-build.ts"], true) : NO_BUILD;
const cliBuild = BUILD ? run(process.execPath, [...LOADER, "test/helpers/cli-build.ts"], true) : NO_BUILD;
if (!TSX) {
  const started = Date.now();
  const { warm } = await import("./helpers/ts-compile.mjs");
  const { files, fresh } = warm();
  process.stdout.write(`test TypeScript: ${fresh} of ${files} files compiled (${Date.now() - started} ms)\n`);
}

const build = await cliBuild;
process.stdout.write(build.output);
process.stdout.write(`test files: ${CONCURRENCY} at once (load average ${LOAD.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} now; ${CORES} cores)\n`);
if (build.code !== 0) process.exit(build.code);

/**
 * Node's own reporter on stdout (tap when not on a terminal before Node 23, spec otherwise: what it picks
 * by itself), the failed tests again at the end (test/helpers/failures-reporter.mjs; a CI page shows
 * only the log's last lines), and each file's time when EMCEEPEE_TEST_TIMES asks for it.
 */
const failuresFile = path.join(mkdtempSync(path.join(os.tmpdir(), "emceepee-test-")), "failures.txt");
const defaultReporter = process.stdout.isTTY || Number(process.versions.node.split(".")[0]) >= 23 ? "spec" : "tap";
const reporters = [
  `--test-reporter=${defaultReporter}`,
  "--test-reporter-destination=stdout",
  "--test-reporter=./test/helpers/failures-reporter.mjs",
  `--test-reporter-destination=${failuresFile}`,
  ...(process.env.EMCEEPEE_TEST_TIMES
    ? ["--test-reporter=./bench/test-times-reporter.mjs", `--test-reporter-destination=${process.env.EMCEEPEE_TEST_TIMES}`]
    : []),
];
const tests = await run(
  process.execPath,
  [
    ...LOADER,
    "--test",
    `--test-concurrency=${CONCURRENCY}`,
    // A bound for a hung test, not a speed goal. Node 20 applies it to each test file's process as a whole (a batch
    // of 10 files summed 441 s at load 15), Node 24 to each test: 30 minutes leaves a busy machine room in both.
    "--test-timeout=1800000",
    ...reporters,
    ...longestFirst([
      "test/unit/all.ts",
      ...files("test/integration").filter((f) => !batched.has(f)),
      ...batchEntries,
      ...files("test/shared").filter((f) => !batched.has(f)),
    ]),
  ],
  false,
);
const dist = await distBuild;
process.stdout.write(dist.code === 0 ? dist.output : `# test dist/ build FAILED (exit ${dist.code}):\n${dist.output}`);
try {
  process.stdout.write(readFileSync(failuresFile, "utf8"));
} catch {
  /* the runner wrote nothing (it did not start) */
}
rmSync(path.dirname(failuresFile), { recursive: true, force: true });
process.stdout.write(`# tests: ${tests.code === 0 ? "ok" : "FAILED"} in ${seconds(tests.ms)}\n`);
process.exit(tests.code === 0 ? 0 : 1);
