/**
 * The shared pass (test/shared/*.test.ts) re-runs an integration file with
 * every upstream shared, except the tests and suites that behave the same in
 * both modes (no upstream involved, or only the gateway's own answers): those
 * are named, with the reason, in the wrapper and reported as skipped here.
 * It wraps node:test's test/it/describe/suite (syncBuiltinESMExports updates
 * the live `import { test } from "node:test"` bindings) for the file it loads
 * only: the filter is found through an AsyncLocalStorage entered around the
 * import, so it follows that file's module evaluation and its suites' bodies
 * (an AsyncResource keeps the store it was made in) and nothing else; the nine
 * wrappers run in one process (the "shared" batch, test/batches/batches.json)
 * without one's names skipping another's tests. It adds a test that fails when
 * a named test no longer exists, so a rename cannot quietly put a test back or
 * drop the check.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createRequire, syncBuiltinESMExports } from "node:module";
import assert from "node:assert/strict";

type Fn = (...args: unknown[]) => unknown;
interface Filter {
  same: Record<string, string>;
  seen: Set<string>;
}
const nodeTest = createRequire(import.meta.url)("node:test") as Record<string, Fn>;
const check = nodeTest.test!;
const scope = new AsyncLocalStorage<Filter>();

/**
 * Wraps node:test's declaring functions when this module is evaluated; outside a leaveOut() load they pass through.
 * On Node 20 syncBuiltinESMExports does not reach node:test (a `node:`-only builtin): an ESM import of it made
 * before this module ran keeps the originals, so this module must run before the first one (a batch's entry
 * imports it first; test/helpers/batch.ts takes `describe` through require).
 */
{
  for (const key of ["test", "it", "describe", "suite"]) {
    const original = nodeTest[key]!;
    nodeTest[key] = Object.assign(function (this: unknown, ...args: unknown[]) {
      const filter = scope.getStore();
      const [name, options] = args;
      const why = filter && typeof name === "string" ? filter.same[name] : undefined;
      if (why === undefined) return original.apply(this, args);
      filter!.seen.add(name as string);
      const fn = typeof options === "function" ? options : args[2];
      const opts = typeof options === "object" && options !== null ? options : {};
      return original.call(this, name, { ...opts, skip: `same with shared upstreams: ${why}` }, fn);
    }, original);
  }
  syncBuiltinESMExports();
}

/**
 * Loads a test file (`load`, e.g. `() => import("../integration/x.test.js")`) with the tests and suites named in
 * `same` (name → why it is the same when shared) skipped, then declares the check that each of them was seen.
 */
export async function leaveOut(same: Record<string, string>, load: () => Promise<unknown>): Promise<void> {
  const filter: Filter = { same, seen: new Set() };
  await scope.run(filter, load);
  check("shared pass: every test it leaves out still exists", () => {
    assert.deepEqual(
      Object.keys(same).filter((n) => !filter.seen.has(n)),
      [],
      "rename the entry in test/shared/ along with the test",
    );
  });
}
