/**
 * The console's OpenID Connect login across replicas (issue 22): a
 * redis-server of the test's own, oidc-provider on loopback, two `emceepee
 * serve` replicas (gateway.cluster, Redis store, OAuth on /mcp, console.oidc)
 * and two people, alice and bob, each with an MCP session on replica A whose
 * elicitation waits there. A login started on A comes back to B (the started
 * login is in the store) and is used once; on B each person sees and answers
 * their own session's request held on A, never the other's (the cluster's
 * console answers are scoped by the asking person's principal); the answer is
 * recorded with the principal on both replicas.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { principalHash } from "../../src/auth/principal.js";
import { sessionHash } from "../../src/logging.js";
import { promote } from "../helpers/async-extra.js";
import { freePort, logLines, pollFor, startCliServe, startEverythingHttp, stopChild, type RunningCli } from "../helpers/core-extra.js";
import { ROOT, call, everythingStdio } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleCallbackLink, consoleLogin, loginHeadless, startConsoleLogin, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { newMarker, processesWith, waitForNoProcesses } from "../helpers/processes.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const SECRET = "console-oidc-replicas-secret-0123456789";
const CONSOLE_SECRET = "console-client-secret-0123456789";
const SCOPE = "mcp:tools";
const MCP_REDIRECT = "http://127.0.0.1:65502/callback";
const MARKER = newMarker();

interface Replica {
  base: string;
  served: RunningCli;
}

/** The requests a console inbox page shows: request id → session ref. */
function inboxItems(page: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of page.matchAll(/<article class="request[^"]*" id="[^"]*" data-key="([^"]+)"[\s\S]*?name="session" value="([^"]+)"/g)) out.set(m[1]!, m[2]!);
  return out;
}

describe("console login and inbox across replicas, per person", { skip: redisSkipReason(), timeout: 600_000 }, () => {
  let tmp: string;
  let redis: RedisServer;
  let idp: TestOidcProvider;
  let a: Replica;
  let b: Replica;
  const clients: Client[] = [];
  const refs: Record<string, string> = {};
  const cookies: Record<string, string> = {};

  async function startReplica(id: string, port: number): Promise<Replica> {
    const config = path.join(tmp, `${id}.json`);
    const base = `http://127.0.0.1:${port}`;
    await writeFile(
      config,
      JSON.stringify({
        mcpServers: { everything: { ...everythingStdio(), args: [...everythingStdio().args, MARKER] } },
        gateway: {
          logLevel: "info",
          // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per gateway (issue 21).
          upstream: { warmPool: 0 },
          store: { kind: "redis", url: redis.url },
          cluster: { enabled: true, replicaId: id, advertiseUrl: base, secret: "${EMCEEPEE_CLUSTER_SECRET}" },
          auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
          console: { oidc: { clientId: "console", clientSecret: CONSOLE_SECRET, scopes: ["openid"] } },
        },
      }),
    );
    const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check"], 60_000, {
      EMCEEPEE_CLUSTER_SECRET: SECRET,
    });
    return { base, served };
  }

  /** The provider's answer for `user` to a login started at `start`, as the URL it sends the browser back to (on `back`'s host), and the binding cookie (a browser sends it to any port of 127.0.0.1). */
  async function callbackFor(start: Replica, back: Replica, user: string): Promise<{ link: string; cookie: string }> {
    const { authorize, state, cookie } = await startConsoleLogin(start.base);
    const code = await loginHeadless(authorize, user, `${start.base}/console/callback`);
    return { link: consoleCallbackLink(back.base, code, state, idp.issuer), cookie };
  }

  /** Logs `user` in: started on `start`, finished on `back`; their console cookie. */
  const logIn = (start: Replica, back: Replica, user: string): Promise<string> => consoleLogin(start.base, user, idp.issuer, back.base);

  async function inboxOn(replica: Replica, cookie: string): Promise<Map<string, string>> {
    const res = await fetch(`${replica.base}/console/inbox`, { headers: { cookie, accept: "text/html" } });
    assert.equal(res.status, 200);
    return inboxItems(await res.text());
  }

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-console-oidc-replicas-"));
    redis = await startRedis();
    const [portA, portB] = [await freePort(), await freePort()];
    idp = await startOidcProvider({
      scopes: [SCOPE],
      clients: [
        {
          client_id: "mcp-client",
          redirect_uris: [MCP_REDIRECT],
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
        {
          client_id: "console",
          client_secret: CONSOLE_SECRET,
          redirect_uris: [portA, portB].map((p) => `http://127.0.0.1:${p}/console/callback`),
          token_endpoint_auth_method: "client_secret_post",
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
      ],
    });
    [a, b] = await Promise.all([startReplica("ra", portA), startReplica("rb", portB)]);
    for (const user of ["alice", "bob"]) {
      const { client, sessionId } = await loginAndConnect(`${a.base}/mcp`, user, new MemoryOAuthClient(MCP_REDIRECT));
      clients.push(client);
      refs[user] = sessionHash(sessionId);
      await promote(client, "everything", "trigger-elicitation-request", {}, 1_000);
    }
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await Promise.allSettled([a, b].filter(Boolean).map((r) => stopChild(r.served.child)));
    await redis?.stop();
    await idp?.close();
    for (const pid of processesWith(MARKER)) process.kill(pid, "SIGKILL");
    assert.deepEqual(await waitForNoProcesses(MARKER), [], "no upstream process left behind");
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  test("a login started on replica A completes on replica B; the same callback again (on either) is refused", async () => {
    const { link, cookie } = await callbackFor(a, b, "alice");
    const done = await fetch(link, { redirect: "manual", headers: { cookie } });
    assert.equal(done.status, 200, await done.clone().text());
    assert.ok(done.headers.getSetCookie().some((c) => c.startsWith("emceepee_console=") && !c.startsWith("emceepee_console=;")));
    for (const replica of [b, a]) {
      const again = await fetch(link.replace(b.base, replica.base), { redirect: "manual", headers: { cookie } });
      assert.equal(again.status, 400);
      assert.equal(
        again.headers.getSetCookie().find((c) => c.startsWith("emceepee_console=")),
        undefined,
      );
      assert.match(await again.text(), /unknown or expired/);
    }
  });

  test("on replica B each person sees their own session's request held on A, never the other's", async () => {
    cookies.alice = await logIn(a, b, "alice");
    cookies.bob = await logIn(b, b, "bob");
    for (const [user, other] of [
      ["alice", "bob"],
      ["bob", "alice"],
    ] as const) {
      const items = await pollFor(
        async () => {
          const seen = await inboxOn(b, cookies[user]!);
          return seen.size > 0 ? seen : undefined;
        },
        `${user}'s request from A in B's inbox`,
        60_000,
        250,
      );
      assert.deepEqual([...items.values()], [refs[user]], `${user} sees only their own`);
      assert.ok(![...items.values()].includes(refs[other]!));
    }
  });

  test("on B a person answers their own request held on A (recorded with their principal on both), and cannot answer the other's", async () => {
    const bobs = [...(await inboxOn(b, cookies.bob!))][0]!;
    const alices = [...(await inboxOn(b, cookies.alice!))][0]!;
    const post = (cookie: string, [requestId, session]: [string, string]) =>
      fetch(`${b.base}/console/inbox/${encodeURIComponent(requestId)}`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie, Origin: b.base, "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ session, kind: "elicitation", action: "decline" }),
      });

    const stolen = await post(cookies.alice!, bobs);
    assert.equal(stolen.status, 303);
    assert.match(stolen.headers.get("location") ?? "", /gone=.*&by=session/, "for alice, bob's request is in no session of hers");
    assert.deepEqual([...(await inboxOn(b, cookies.bob!)).keys()], [bobs[0]], "bob's request is still pending");

    const mine = await post(cookies.alice!, alices);
    assert.equal(mine.status, 303);
    assert.match(mine.headers.get("location") ?? "", /answered=/);
    assert.equal((await inboxOn(b, cookies.alice!)).size, 0);
    const alice = principalHash(idp.issuer, "alice");
    const onA = await pollFor(
      async () => logLines(a.served.stderr(), "console_action").find((l) => l.requestId === alices[0]),
      "A's console_action line",
      30_000,
    );
    assert.equal(onA.principalHash, alice);
    assert.equal(onA.outcome, "answered");
    assert.equal(typeof onA.via, "string", "names the replica the person used");
    const onB = logLines(b.served.stderr(), "console_action").filter((l) => l.requestId === alices[0] || l.requestId === bobs[0]);
    assert.deepEqual(
      onB.map((l) => [l.requestId, l.principalHash, l.outcome, typeof l.replica]),
      [
        [bobs[0], alice, "not_here", "undefined"],
        [alices[0], alice, "answered", "string"],
      ],
    );
  });

  test("on B the merged overview shows bob's runtime server (added on A) to bob, never to alice, and no gateway-wide child process count", async (t) => {
    const remote = await startEverythingHttp();
    t.after(() => remote.close());
    const added = await call(clients[1]!, "add_server", { name: "bobs-runtime-up", url: remote.url });
    assert.notEqual(added.isError, true, JSON.stringify(added));
    t.after(() => call(clients[1]!, "remove_server", { name: "bobs-runtime-up" }).catch(() => undefined));
    const overviewOn = async (replica: Replica, cookie: string): Promise<string> => {
      const res = await fetch(`${replica.base}/console`, { headers: { cookie, accept: "text/html" } });
      assert.equal(res.status, 200);
      return res.text();
    };
    await pollFor(
      async () => ((await overviewOn(b, cookies.bob!)).includes("bobs-runtime-up") ? true : undefined),
      "bob's runtime server in bob's overview on B",
      60_000,
      250,
    );
    const alices = await overviewOn(b, cookies.alice!);
    assert.match(alices, /everything/, "config-file servers are everyone's");
    assert.doesNotMatch(alices, /bobs-runtime-up/, "alice must not see bob's runtime server, from either replica");
    assert.doesNotMatch(alices, /child process/);
  });
});
