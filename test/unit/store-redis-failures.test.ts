/**
 * Every rejection of the Redis store is EMCP_STORE_UNAVAILABLE with the
 * failure as `cause` and the server named (docs/errors.md), whatever went
 * wrong: every method of every store kind is called against a real
 * redis-server that was stopped, that answers too late (CLIENT PAUSE), and
 * that became a read-only replica (READONLY). Never a raw ioredis error.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import type { Store } from "../../src/store/contracts.js";
import { openRedisStore } from "../../src/store/redis/index.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { freePort, pollFor } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";
import { event, pending, session, task } from "../store/fixtures.js";

const skip = redisSkipReason();
const EVENT_LIMITS = { maxPerSession: 100, maxTotal: 1000 };
const REPLAY_LIMITS = { maxEvents: 100, maxBytes: 100_000 };

/** One call of every store method, with arguments that succeed on a healthy server. */
const OPERATIONS: ReadonlyArray<{ name: string; run: (s: Store) => Promise<unknown> }> = [
  { name: "tasks.get", run: (s) => s.tasks.get("T1") },
  { name: "tasks.create", run: (s) => s.tasks.create(task("T9", "s1")) },
  { name: "tasks.transition", run: (s) => s.tasks.transition("T1", { from: ["working"], to: "completed" }) },
  { name: "tasks.patch", run: (s) => s.tasks.patch("T1", { statusMessage: "x" }) },
  { name: "tasks.delete", run: (s) => s.tasks.delete("T1") },
  { name: "tasks.listBySession", run: (s) => s.tasks.listBySession("s1") },
  { name: "tasks.findByUpstreamTask", run: (s) => s.tasks.findByUpstreamTask("s1", "srv", "u1") },
  { name: "tasks.listWorking", run: (s) => s.tasks.listWorking() },
  { name: "tasks.deleteExpired", run: (s) => s.tasks.deleteExpired(Date.now() + 1e9) },
  { name: "tasks.enforceRetention", run: (s) => s.tasks.enforceRetention("s1", { maxCount: 0, maxBytes: 0, kind: "tool" }) },
  { name: "tasks.deleteBySession", run: (s) => s.tasks.deleteBySession("s1") },
  { name: "sessions.get", run: (s) => s.sessions.get("s1") },
  { name: "sessions.put", run: (s) => s.sessions.put(session("s9")) },
  { name: "sessions.update", run: (s) => s.sessions.update("s1", { logLevel: "debug" }) },
  { name: "sessions.touch", run: (s) => s.sessions.touch("s1", 5) },
  { name: "sessions.delete", run: (s) => s.sessions.delete("s1") },
  { name: "sessions.listExpired", run: (s) => s.sessions.listExpired(Date.now()) },
  { name: "events.append", run: (s) => s.events.append("s1", event(), EVENT_LIMITS) },
  { name: "events.takeUndelivered", run: (s) => s.events.takeUndelivered("s1") },
  { name: "events.takeAfter", run: (s) => s.events.takeAfter("s1", "E1") },
  { name: "events.listAfter", run: (s) => s.events.listAfter("s1") },
  { name: "events.stats", run: (s) => s.events.stats("s1") },
  { name: "events.total", run: (s) => s.events.total() },
  { name: "events.deleteBySession", run: (s) => s.events.deleteBySession("s1") },
  { name: "pending.put", run: (s) => s.pending.put(pending("P9", "s1")) },
  { name: "pending.get", run: (s) => s.pending.get("P1") },
  { name: "pending.delete", run: (s) => s.pending.delete("P1") },
  { name: "pending.listBySession", run: (s) => s.pending.listBySession("s1") },
  { name: "pending.listAll", run: (s) => s.pending.listAll() },
  { name: "pending.deleteExpired", run: (s) => s.pending.deleteExpired(Date.now() + 1e9) },
  { name: "pending.deleteBySession", run: (s) => s.pending.deleteBySession("s1") },
  { name: "replay.append", run: (s) => s.replay.append("s1", "st", { jsonrpc: "2.0", method: "x" }, REPLAY_LIMITS) },
  { name: "replay.streamOf", run: (s) => s.replay.streamOf("s1", "1") },
  { name: "replay.replayAfter", run: (s) => s.replay.replayAfter("s1", "1") },
  { name: "replay.replayStream", run: (s) => s.replay.replayStream("s1", "st", 0) },
  { name: "replay.size", run: (s) => s.replay.size("s1") },
  { name: "replay.deleteBySession", run: (s) => s.replay.deleteBySession("s1") },
  { name: "servers.put", run: (s) => s.servers.put({ name: "x", config: { command: "true" } as never, addedAt: 1, addedBy: "s1" }) },
  { name: "servers.get", run: (s) => s.servers.get("x") },
  { name: "servers.delete", run: (s) => s.servers.delete("x") },
  { name: "servers.list", run: (s) => s.servers.list() },
];

/** What each operation did: "resolved", or what was wrong with its rejection ("" when it was EMCP_STORE_UNAVAILABLE with a cause, naming the server). Run at once, so that timeouts overlap. */
async function outcomes(store: Store, server: RedisServer): Promise<Map<string, string>> {
  const results = await Promise.all(
    OPERATIONS.map(async (op): Promise<[string, string]> => {
      const outcome = await op.run(store).then(
        () => "resolved",
        (err: unknown) => err,
      );
      if (outcome === "resolved") return [op.name, "resolved"];
      if (!(outcome instanceof GatewayError)) return [op.name, `${String(outcome)} (not a GatewayError)`];
      if (outcome.code !== ErrorCodes.STORE_UNAVAILABLE) return [op.name, `${outcome.code} ${outcome.message}`];
      if (outcome.cause === undefined) return [op.name, "no cause"];
      if (!outcome.message.includes(`127.0.0.1:${server.port}`)) return [op.name, `does not name the server: ${outcome.message}`];
      return [op.name, ""];
    }),
  );
  return new Map(results);
}

/** The operations that did not reject with EMCP_STORE_UNAVAILABLE (resolved ones too, unless `resolving` may). */
async function wrongRejections(store: Store, server: RedisServer, resolving: (name: string) => boolean = () => false): Promise<string[]> {
  return [...(await outcomes(store, server))].flatMap(([name, wrong]) =>
    wrong === "" || (wrong === "resolved" && resolving(name)) ? [] : [`${name}: ${wrong}`],
  );
}

/** A store with seed data (so that the operations find something to change). */
async function seeded(server: RedisServer, prefix: string, commandTimeoutMs = 5_000): Promise<Store> {
  const store = await openRedisStore(server.url, new ManualClock(), { keyPrefix: prefix, commandTimeoutMs });
  for (const op of OPERATIONS) await op.run(store); // every operation works on a healthy server
  await store.tasks.create(task("T1", "s1", { upstreamTaskId: "u1" }));
  await store.sessions.put(session("s1"));
  await store.pending.put(pending("P1", "s1"));
  await store.events.append("s1", event(), EVENT_LIMITS);
  await store.replay.append("s1", "st", { jsonrpc: "2.0", method: "y" }, REPLAY_LIMITS);
  await store.servers.put({ name: "x", config: { command: "true" } as never, addedAt: 1, addedBy: "s1" });
  return store;
}

/** Operations that write whatever is stored (others may find nothing to change, and a replica runs them). */
const ALWAYS_WRITES = [
  "tasks.create",
  "tasks.transition",
  "tasks.patch",
  "sessions.put",
  "sessions.update",
  "sessions.touch",
  "events.append",
  "pending.put",
  "replay.append",
  "servers.put",
];

if (skip !== undefined) {
  test("redis store failures", { skip }, () => undefined);
} else {
  describe("redis: every store method rejects with EMCP_STORE_UNAVAILABLE", () => {
    const servers: RedisServer[] = [];
    const stores: Store[] = [];
    after(async () => {
      await Promise.allSettled(stores.map((s) => s.close()));
      await Promise.allSettled(servers.map((s) => s.stop()));
    });

    test("the server stopped (connection refused), and after it is back every method works again", async () => {
      const server = await startRedis();
      servers.push(server);
      const store = await seeded(server, "down:");
      stores.push(store);
      await server.kill();
      assert.deepEqual(await wrongRejections(store, server), []);
      assert.equal(await store.healthy(), false);
      // ioredis may still report its last state for a moment after the kill (seen once on CI): wait for it to say why.
      let why = store.problem?.();
      for (const deadline = Date.now() + 30_000; why === undefined && Date.now() < deadline; why = store.problem?.()) {
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.match(why ?? "", /is not connected.*check that Redis is running/, "readyz's log line says why");
      await server.restart();
      await pollFor(async () => ((await store.healthy()) ? true : undefined), "the store reconnected");
      await store.tasks.create(task("T1", "s1"));
      await store.sessions.put(session("s1"));
      for (const op of OPERATIONS) await op.run(store);
    });

    test("the server answers too late (CLIENT PAUSE): command timeouts", async () => {
      const server = await startRedis();
      servers.push(server);
      const store = await seeded(server, "slow:", 300);
      stores.push(store);
      await server.client().call("CLIENT", "PAUSE", "3000", "ALL");
      assert.deepEqual(await wrongRejections(store, server), []);
    });

    test("the server became a read-only replica (READONLY): every write rejects", async () => {
      const server = await startRedis();
      servers.push(server);
      const store = await seeded(server, "ro:");
      stores.push(store);
      // A replica of a master that does not exist: it keeps its data and refuses writes.
      await server.client().call("REPLICAOF", "127.0.0.1", String(await freePort()));
      const wrong = await wrongRejections(store, server, (name) => !ALWAYS_WRITES.includes(name));
      assert.deepEqual(wrong, [], "a write rejects (one with nothing to change may resolve), every read resolves");
    });
  });
}
