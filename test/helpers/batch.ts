/**
 * Runs one batch of test/batches/batches.json in this process: each file under
 * a suite named by its path, one after another (issue 21: a test process costs
 * about 2 s of CPU to start on Node 20 before its first test, most of it
 * importing the gateway; a batch pays that once). A file's own `before`/`after`
 * hooks belong to its suite, so they run when its tests do, not at the end of
 * the batch. Every file still runs alone (`node --import
 * ./test/helpers/ts-register.mjs --test test/integration/x.test.ts`); which
 * files may share a process, and why, is in test/README.md ("Batches").
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The batches: name → test files (paths from the repository's root). */
export function batches(): Record<string, string[]> {
  return JSON.parse(readFileSync(path.join(ROOT, "test/batches/batches.json"), "utf8")) as Record<string, string[]>;
}

/** Declares one suite per file of batch `name` (runFiles). */
export function runBatch(name: string): void {
  const files = batches()[name];
  if (!files) throw new Error(`no batch "${name}" in test/batches/batches.json`);
  runFiles(files);
}

/** One suite per file (a path from the repository's root, or absolute), in order; a suite imports its file, whose tests and hooks become the suite's. */
export function runFiles(files: readonly string[]): void {
  for (const file of files) {
    describe(file, async () => {
      await import(pathToFileURL(path.resolve(ROOT, file)).href);
    });
  }
}
