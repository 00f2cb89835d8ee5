/** The store contract suite against the memory backend (openStore({ kind: "memory" })). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { openStore } from "../../src/store/open.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { storeContract } from "../store/contract.js";

storeContract("memory", async () => {
  const clock = new ManualClock();
  return { store: await openStore({ kind: "memory" }, { clock }), clock };
});

test("a memory store with a path is a config error, not a silent ignore", async () => {
  await assert.rejects(openStore({ kind: "memory", path: "/tmp/x.db" }), (err: Error & { code?: string }) => {
    assert.equal(err.code, "EMCP_CONFIG_INVALID");
    assert.match(err.message, /gateway\.store\.path.*sqlite/);
    return true;
  });
});
