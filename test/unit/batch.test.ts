/**
 * test/helpers/batch.ts and test/batches/batches.json (issue 21): a batch runs
 * each file's hooks with that file's tests, a failing file fails the batch and
 * the files after it still run; every batched file exists, once.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { batches } from "../helpers/batch.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Runs `entry` under node --test in its own test run; its exit code and TAP output. */
async function runEntry(entry: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(
    process.execPath,
    ["--import", pathToFileURL(path.join(ROOT, "test/helpers/ts-register.mjs")).href, "--test", "--test-reporter=tap", entry],
    {
      cwd: ROOT,
      // Its own test run, not a child of this one (node:test marks its children with NODE_TEST_CONTEXT).
      env: Object.fromEntries(Object.entries(process.env).filter(([key]) => key !== "NODE_TEST_CONTEXT")),
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (out += c.toString("utf8")));
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  return { code, out };
}

test("every batched file is an integration test file that exists, in one batch only, and each batch has its entry", () => {
  const seen = new Set<string>();
  for (const [name, files] of Object.entries(batches())) {
    assert.ok(existsSync(path.join(ROOT, "test/batches", `${name}.ts`)), `test/batches/${name}.ts`);
    for (const file of files) {
      assert.match(file, /^test\/(integration|shared)\/[^/]+\.test\.ts$/);
      assert.ok(existsSync(path.join(ROOT, file)), file);
      assert.ok(!seen.has(file), `${file} is in two batches`);
      seen.add(file);
    }
  }
});

test("a batch runs each file's before/after with its own tests (also two files importing a module that awaits at its top level); a failing file fails the run and the next file still runs", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-batch-"));
  try {
    const log = path.join(dir, "log.txt");
    const file = (name: string, body: string) => {
      writeFileSync(
        path.join(dir, `${name}.test.mjs`),
        `import { test, before, after } from "node:test";\nimport { appendFileSync } from "node:fs";\nconst log = (m) => appendFileSync(${JSON.stringify(log)}, m + "\\n");\n${body}\n`,
      );
      return path.join(dir, `${name}.test.mjs`);
    };
    // A helper that awaits at its top level, imported by a and c (as test/helpers/in-process.ts is by many files).
    writeFileSync(path.join(dir, "helper.mjs"), `await new Promise((r) => setTimeout(r, 100));\nexport const ready = true;\n`);
    const files = [
      file(
        "a",
        `import "./helper.mjs";\nbefore(() => log("a before"));\nafter(() => log("a after"));\ntest("a passes", async () => { log("a test"); await new Promise((r) => setTimeout(r, 100)); });`,
      ),
      // A module that awaits before declaring its tests (as one that sets up at its top level would).
      file(
        "b",
        `await new Promise((r) => setTimeout(r, 50));\nbefore(() => log("b before"));\ntest("b fails", () => { log("b test"); throw new Error("b's failure"); });`,
      ),
      file("c", `import "./helper.mjs";\nbefore(() => log("c before"));\ntest("c passes", () => log("c test"));`),
    ];
    const entry = path.join(dir, "entry.mjs");
    writeFileSync(
      entry,
      `import { runFiles } from ${JSON.stringify(pathToFileURL(path.join(ROOT, "test/helpers/batch.ts")).href)};\nrunFiles(${JSON.stringify(files)});\n`,
    );
    const { code, out } = await runEntry(entry);
    assert.equal(code, 1, out);
    assert.deepEqual(readFileSync(log, "utf8").trim().split("\n"), ["a before", "a test", "a after", "b before", "b test", "c before", "c test"], out);
    assert.match(out, /not ok \d+ - b fails/);
    assert.match(out, /b's failure/);
    assert.match(out, /^\s*ok \d+ - c passes/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("in a batch a shared-pass wrapper's left-out names skip its own file's tests only, also those a suite declares after an await", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-batch-"));
  try {
    const write = (name: string, body: string) => {
      writeFileSync(path.join(dir, name), body);
      return path.join(dir, name);
    };
    const leaveOutUrl = JSON.stringify(pathToFileURL(path.join(ROOT, "test/shared/leave-out.ts")).href);
    // x declares "same name" at its top level and "late name" in a suite whose body awaits first.
    write(
      "x.test.mjs",
      `import { test, describe } from "node:test";\ntest("same name", () => {});\ntest("x's own", () => {});\ndescribe("x's suite", async () => {\n  await new Promise((r) => setTimeout(r, 50));\n  test("late name", () => {});\n});\n`,
    );
    const wrapper = write(
      "wrapper.test.mjs",
      `import { leaveOut } from ${leaveOutUrl};\nawait leaveOut({ "same name": "why", "late name": "why" }, () => import("./x.test.mjs"));\n`,
    );
    // y, after the wrapper in the same batch, has tests of the same names: they run.
    const y = write(
      "y.test.mjs",
      `import { test, describe } from "node:test";\ntest("same name", () => {});\ndescribe("y's suite", async () => {\n  await new Promise((r) => setTimeout(r, 50));\n  test("late name", () => {});\n});\n`,
    );
    // As test/batches/shared.ts: the filter's module first.
    const entry = write(
      "entry.mjs",
      `import ${leaveOutUrl};\nimport { runFiles } from ${JSON.stringify(pathToFileURL(path.join(ROOT, "test/helpers/batch.ts")).href)};\nrunFiles(${JSON.stringify([wrapper, y])});\n`,
    );
    const { code, out } = await runEntry(entry);
    assert.equal(code, 0, out);
    const lines = (name: string) => out.split("\n").filter((l) => new RegExp(`^\\s*ok \\d+ - ${name}( #|$)`).test(l));
    assert.deepEqual(
      lines("same name").map((l) => l.includes("# SKIP")),
      [true, false],
      out,
    );
    assert.deepEqual(
      lines("late name").map((l) => l.includes("# SKIP")),
      [true, false],
      out,
    );
    assert.match(out, /^\s*ok \d+ - shared pass: every test it leaves out still exists$/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
