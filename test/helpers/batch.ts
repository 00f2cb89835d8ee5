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
import { AsyncResource } from "node:async_hooks";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import type * as NodeTest from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

// Through require, not `import { describe } from "node:test"`: an ESM import of node:test would fix its bindings
// before the shared batch's test/shared/leave-out.ts wraps them (see there).
const { describe } = createRequire(import.meta.url)("node:test") as typeof NodeTest;

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

/**
 * One suite per file (a path from the repository's root, or absolute), in order; a suite imports its file, whose tests
 * and hooks become the suite's. node:test runs every suite's body at once, so each waits for the previous file's import
 * first: a module that awaits at its top level (test/helpers/in-process.ts does) and that two files import resumes both
 * when it is done, in the context of the file that loaded it first, which then took the other's tests and hooks too.
 */
export function runFiles(files: readonly string[]): void {
  let previous: Promise<unknown> = Promise.resolve();
  for (const file of files) {
    const prior = previous;
    previous = new Promise((resolve) => {
      describe(file, async () => {
        // Made in the suite's context: after the wait (a promise made outside it), the import runs in it again.
        const context = new AsyncResource("emceepee:batch-file");
        await prior;
        const imported = context.runInAsyncScope(() => import(pathToFileURL(path.resolve(ROOT, file)).href));
        // The next file waits for this one to be loaded, or to fail to (its suite fails; the next still runs).
        imported.then(resolve, resolve);
        await imported;
      });
    });
  }
}
