/**
 * node:test reporter: one TSV row per test file (`file  tests  failed  ms`),
 * ms being the sum of the file's top-level test durations (its wall time less
 * process start). test/run-all.mjs adds it when EMCEEPEE_TEST_TIMES names an
 * output file; bench/test-times.md has the numbers.
 */
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

export default async function* fileTimes(source) {
  const files = new Map();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { nesting, details } = event.data;
    if (nesting !== 0 || !event.data.file) continue;
    const file = runnerFile(event.data.file);
    const row = files.get(file) ?? { tests: 0, failed: 0, ms: 0 };
    row.tests += 1;
    if (event.type === "test:fail" && !details?.error?.failureType?.includes?.("cancel")) row.failed += 1;
    row.ms += details?.duration_ms ?? 0;
    files.set(file, row);
  }
  yield "file\ttests\tfailed\tms\n";
  for (const [file, row] of [...files].sort((a, b) => b[1].ms - a[1].ms)) {
    yield `${file}\t${row.tests}\t${row.failed}\t${Math.round(row.ms)}\n`;
  }
}
