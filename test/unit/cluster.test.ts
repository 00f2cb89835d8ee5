/**
 * The cluster's parts against a real redis-server (docs/adr/0013): owner
 * records move only by compare-and-set (exactly one adopter), a closed or
 * restarted replica's heartbeat is gone at once, start-up recovery sees only
 * orphaned sessions, and adoption settles what died with the owner by the
 * rules of start-up recovery (gateway-owned calls failed with the replica
 * named, tasks on HTTP upstreams kept, pending requests rejected with an
 * event). Whole replicas behind a balancer: test/integration/replicas.test.ts.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { pino } from "pino";
import { settleAdopted } from "../../src/cluster/adopt.js";
import { Membership } from "../../src/cluster/membership.js";
import { orphansOnly } from "../../src/cluster/recovery-view.js";
import { ulidGenerator } from "../../src/clock.js";
import { gatewaySettingsSchema } from "../../src/config/schema.js";
import { silentLogger, type Logger } from "../../src/logging.js";
import { openStore } from "../../src/store/open.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { redisSkipReason, startRedis } from "../helpers/redis.js";
import { pending, task } from "../store/fixtures.js";

const skip = redisSkipReason();

if (skip !== undefined) {
  test("cluster parts on redis", { skip }, () => undefined);
} else {
  const server = await startRedis();
  const connections: Redis[] = [];
  const memberships: Membership[] = [];
  after(async () => {
    await Promise.allSettled(memberships.map((m) => m.close()));
    for (const c of connections) c.disconnect();
    await server.stop();
  });
  let prefixes = 0;

  function member(prefix: string, replicaId: string, url = `http://10.0.0.1:${8800 + memberships.length}`, logger: Logger = silentLogger): Membership {
    const redis = new Redis(server.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    connections.push(redis);
    const m = new Membership({
      redis,
      prefix,
      replicaId,
      advertiseUrl: url,
      secret: "unit-test-secret-0123456789",
      leaseMs: 60_000,
      ownerTtlMs: 60_000,
      clock: new ManualClock(),
      logger,
    });
    memberships.push(m);
    return m;
  }

  describe("membership", () => {
    test("owner records: created by own(), claimed only when free, adopted by exactly one replica and only from the owner named", async () => {
      const prefix = `m${++prefixes}:`;
      const [a, b, c] = [member(prefix, "a"), member(prefix, "b"), member(prefix, "c")];
      await Promise.all([a.start(), b.start(), c.start()]);
      await a.own("s1");
      assert.equal(await b.ownerOf("s1"), a.incarnation);
      assert.equal(await b.claim("s1"), false, "a session with an owner cannot be claimed");
      assert.equal(await b.claim("s2"), true, "a session without one can");
      assert.equal(await c.claim("s2"), false);
      const adopted = await Promise.all([b.adopt("s1", a.incarnation), c.adopt("s1", a.incarnation)]);
      assert.deepEqual(
        adopted.filter((x) => x),
        [true],
        "exactly one adopter wins",
      );
      const winner = adopted[0] ? b : c;
      assert.equal(await a.ownerOf("s1"), winner.incarnation);
      assert.equal(await a.adopt("s1", a.incarnation), false, "an adoption naming a previous owner changes nothing");
    });

    test("heartbeat: the URL while running; gone at close, and at the start of the same replicaId's next incarnation", async () => {
      const prefix = `m${++prefixes}:`;
      const first = member(prefix, "r1", "http://10.0.0.5:8808");
      await first.start();
      const observer = member(prefix, "obs");
      await observer.start();
      assert.equal(await observer.urlOf(first.incarnation), "http://10.0.0.5:8808");
      // The same replica started again (first is taken to have been SIGKILLed: its key would live for leaseMs).
      const second = member(prefix, "r1", "http://10.0.0.5:8808");
      assert.notEqual(second.incarnation, first.incarnation, "every start is a new incarnation");
      await second.start();
      assert.equal(await observer.urlOf(first.incarnation), undefined, "the predecessor's heartbeat is dropped at once");
      assert.equal(await observer.urlOf(second.incarnation), "http://10.0.0.5:8808");
      await second.close();
      assert.equal(await observer.urlOf(second.incarnation), undefined, "a closed replica's heartbeat is gone: its sessions are adoptable");
    });

    test("closed while waiting to join again after a conflict: no heartbeat or member record is written after close", async () => {
      const prefix = `m${++prefixes}:`;
      const url = "http://10.0.0.7:8809";
      const live = member(prefix, "live", url);
      await live.start();
      const events: string[] = [];
      const sink = { write: (line: string) => void events.push((JSON.parse(line) as { msg: string }).msg) };
      const late = member(prefix, "late", url, pino({ level: "info" }, sink));
      const starting = late.start();
      const end = Date.now() + 30_000;
      while (!events.includes("cluster_join_conflict") && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      assert.ok(events.includes("cluster_join_conflict"), "the second replica advertising the same URL waits (its clock is not moved)");
      // The conflict is gone by the time the waiting replica is closed: a join now would succeed.
      await live.close();
      await late.close();
      await starting;
      const redis = new Redis(server.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
      connections.push(redis);
      assert.equal(await redis.get(`${prefix}replica:${late.incarnation}`), null, "no heartbeat of the closed replica");
      assert.deepEqual(await redis.smembers(`${prefix}replicas`), [], "no member record of the closed replica");
    });
  });

  describe("adoption and recovery", () => {
    async function fixture() {
      const prefix = `a${++prefixes}:`;
      const clock = new ManualClock(50_000);
      const store = await openStore({ kind: "redis", url: server.url, keyPrefix: prefix }, { clock });
      const registry = new ServerRegistry();
      registry.add({ name: "stdio", config: { command: "node", args: ["x.js"] }, addedAt: 1, addedBy: "config" });
      registry.add({ name: "http", config: { url: "http://127.0.0.1:9/mcp" }, addedAt: 1, addedBy: "config" });
      const settings = gatewaySettingsSchema.parse({});
      return { prefix, store, deps: { store, registry, settings, clock, newId: ulidGenerator(clock), logger: silentLogger } };
    }

    test("settleAdopted: the dead owner's calls fail with it named, HTTP upstream tasks stay, pending requests are rejected, each with one event", async () => {
      const { store, deps } = await fixture();
      try {
        await store.tasks.create(task("01A", "s1", { server: "stdio" }));
        await store.tasks.create(task("01B", "s1", { server: "http", upstreamTaskId: "up-1", upstreamSessionId: "mcp-1" }));
        await store.tasks.create(task("01C", "s1", { server: "stdio", upstreamTaskId: "up-2" }));
        await store.tasks.create(task("01D", "s1", { server: "http", kind: "receiver", toolName: "elicitation/create" }));
        await store.tasks.create(task("01E", "s1", { server: "stdio", status: "completed", result: { content: [] } }));
        await store.tasks.create(task("01F", "s2", { server: "stdio" }));
        await store.pending.put(pending("req-1", "s1", { server: "http" }));
        const report = await settleAdopted(deps, "s1", "r1.dead");
        assert.deepEqual(report, { tasks: 3, requests: 1 });
        const a = await store.tasks.get("01A");
        assert.equal(a?.status, "failed");
        assert.equal(a?.error, "replica r1.dead stopped while this call ran; its result is unknown");
        assert.equal((await store.tasks.get("01B"))?.status, "working", "a task running on an HTTP upstream is kept (restore re-attaches it)");
        assert.match((await store.tasks.get("01C"))?.error ?? "", /ran there over stdio and ended with it/);
        assert.equal((await store.tasks.get("01D"))?.status, "failed");
        assert.equal((await store.tasks.get("01E"))?.status, "completed", "an ended task is left alone");
        assert.equal((await store.tasks.get("01F"))?.status, "working", "another session's task is not touched");
        assert.equal(await store.pending.get("req-1"), undefined);
        const { events } = await store.events.takeUndelivered("s1");
        assert.deepEqual(
          events.map((e) => [e.type, e.data.taskId ?? e.data.requestId]),
          [
            ["task_failed", "01A"],
            ["task_failed", "01C"],
            ["elicitation_rejected", "req-1"],
          ],
        );
        assert.deepEqual(await settleAdopted(deps, "s1", "r1.dead"), { tasks: 0, requests: 0 }, "a second adopter finds nothing left to settle");
      } finally {
        await store.close();
      }
    });

    test("start-up recovery sees only sessions whose owner is not alive", async () => {
      const { prefix, store } = await fixture();
      const live = member(prefix, "live");
      const dead = member(prefix, "dead");
      await Promise.all([live.start(), dead.start()]);
      try {
        await live.own("held");
        await dead.own("orphan");
        await dead.close();
        for (const [id, s] of [
          ["01A", "held"],
          ["01B", "orphan"],
          ["01C", "never-owned"],
        ] as const) {
          await store.tasks.create(task(id, s));
          await store.pending.put(pending(`req-${id}`, s));
        }
        const view = orphansOnly(store, live);
        assert.deepEqual(
          (await view.tasks.listWorking()).map((t) => t.sessionId),
          ["orphan", "never-owned"],
        );
        assert.deepEqual((await view.pending.listAll()).map((p) => p.sessionId).sort(), ["never-owned", "orphan"]);
        assert.equal((await view.tasks.get("01A"))?.sessionId, "held", "other methods pass through");
      } finally {
        await store.close();
      }
    });
  });
}
