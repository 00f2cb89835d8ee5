/**
 * The Redis backend: the shared contract suite against a real redis-server
 * (each store under its own key prefix), then what only a network store can
 * show — data kept across a dropped connection, fail-fast with
 * EMCP_STORE_UNAVAILABLE while Redis is down and recovery when it is back,
 * clear errors for a bad URL or an unreachable server (password never shown),
 * and two stores on one Redis (two replicas) racing the same tasks.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { gatewaySettingsSchema } from "../../src/config/schema.js";
import { GatewayError } from "../../src/errors.js";
import type { Store } from "../../src/store/contracts.js";
import { openStore } from "../../src/store/open.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { freePort, pollFor } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";
import { storeContract } from "../store/contract.js";
import { rejectsWith, task } from "../store/fixtures.js";

const skip = redisSkipReason();
let prefixCounter = 0;

async function open(server: RedisServer, keyPrefix = `t${++prefixCounter}:`): Promise<Store> {
  return openStore({ kind: "redis", url: server.url, keyPrefix }, { clock: new ManualClock() });
}

if (skip !== undefined) {
  test("redis store", { skip }, () => undefined);
} else {
  const server = await startRedis();
  after(() => server.stop());

  storeContract("redis", async () => {
    const clock = new ManualClock();
    return { store: await openStore({ kind: "redis", url: server.url, keyPrefix: `c${++prefixCounter}:` }, { clock }), clock };
  });

  describe("redis: the server", () => {
    test("keys live under the prefix (default emceepee:) and location is the URL", async () => {
      const admin = server.client();
      const store = await openStore({ kind: "redis", url: server.url }, { clock: new ManualClock() });
      try {
        assert.equal(store.kind, "redis");
        assert.equal(store.location, `${server.url}`.replace(/\/?$/, ""));
        await store.tasks.create(task("01P", "sP"));
        const keys = await admin.keys("*01P*");
        assert.deepEqual(keys, ["emceepee:t:01P"]);
      } finally {
        await store.tasks.deleteBySession("sP");
        await store.close();
      }
    });

    test("data is kept across a dropped connection; the store reconnects on its own", async () => {
      const admin = server.client();
      const store = await open(server);
      try {
        await store.tasks.create(task("01R", "s1"));
        await store.servers.put({ name: "x", config: { command: "true" } as never, addedAt: 1, addedBy: "s1" });
        const killed = await admin.call("CLIENT", "KILL", "TYPE", "normal");
        assert.ok(Number(killed) >= 1, "the store's connection was dropped");
        const back = await pollFor(async () => (await store.healthy()) || undefined, "the store to reconnect", 10_000, 50);
        assert.equal(back, true);
        assert.equal((await store.tasks.get("01R"))?.taskId, "01R");
        assert.equal((await store.servers.list()).length, 1);
      } finally {
        await store.close();
      }
    });

    test("two stores on one Redis (two replicas): concurrent transitions of the same tasks, exactly one wins each", async () => {
      const prefix = `race${++prefixCounter}:`;
      const a = await open(server, prefix);
      const b = await open(server, prefix);
      try {
        const ids = Array.from({ length: 30 }, (_, i) => `01RACE${String(i).padStart(3, "0")}`);
        for (const id of ids) await a.tasks.create(task(id));
        const results = await Promise.all(
          ids.flatMap((id) => [
            a.tasks.transition(id, { from: ["working"], to: "completed", patch: { statusMessage: "a" } }),
            b.tasks.transition(id, { from: ["working"], to: "cancelled", patch: { statusMessage: "b" } }),
          ]),
        );
        for (let i = 0; i < ids.length; i++) {
          const won = [results[2 * i], results[2 * i + 1]].filter((r) => r !== undefined);
          assert.equal(won.length, 1, `exactly one transition of ${ids[i]} won`);
          assert.deepEqual(await b.tasks.get(ids[i]!), won[0], "the stored record is the winner's");
        }
        assert.deepEqual(await a.tasks.listWorking(), []);
      } finally {
        await a.close();
        await b.close();
      }
    });
  });

  describe("redis: unavailable", () => {
    test("while Redis is down every kind fails fast with EMCP_STORE_UNAVAILABLE saying what to check; it works again once Redis is back", async () => {
      const own = await startRedis();
      const store = await open(own);
      try {
        await store.tasks.create(task("01D"));
        await own.kill();
        const err = await rejectsWith(store.tasks.get("01D"), "EMCP_STORE_UNAVAILABLE");
        assert.match(err.message, new RegExp(`redis://127\\.0\\.0\\.1:${own.port}`));
        assert.match(err.message, /check that Redis is running and reachable/);
        assert.ok(err.cause !== undefined, "the ioredis error is the cause");
        await rejectsWith(
          store.events.append("s1", { id: "01E", type: "t", server: "s", createdAt: 1, data: {} }, { maxPerSession: 10, maxTotal: 10 }),
          "EMCP_STORE_UNAVAILABLE",
        );
        await rejectsWith(store.sessions.touch("s1"), "EMCP_STORE_UNAVAILABLE");
        await rejectsWith(store.pending.get("R1"), "EMCP_STORE_UNAVAILABLE");
        await rejectsWith(store.replay.streamOf("s1", "1"), "EMCP_STORE_UNAVAILABLE");
        await rejectsWith(store.servers.get("x"), "EMCP_STORE_UNAVAILABLE");
        assert.equal(await store.healthy(), false);
        await own.restart();
        await pollFor(async () => (await store.healthy()) || undefined, "the store to reconnect", 15_000, 50);
        // No persistence in the test server: the restarted Redis is empty, and the store works on it.
        assert.equal(await store.tasks.get("01D"), undefined);
        await store.tasks.create(task("01D"));
        assert.equal((await store.tasks.get("01D"))?.status, "working");
      } finally {
        await store.close();
        await own.stop();
      }
    });

    test("an unreachable server fails the open with EMCP_STORE_UNAVAILABLE naming it, password redacted", async () => {
      const port = await freePort();
      const err = await rejectsWith(
        openStore({ kind: "redis", url: `redis://app:s3cret@127.0.0.1:${port}/0` }, { clock: new ManualClock(), connectTimeoutMs: 500 }),
        "EMCP_STORE_UNAVAILABLE",
      );
      assert.match(err.message, new RegExp(`redis://app:\\*\\*\\*@127\\.0\\.0\\.1:${port}/0 could not be reached`));
      assert.doesNotMatch(err.message, /s3cret/);
    });

    test("a bad URL is a config error saying what a good one looks like", async () => {
      for (const url of ["http://localhost:6379", "redis://", "localhost:6379"]) {
        const err = await rejectsWith(openStore({ kind: "redis", url }, { clock: new ManualClock() }), "EMCP_CONFIG_INVALID");
        assert.match(err.message, /redis:\/\/ or rediss:\/\/ URL with a host/);
        assert.ok(err instanceof GatewayError);
      }
      const parsed = gatewaySettingsSchema.safeParse({ store: { kind: "redis" } });
      assert.equal(parsed.success, false);
      assert.match(JSON.stringify(parsed.error?.issues), /url is required with kind \\"redis\\"/);
      assert.equal(gatewaySettingsSchema.safeParse({ store: { kind: "redis", url: "ftp://x" } }).success, false);
      assert.equal(gatewaySettingsSchema.safeParse({ store: { kind: "sqlite", url: "redis://x" } }).success, false);
      assert.equal(gatewaySettingsSchema.parse({ store: { kind: "redis", url: "redis://x:1" } }).store.keyPrefix, "emceepee:");
    });
  });
}
