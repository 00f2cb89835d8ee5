/**
 * node:test reporter: at the end of the run, every failed test again, with its file and its error, so
 * that the last lines of a long `npm test` log (all a CI page may show) name what failed.
 * test/run-all.mjs adds it and prints what it wrote after the run.
 */
import path from "node:path";

const MAX_LINES = 25;
const MAX_LISTED = 40;

/** The error a failed test threw: node:test wraps it (failureType testCodeFailure) and keeps it as `cause`. */
function describe(error) {
  if (!error) return "(no error given)";
  const inner = error.failureType === "testCodeFailure" && error.cause ? error.cause : error;
  const text = inner instanceof Error || typeof inner?.stack === "string" ? String(inner.stack ?? inner.message) : String(inner?.message ?? inner);
  // Node's own frames say nothing about the test; the cause, when there is one, often says the most.
  const cause = inner?.cause ? `\ncause: ${String(inner.cause?.stack ?? inner.cause?.message ?? inner.cause)}` : "";
  const lines = `${text}${cause}`.split("\n").filter((line) => !/^\s+at .*\bnode:|^\s+at new Promise|^\s+at Array\.map/.test(line));
  const kept = lines.slice(0, MAX_LINES);
  if (lines.length > MAX_LINES) kept.push(`… ${lines.length - MAX_LINES} more lines`);
  const type = error.failureType && error.failureType !== "testCodeFailure" ? ` [${error.failureType}]` : "";
  return `${kept.join("\n")}${type}`;
}

export default async function* failures(source) {
  const failed = [];
  for await (const event of source) {
    if (event.type !== "test:fail") continue;
    const { name, file, details } = event.data;
    // A suite or file whose tests failed is listed through them; a hook's or a file's own failure is listed itself.
    if (details?.error?.failureType === "subtestsFailed") continue;
    failed.push({ name, file: file ? path.relative(process.cwd(), file) : "(unknown file)", error: describe(details?.error) });
  }
  if (failed.length === 0) return;
  yield `# failed tests: ${failed.length}\n`;
  for (const { name, file, error } of failed.slice(0, MAX_LISTED)) {
    yield `# ✖ ${file}: ${name}\n${error.replace(/^/gm, "#     ")}\n`;
  }
  if (failed.length > MAX_LISTED) yield `# … and ${failed.length - MAX_LISTED} more (search the log for "not ok" or "✖")\n`;
}
