/**
 * A bench's numbers for another program (bench/compare.bench.ts): with
 * `--results=<file>` (or BENCH_RESULTS) the bench writes them there as JSON
 * beside its markdown on stdout. Without it, nothing is written.
 */
import fs from "node:fs";
import os from "node:os";

/** When this bench's process began (this module loads with it). */
const started = new Date().toISOString();

export interface BenchResults<T> {
  bench: string;
  /** ISO time the bench began. */
  started: string;
  /** ISO time the bench ended. */
  at: string;
  /** The 1-minute load average when it began and when it ended. */
  load: [number, number];
  data: T;
}

function resultsPath(): string | undefined {
  const flag = process.argv.find((a) => a.startsWith("--results="));
  const file = flag ? flag.slice("--results=".length) : process.env.BENCH_RESULTS;
  return file || undefined;
}

/** Writes `data` to the --results file, if one was asked for. */
export function writeResults<T>(bench: string, loadBefore: number, data: T): void {
  const file = resultsPath();
  if (!file) return;
  const results: BenchResults<T> = { bench, started, at: new Date().toISOString(), load: [loadBefore, os.loadavg()[0]!], data };
  fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
}
