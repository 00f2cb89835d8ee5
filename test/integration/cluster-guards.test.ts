/**
 * Guards of a replica cluster (docs/adr/0013, "Guards"), with a real
 * redis-server: a replica whose `cluster.secret` differs from the live
 * replicas', or that advertises a live replica's URL, exits 2 at start naming
 * the setting (real `emceepee serve` processes: the exit is the CLI's); once no
 * replica is live the secret can change. Session ids a replica did not make,
 * or that name no session, leave no key in Redis (each gets 404). The live
 * replicas and the one with the new secret are gateways in this process (the
 * same membership code, src/cluster/membership.ts, runs at their start).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { ROOT, startGateway, type TestGateway } from "../helpers/gateway.js";
import { MCP_POST_HEADERS, freePort, rawRequest, runCli } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const SECRET = "cluster-guards-secret-0123456789";
const OTHER_SECRET = "another-cluster-secret-98765432";
const LEASE_MS = 2_000;
const skip = redisSkipReason();

if (skip !== undefined) {
  test("cluster guards on redis", { skip }, () => undefined);
} else {
  let tmp: string;
  let redis: RedisServer;
  const running: TestGateway[] = [];
  let configs = 0;

  /** A replica's cluster settings. */
  const cluster = (advertiseUrl: string, secret: string) => ({ enabled: true, advertiseUrl, secret, leaseMs: LEASE_MS });

  /** A replica's config file (its secret comes from EMCEEPEE_CLUSTER_SECRET). */
  async function config(advertiseUrl: string): Promise<string> {
    const file = path.join(tmp, `replica-${++configs}.json`);
    await writeFile(
      file,
      JSON.stringify({ mcpServers: {}, gateway: { store: { kind: "redis", url: redis.url }, cluster: cluster(advertiseUrl, "${EMCEEPEE_CLUSTER_SECRET}") } }),
    );
    return file;
  }

  /** A live replica, in this process (a replicaId of its own: the default is the host and the process id). */
  async function serve(port: number, secret: string): Promise<TestGateway> {
    const gw = await startGateway({
      mcpServers: {},
      gateway: { port, store: { kind: "redis", url: redis.url }, cluster: { ...cluster(`http://127.0.0.1:${port}`, secret), replicaId: `live-${port}` } },
    });
    running.push(gw);
    return gw;
  }

  /** A replica's /readyz status (200: started, its store answers). */
  const ready = async (gw: TestGateway): Promise<number> => (await fetch(new URL("/readyz", gw.url))).status;

  /** A replica that must be refused at start: its exit and output. */
  async function refused(port: number, secret: string, advertiseUrl: string) {
    const file = await config(advertiseUrl);
    return runCli(ROOT, ["serve", "--config", file, "--port", String(port), "--no-upstream-check", "--log-level", "info"], {
      timeoutMs: 60_000,
      stopWhenStdout: /listening on/,
      env: { EMCEEPEE_CLUSTER_SECRET: secret },
    });
  }

  async function keys(pattern: string): Promise<number> {
    const c = redis.client();
    let cursor = "0";
    let n = 0;
    do {
      const [next, batch] = await c.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      n += batch.length;
    } while (cursor !== "0");
    return n;
  }

  let port: number;
  let first: TestGateway;
  let second: TestGateway;

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-cluster-guards-"));
    redis = await startRedis();
    port = await freePort();
    first = await serve(port, SECRET);
    second = await serve(await freePort(), SECRET);
  });

  after(async () => {
    await Promise.allSettled(running.map((r) => r.close()));
    await redis?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  describe("cluster guards", { timeout: 300_000 }, () => {
    test("a replica with another secret, or advertising a live replica's URL, exits 2 at start naming the setting", async () => {
      const wrongSecret = await refused(await freePort(), OTHER_SECRET, `http://127.0.0.1:${await freePort()}`);
      assert.equal(wrongSecret.code, 2, `exit 2, got ${wrongSecret.code}: ${wrongSecret.stderr.slice(-2000)}`);
      assert.match(wrongSecret.stderr, /EMCP_CONFIG_INVALID: gateway\.cluster\.secret differs/);
      assert.match(wrongSecret.stderr, /same secret/);
      assert.doesNotMatch(wrongSecret.stdout, /listening on/);

      const duplicate = await refused(await freePort(), SECRET, `http://127.0.0.1:${port}`);
      assert.equal(duplicate.code, 2, `exit 2, got ${duplicate.code}: ${duplicate.stderr.slice(-2000)}`);
      assert.match(
        duplicate.stderr,
        new RegExp(`EMCP_CONFIG_INVALID: gateway\\.cluster\\.advertiseUrl http://127\\.0\\.0\\.1:${port} is already advertised by the live replica`),
      );
      assert.match(duplicate.stderr, /its own advertiseUrl/);
      assert.deepEqual(await Promise.all([ready(first), ready(second)]), [200, 200], "the live replicas (same secret, URLs of their own) go on");
    });

    test("unknown session ids (foreign format, 8 KB, or well-formed but unknown) get 404 and leave no key in Redis", async () => {
      const c = redis.client();
      const before = { size: await c.dbsize(), owners: await keys("*own:*") };
      const bogus = [
        ...Array.from({ length: 100 }, (_, i) => `${"x".repeat(8 * 1024 - 8)}${String(i).padStart(8, "0")}`),
        ...Array.from({ length: 100 }, () => randomUUID()),
        ...Array.from({ length: 20 }, (_, i) => `not-a-gateway-id-${i}`),
      ];
      const replicas = [first, second];
      let longest = 0;
      for (const [i, id] of bogus.entries()) {
        const res = await rawRequest(replicas[i % 2]!.url, {
          headers: { ...MCP_POST_HEADERS, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
        });
        assert.equal(res.status, 404, `${id.slice(0, 40)}…: ${res.status} ${res.body.slice(0, 300)}`);
        longest = Math.max(longest, res.body.length);
      }
      assert.equal(await keys("*own:*"), before.owners, "no owner record for a session that does not exist");
      assert.equal(await c.dbsize(), before.size, "no key at all");
      assert.ok(longest < 1_000, `the answers do not echo a huge id (${longest} bytes)`);
    });

    test("with no replica live, a replica with a new secret starts (how the secret is changed)", async () => {
      await first.close();
      await second.close();
      const rotated = await serve(await freePort(), OTHER_SECRET);
      assert.equal(await ready(rotated), 200);
    });
  });
}
