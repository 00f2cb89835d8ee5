/** Contract cases for PinStore (pinned tool definitions, gateway.governance.pins); see contract.ts. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PinnedDefinition } from "../../src/store/contracts.js";
import type { StoreFactory } from "./contract.js";
import { withStore } from "./fixtures.js";

const def = (digest: string, description: string, at = 1000): PinnedDefinition => ({
  digest,
  definition: { description, inputSchema: { type: "object", properties: {}, required: [] } },
  at,
});

export function pinContract(factory: StoreFactory): void {
  describe("pins", () => {
    test("the first definition pins; a second pinIfAbsent keeps it; get and list as written, by server then tool", () =>
      withStore(factory, async ({ store }) => {
        const first = await store.pins.pinIfAbsent("fs", "read", def("a1", "reads"));
        assert.deepEqual(first, { server: "fs", tool: "read", pinned: def("a1", "reads") });
        assert.deepEqual(await store.pins.pinIfAbsent("fs", "read", def("a2", "other")), first);
        await store.pins.pinIfAbsent("db", "query", def("b1", "queries"));
        assert.deepEqual(await store.pins.get("fs", "read"), first);
        assert.equal(await store.pins.get("fs", "nope"), undefined);
        assert.deepEqual(
          (await store.pins.list()).map((r) => `${r.server}/${r.tool}`),
          ["db/query", "fs/read"],
        );
        assert.deepEqual(
          (await store.pins.list({ server: "fs" })).map((r) => r.tool),
          ["read"],
        );
      }));

    test("quarantine keeps a different definition pending (the newest), never the pinned one, never for an unknown tool", () =>
      withStore(factory, async ({ store }) => {
        await store.pins.pinIfAbsent("fs", "read", def("a1", "reads"));
        assert.equal(await store.pins.quarantine("fs", "read", def("a1", "reads", 2000)), false);
        assert.equal(await store.pins.quarantine("fs", "nope", def("x", "x")), false);
        assert.equal(await store.pins.quarantine("fs", "read", def("a2", "now also sends your files away", 3000)), true);
        assert.equal(await store.pins.quarantine("fs", "read", def("a3", "newer", 4000)), true);
        const r = await store.pins.get("fs", "read");
        assert.deepEqual(r?.pending, def("a3", "newer", 4000));
        assert.equal(r?.pinned.digest, "a1");
        assert.deepEqual(
          (await store.pins.list({ quarantined: true })).map((p) => p.tool),
          ["read"],
        );
        assert.deepEqual(await store.pins.list({ quarantined: false }), []);
      }));

    test("accept pins the pending definition only while it is the one named (compare-and-set), with who and when", () =>
      withStore(factory, async ({ store }) => {
        await store.pins.pinIfAbsent("fs", "read", def("a1", "reads"));
        await store.pins.quarantine("fs", "read", def("a2", "changed", 3000));
        assert.equal(await store.pins.accept("fs", "read", "a9", "alice", 5000), undefined);
        assert.equal(await store.pins.accept("fs", "nope", "a2", "alice", 5000), undefined);
        const done = await store.pins.accept("fs", "read", "a2", "alice", 5000);
        assert.deepEqual(done, { server: "fs", tool: "read", pinned: { ...def("a2", "changed", 5000), by: "alice" } });
        assert.deepEqual(await store.pins.get("fs", "read"), done);
        assert.equal(await store.pins.accept("fs", "read", "a2", "bob", 6000), undefined, "accepted once only");
        assert.deepEqual(await store.pins.list({ quarantined: true }), []);
      }));
  });
}
