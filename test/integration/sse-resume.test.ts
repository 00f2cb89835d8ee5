/**
 * SSE resumption (Last-Event-ID) from the durable store, with real processes
 * (docs/adr/0007, "SSE replay from the store"; docs/adr/0013): an SDK client
 * on the transparent face of a stdio server-everything loses its standalone
 * GET stream (after a log message) and a tool call's POST stream (after the
 * first progress notification) and stays away; meanwhile another log message
 * and the rest of the call (progress, result) are stored. Then the process
 * holding the session dies — `emceepee serve` on SQLite restarted after
 * SIGTERM or SIGKILL, or, with two replicas on one redis-server behind a
 * round-robin balancer, the owner SIGKILLed — and the client comes back with
 * its Last-Event-IDs: each resumed stream starts with exactly the messages
 * stored after its cursor (the call's result included), no event id arrives
 * twice, and the resumed GET stream carries new messages. A POST stream cut
 * right after its priming event (an id with no row of its own) also gets its
 * call's result after a SIGKILL. A Last-Event-ID the store does not have gets
 * a 400 that says why.
 *
 * The test reads the store itself (the SQLite file, Redis keys) only to know
 * that what it expects was stored before the kill, and what it was.
 *
 * The gateways run without the warm pool (`upstream.warmPool: 0`): a spare
 * server-everything per process that no case here uses (the pool's own tests:
 * warm-pool.test.ts). The priming-event case shares the SIGKILL restart of the
 * first case, on a session of its own.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { openSqliteDatabase } from "../../src/store/sqlite/driver.js";
import { sessionHash } from "../../src/logging.js";
import { ROOT, everythingStdio } from "../helpers/gateway.js";
import {
  MCP_POST_HEADERS,
  freePort,
  initializeBody,
  logLines,
  pollFor,
  rawRequest,
  startCliServe,
  stopChild,
  waitExit,
  type RunningCli,
} from "../helpers/core-extra.js";
import { connectFace, DroppingFetch, type Peer, type SseStreamLog, type WireMessage } from "../helpers/transparent.js";
import { Balancer } from "../helpers/balancer.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";
import { readUntil } from "../helpers/sse-read.js";

const SLOW = { timeout: 300_000 };
const GET_STREAM = "_GET_stream";
/** The client retries a resume until the gateway is back (the test holds resumes until then anyway). */
const RECONNECT = { initialReconnectionDelay: 100, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1.5, maxRetries: 60 };

interface StoredEvent {
  seq: number;
  streamId: string;
  message: WireMessage;
}

let tmp: string;
const running = new Set<RunningCli>();
const peers: Peer[] = [];

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-sse-resume-"));
});

after(async () => {
  await Promise.allSettled(peers.map((p) => p.close()));
  await Promise.allSettled([...running].map((r) => stopChild(r.child)));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function logOf(served: RunningCli, msg: string): Array<Record<string, any>> {
  return logLines(served.stderr(), msg);
}

async function serve(args: string[], env?: NodeJS.ProcessEnv): Promise<RunningCli> {
  const served = await startCliServe(ROOT, [...args, "--no-upstream-check", "--log-level", "info"], 60_000, env);
  running.add(served);
  return served;
}

/** The session's stored SSE messages, in the SQLite file (read through a connection of the test's own). */
function sqliteEvents(file: string) {
  return async (sessionId: string): Promise<StoredEvent[]> => {
    const db = openSqliteDatabase(file, { fileMustExist: true });
    try {
      const rows = db.prepare("SELECT seq, stream_id, message FROM replay WHERE session_id = ? ORDER BY seq").all(sessionId) as Array<{
        seq: number;
        stream_id: string;
        message: string;
      }>;
      return rows.map((r) => ({ seq: r.seq, streamId: r.stream_id, message: JSON.parse(r.message) as WireMessage }));
    } finally {
      db.close();
    }
  };
}

/** The same from Redis (`P rv:<session>` seq → message, `P rs:<session>` seq → stream; src/store/redis/scripts.ts). */
function redisEvents(redis: RedisServer) {
  const client = redis.client();
  return async (sessionId: string): Promise<StoredEvent[]> => {
    const [messages, streams] = await Promise.all([client.hgetall(`emceepee:rv:${sessionId}`), client.hgetall(`emceepee:rs:${sessionId}`)]);
    return Object.entries(messages)
      .map(([seq, json]) => ({ seq: Number(seq), streamId: streams[seq]!, message: JSON.parse(json) as WireMessage }))
      .sort((a, b) => a.seq - b.seq);
  };
}

/** A gateway config with a stdio server-everything as "local", without the warm pool's spare process. */
function localConfig(gateway: Record<string, unknown> = {}): string {
  return JSON.stringify({ mcpServers: { local: everythingStdio() }, gateway: { ...gateway, upstream: { warmPool: 0 } } });
}

const DOC = "demo://resource/static/document/architecture.md";
const OTHER = "demo://resource/static/document/features.md";
const THIRD = "demo://resource/static/document/extension.md";

/**
 * The scenario (see the header). `crash` ends the process that holds the
 * session and, if it restarts it, resolves once it listens; the client's
 * resumes wait until then.
 */
async function missedMessagesArriveOnce(url: string, stored: (sessionId: string) => Promise<StoredEvent[]>, crash: (sessionId: string) => Promise<void>) {
  const net = new DroppingFetch();
  const peer = await connectFace(url, { capabilities: {}, http: { fetch: net.fetch, reconnectionOptions: RECONNECT } });
  peers.push(peer);
  await pollFor(async () => net.streams.find((s) => s.kind === "get"), "the client's standalone GET stream");
  await peer.client.setLoggingLevel("info");
  net.holdResumes();

  // The GET stream drops right after the log message of the first subscription.
  net.dropAfter((m, kind) => kind === "get" && JSON.stringify(m).includes(DOC));
  await peer.client.subscribeResource({ uri: DOC });
  await peer.waitForLog(DOC);
  const droppedGet = net.streams.find((s) => s.kind === "get" && s.dropped)!;
  const getCursor = droppedGet.events.at(-1)!.id!;

  // A call's POST stream drops right after its first progress notification; the call goes on.
  const token = `resume-${randomUUID()}`;
  net.dropAfter((m, kind) => kind === "post" && m.method === "notifications/progress" && m.params?.progressToken === token);
  const called = peer.callTool("trigger-long-running-operation", { duration: 2, steps: 4 }, token);
  await peer.waitFor(() => (peer.progress(token).length > 0 ? true : undefined), "the first progress notification");
  const droppedPost = net.streams.find((s) => s.kind === "post" && s.dropped)!;
  const postCursor = droppedPost.events.at(-1)!.id!;

  // While the client is away: a log message on the GET stream, the rest of the call on its stream.
  await peer.client.subscribeResource({ uri: OTHER });
  assert.ok(!peer.logTexts().some((t) => t.includes(OTHER)), "the GET stream is down: the client has not seen it");
  const rows = await pollFor(
    async () => {
      const all = await stored(peer.sessionId);
      const postStream = all.find((r) => r.seq === Number(postCursor))?.streamId;
      const result = all.some((r) => r.streamId === postStream && r.message.result !== undefined);
      const log = all.some((r) => r.streamId === GET_STREAM && r.seq > Number(getCursor) && JSON.stringify(r.message).includes(OTHER));
      return result && log ? all : undefined;
    },
    "the call's result and the second log message in the store",
    30_000,
    100,
  );
  const after = (cursor: string) => {
    const stream = rows.find((r) => r.seq === Number(cursor))?.streamId;
    return rows.filter((r) => r.streamId === stream && r.seq > Number(cursor) && Object.keys(r.message).length > 0);
  };
  const missedGet = after(getCursor);
  const missedPost = after(postCursor);
  assert.ok(missedPost.at(-1)?.message.result !== undefined, "the result is the last message of the call's stream");

  await crash(peer.sessionId);
  net.releaseResumes();

  const result = await called;
  assert.match(JSON.stringify(result.content), /Long running operation completed\. Duration: 2 seconds, Steps: 4\./);
  await peer.waitForLog(OTHER);
  assert.deepEqual(
    peer.progress(token).map((p) => p.progress),
    [1, 2, 3, 4],
    "every progress notification exactly once",
  );

  // Each resumed stream starts with exactly what was stored after its cursor.
  const resumedFrom = (cursor: string): SseStreamLog => {
    const found = net.streams.find((s) => s.kind === "resume" && s.lastEventId === cursor && s.events.length > 0);
    assert.ok(found, `a resumed stream from ${cursor}: ${JSON.stringify(net.streams.map((s) => [s.kind, s.lastEventId, s.events.length]))}`);
    return found;
  };
  for (const [cursor, missed] of [
    [getCursor, missedGet],
    [postCursor, missedPost],
  ] as const) {
    const replayed = resumedFrom(cursor).events.slice(0, missed.length);
    assert.deepEqual(
      replayed.map((e) => ({ id: e.id, message: e.message })),
      missed.map((r) => ({ id: String(r.seq), message: r.message })),
      `the messages stored after ${cursor}, in order`,
    );
  }
  const ids = net.streams.flatMap((s) => s.events.flatMap((e) => (e.id ? [e.id] : [])));
  assert.equal(new Set(ids).size, ids.length, `no event arrived twice: ${ids.join(",")}`);

  // The resumed GET stream is the session's stream now: a new message reaches the client on it.
  await peer.client.subscribeResource({ uri: THIRD });
  await peer.waitForLog(THIRD);
  assert.equal(net.streamOf((m) => JSON.stringify(m).includes(`request for URI: ${THIRD}`))?.kind, "resume");
  return peer;
}

/** A GET with a Last-Event-ID the store does not have: 400, saying why. */
async function unknownCursorIs400(url: string, sessionId: string): Promise<void> {
  const res = await rawRequest(url, {
    method: "GET",
    headers: { accept: "text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25", "last-event-id": "987654321" },
  });
  assert.equal(res.status, 400, res.body);
  assert.match(res.body, /Last-Event-ID is not an event of this session's streams: it was evicted .*Open a new GET stream without Last-Event-ID/);
}

interface PrimingCut {
  headers: Record<string, string>;
  primingId: string;
}

/**
 * A raw session whose tools/call POST stream is cut right after its priming event (an id with no row of its own);
 * resolves once the call's result is in the store, so a kill after this leaves it there to be resumed.
 */
async function cutAfterPriming(url: string, db: string): Promise<PrimingCut> {
  const init = await rawRequest(url, { headers: { ...MCP_POST_HEADERS }, body: initializeBody() });
  assert.equal(init.status, 200, init.body);
  const session = String(init.headers["mcp-session-id"]);
  const headers = { ...MCP_POST_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" };
  const rpc = (body: object) => rawRequest(url, { headers, body: JSON.stringify({ jsonrpc: "2.0", ...body }) });
  assert.equal((await rpc({ method: "notifications/initialized" })).status, 202);
  // No priming event is stored: a session created in this process is numbered from 0, a resumed one learns its
  // numbering from its first priming event's row. One request first, so the cut stream is not the session's first.
  assert.equal((await rpc({ id: 2, method: "tools/list" })).status, 200);
  const abort = new AbortController();
  const cut = await fetch(url, {
    method: "POST",
    headers,
    signal: abort.signal,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 9,
      method: "tools/call",
      params: { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 1 } },
    }),
  });
  const primed = await readUntil(cut, /^id: ?\S+$/m, "the priming event");
  abort.abort();
  const primingId = /^id: ?(\S+)$/m.exec(primed)![1]!;
  assert.match(primingId, /^p\d+\.[\w-]+$/, "a priming id");
  assert.ok(!(await sqliteEvents(db)(session)).some((r) => r.streamId === primingId.split(".")[1]), "nothing of that stream is stored yet");
  await pollFor(
    async () => ((await sqliteEvents(db)(session)).some((r) => r.message.id === 9 && r.message.result) ? true : undefined),
    "the call's result in the store",
  );
  return { headers, primingId };
}

/** After the restart: a GET with the priming id as Last-Event-ID gets the cut call's result. */
async function primingCursorGetsResult(url: string, { headers, primingId }: PrimingCut): Promise<void> {
  const resumed = await fetch(url, { method: "GET", headers: { ...headers, accept: "text/event-stream", "last-event-id": primingId } });
  assert.equal(resumed.status, 200);
  const text = await readUntil(resumed, /"id":9/, "the call's result");
  assert.match(text, /Long running operation completed\. Duration: 1 seconds, Steps: 1\./);
}

/**
 * The cases at once (issue 21: the file's wall time was their sum): the two restarts and the replicas each have their
 * own gateway processes, ports and store (a SQLite file each, their own redis-server).
 */
describe("SSE resumption across the death of the process holding the session", { concurrency: true }, () => {
  describe("SSE streams resume from the store after `emceepee serve` restarts (SQLite)", () => {
    for (const signal of ["SIGKILL", "SIGTERM"] as const) {
      // The SIGKILL restart also serves the priming-event case, on a session of its own.
      const priming = signal === "SIGKILL";
      const name = `${signal}: the GET stream and a cut POST stream get what they missed, none twice${
        priming ? "; a POST stream cut right after its priming event (an id with no row) gets its call's result" : ""
      }`;
      test(name, SLOW, async () => {
        const port = await freePort();
        const config = path.join(tmp, `${signal}.json`);
        const db = path.join(tmp, `${signal}.db`);
        await writeFile(config, localConfig());
        const args = ["--config", config, "--port", String(port), "--store", `sqlite:${db}`];
        let served = await serve(args);
        const url = `http://127.0.0.1:${port}/servers/local/mcp`;
        let cut: PrimingCut | undefined;
        const peer = await missedMessagesArriveOnce(url, sqliteEvents(db), async () => {
          if (priming) cut = await cutAfterPriming(url, db);
          served.child.kill(signal);
          const { code } = await waitExit(served.child, 60_000);
          if (signal === "SIGTERM") assert.equal(code, 0, served.stderr().slice(-2000));
          running.delete(served);
          served = await serve(args);
        });
        assert.equal(logOf(served, "session_resumed").length, 1, "the session was resumed once, by the held resumes");
        await unknownCursorIs400(url, peer.sessionId);
        if (cut) await primingCursorGetsResult(url, cut);

        // A session that ends takes its stored replay with it.
        const sessionId = peer.sessionId;
        assert.ok((await sqliteEvents(db)(sessionId)).length > 0);
        await peer.close();
        await pollFor(async () => ((await sqliteEvents(db)(sessionId)).length === 0 ? true : undefined), "the ended session's replay to be deleted");
      });
    }
  });

  const skip = redisSkipReason();
  describe("SSE streams of a dead replica resume on the replica that adopts the session (Redis)", () => {
    if (skip !== undefined) {
      test("replicas on redis", { skip }, () => undefined);
      return;
    }
    let redis: RedisServer;
    let balancer: Balancer;
    const replicas: Array<{ id: string; port: number; served: RunningCli }> = [];

    before(async () => {
      redis = await startRedis();
      for (const id of ["a", "b"]) {
        const port = await freePort();
        const config = path.join(tmp, `replica-${id}.json`);
        await writeFile(
          config,
          // leaseMs: long enough that a live replica's heartbeat is not missed on a loaded machine.
          localConfig({
            store: { kind: "redis", url: redis.url },
            cluster: { enabled: true, replicaId: id, advertiseUrl: `http://127.0.0.1:${port}`, secret: "${EMCEEPEE_CLUSTER_SECRET}", leaseMs: 5_000 },
          }),
        );
        const served = await serve(["--config", config, "--port", String(port)], { EMCEEPEE_CLUSTER_SECRET: "sse-resume-test-secret-0123456789" });
        replicas.push({ id, port, served });
      }
      balancer = new Balancer(() => replicas.filter((r) => r.served.child.exitCode === null && r.served.child.signalCode === null));
      await balancer.start();
    });

    after(async () => {
      await balancer?.close();
      await Promise.allSettled(replicas.map((r) => stopChild(r.served.child)));
      await redis?.stop();
    });

    test("SIGKILL of the owner: the GET stream and a cut POST stream get what they missed through the adopter, none twice", SLOW, async () => {
      const url = `http://127.0.0.1:${balancer.port}/servers/local/mcp`;
      let owner: (typeof replicas)[number] | undefined;
      const peer = await missedMessagesArriveOnce(url, redisEvents(redis), async (sessionId) => {
        owner = replicas.find((r) => logOf(r.served, "session_created").some((l) => l.sessionHash === sessionHash(sessionId)));
        assert.ok(owner, "a replica created the session");
        owner.served.child.kill("SIGKILL");
        await waitExit(owner.served.child, 60_000);
      });
      const adopter = replicas.find((r) => r !== owner)!;
      assert.ok(
        logOf(adopter.served, "cluster_session_adopted").length > 0,
        "the surviving replica adopted the session and replayed the dead owner's streams from Redis",
      );
      await unknownCursorIs400(url, peer.sessionId);
    });
  });
});
