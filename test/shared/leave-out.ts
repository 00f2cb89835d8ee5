/**
 * The shared pass (test/shared/*.test.ts) re-runs an integration file with
 * every upstream shared, except the tests and suites that behave the same in
 * both modes (no upstream involved, or only the gateway's own answers): those
 * are named, with the reason, in the wrapper and reported as skipped here.
 * It wraps node:test's test/it/describe/suite for the file it imports
 * (syncBuiltinESMExports updates the live `import { test } from "node:test"`
 * bindings), and adds a test that fails when a named test no longer exists,
 * so a rename cannot quietly put a test back or drop the check.
 */
import { createRequire, syncBuiltinESMExports } from "node:module";
import assert from "node:assert/strict";

type Fn = (...args: unknown[]) => unknown;
const nodeTest = createRequire(import.meta.url)("node:test") as Record<string, Fn>;

/** Installs the filter for `same` (name → why it is the same when shared); call the result after the import (the filter stays: a suite's body may run later). */
export function leaveOut(same: Record<string, string>): () => void {
  const seen = new Set<string>();
  const check = nodeTest.test!;
  for (const key of ["test", "it", "describe", "suite"]) {
    const original = nodeTest[key]!;
    nodeTest[key] = Object.assign(function (this: unknown, ...args: unknown[]) {
      const [name, options] = args;
      const why = typeof name === "string" ? same[name] : undefined;
      if (why === undefined) return original.apply(this, args);
      seen.add(name as string);
      const fn = typeof options === "function" ? options : args[2];
      const opts = typeof options === "object" && options !== null ? options : {};
      return original.call(this, name, { ...opts, skip: `same with shared upstreams: ${why}` }, fn);
    }, original);
  }
  syncBuiltinESMExports();
  return () => {
    check("shared pass: every test it leaves out still exists", () => {
      assert.deepEqual(
        Object.keys(same).filter((n) => !seen.has(n)),
        [],
        "rename the entry in test/shared/ along with the test",
      );
    });
  };
}
