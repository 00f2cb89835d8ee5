/**
 * node:test reporter: one TSV row per test file (`file  tests  failed  ms`),
 * ms being the sum of the file's top-level test durations (its wall time less
 * process start). test/run-all.mjs adds it when EMCEEPEE_TEST_TIMES names an
 * output file; bench/test-times.md has the numbers.
 */
import path from "node:path";

export default async function* fileTimes(source) {
  const files = new Map();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { file, nesting, details } = event.data;
    if (nesting !== 0 || !file) continue;
    const row = files.get(file) ?? { tests: 0, failed: 0, ms: 0 };
    row.tests += 1;
    if (event.type === "test:fail" && !details?.error?.failureType?.includes?.("cancel")) row.failed += 1;
    row.ms += details?.duration_ms ?? 0;
    files.set(file, row);
  }
  yield "file\ttests\tfailed\tms\n";
  for (const [file, row] of [...files].sort((a, b) => b[1].ms - a[1].ms)) {
    yield `${path.relative(process.cwd(), file)}\t${row.tests}\t${row.failed}\t${Math.round(row.ms)}\n`;
  }
}
