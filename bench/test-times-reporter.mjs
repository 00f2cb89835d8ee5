/**
 * node:test reporter: one TSV row per test file (`file  tests  failed  ms`),
 * ms being the sum of the file's top-level test durations (its wall time less
 * process start). test/run-all.mjs adds it when EMCEEPEE_TEST_TIMES names an
 * output file; bench/test-times.md has the numbers.
 */
import { readFileSync } from "node:fs";
import path from "node:path";

/**
 * The file the runner ran: a test reports where it was declared, so test/unit/*
 * ran in test/unit/all.ts, and the shared pass's tests (declared through
 * test/shared/leave-out.ts) count as one row, test/shared/*.
 */
function runnerFile(declared) {
  const rel = path.relative(process.cwd(), declared);
  if (rel.startsWith("test/unit/")) return "test/unit/all.ts";
  if (rel === "test/shared/leave-out.ts") return "test/shared/*";
  return rel;
}

/**
 * A batch (test/helpers/batch.ts) runs each of its files as a top-level suite named by the file's
 * path, whose own top-level tests are then at nesting 1: still one row per file, as when it ran alone.
 */
const BATCH_HELPER = "test/helpers/batch.ts";
const batchedFiles = new Set(Object.values(JSON.parse(readFileSync("test/batches/batches.json", "utf8"))).flat());

export default async function* fileTimes(source) {
  const files = new Map();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { nesting, details } = event.data;
    if (!event.data.file) continue;
    const declared = runnerFile(event.data.file);
    const suiteOfBatch = nesting === 0 && declared === BATCH_HELPER;
    // In a batch a file's top-level tests are at nesting 1: they count as its tests; its suite's duration is its time.
    const inBatch = nesting === 1 && batchedFiles.has(declared);
    // The shared batch's tests are all declared through leave-out.ts: their counts go to one test/shared/* row, the time to each wrapper's suite.
    const sharedInBatch = nesting === 1 && declared === "test/shared/*";
    if (nesting !== 0 && !inBatch && !sharedInBatch) continue;
    const file = suiteOfBatch ? event.data.name : declared;
    const row = files.get(file) ?? { tests: 0, failed: 0, ms: 0 };
    const failed = event.type === "test:fail" && !details?.error?.failureType?.includes?.("cancel");
    if (!suiteOfBatch) {
      row.tests += 1;
      if (failed) row.failed += 1;
    } else if (failed && details?.error?.failureType !== "subtestsFailed") row.failed += 1; // the file itself failed (e.g. to load)
    if (!inBatch && !sharedInBatch) row.ms += details?.duration_ms ?? 0;
    files.set(file, row);
  }
  yield "file\ttests\tfailed\tms\n";
  for (const [file, row] of [...files].sort((a, b) => b[1].ms - a[1].ms)) {
    yield `${file}\t${row.tests}\t${row.failed}\t${Math.round(row.ms)}\n`;
  }
}
