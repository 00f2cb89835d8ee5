/**
 * StoredSseReplayStore (src/http/sse-replay-store.ts) on a real SQLite store: event
 * ids resolve in a second instance on the same file (a restarted process),
 * priming events are not stored yet resume their stream, an id whose stream
 * may have lost events to eviction is refused, and a failed write sends the
 * message without an id (logged once until a write succeeds).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { StoredSseReplayStore } from "../../src/http/sse-replay-store.js";
import { createLogger, silentLogger } from "../../src/logging.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/contracts.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const LIMITS = { maxEvents: 100, maxBytes: 1_000_000 };
const progress = (n: number): JSONRPCMessage => ({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "t", progress: n } });
const result: JSONRPCMessage = { jsonrpc: "2.0", id: 3, result: { content: [] } };
const PRIMING = {} as JSONRPCMessage;

let tmp: string;
before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-event-store-"));
});
after(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function sqlite(name: string): Promise<Store> {
  return openStore({ kind: "sqlite", path: path.join(tmp, `${name}.db`) }, { clock: new ManualClock() });
}

/** What a resumption sends: [id, message] pairs, and the stream it names. */
async function replay(es: StoredSseReplayStore, lastEventId: string) {
  const sent: Array<[string, JSONRPCMessage]> = [];
  const streamId = await es.replayEventsAfter(lastEventId, {
    send: async (id, m) => {
      sent.push([id, m]);
    },
  });
  return { streamId, sent };
}

describe("StoredSseReplayStore", () => {
  test("ids resolve in another instance on the same store; priming events are not stored, yet resume their stream", async () => {
    const store = await sqlite("ids");
    try {
      const first = new StoredSseReplayStore(store, "S", LIMITS, silentLogger);
      const firstPriming = await first.storeEvent("post-a", PRIMING);
      assert.match(firstPriming, /^\d+$/, "an instance's first priming event is stored, to learn the session's numbering");
      const p1 = await first.storeEvent("post-a", progress(1));
      const priming = await first.storeEvent("post-b", PRIMING);
      assert.equal(priming, `p${p1}.post-b`);
      const stored = (await store.replay.size("S")).events;
      const b1 = await first.storeEvent("post-b", progress(1));
      await first.storeEvent("post-a", progress(2));
      const b2 = await first.storeEvent("post-b", result);
      assert.equal((await store.replay.size("S")).events, stored + 3, "the second priming event wrote nothing");

      // A new process (another instance) on the same file.
      const second = new StoredSseReplayStore(store, "S", LIMITS, silentLogger);
      assert.equal(await second.getStreamIdForEventId(priming), "post-b");
      assert.deepEqual(await replay(second, priming), {
        streamId: "post-b",
        sent: [
          [b1, progress(1)],
          [b2, result],
        ],
      });
      assert.deepEqual(await replay(second, firstPriming), {
        streamId: "post-a",
        sent: [
          [p1, progress(1)],
          [String(Number(b1) + 1), progress(2)],
        ],
      });
      assert.deepEqual(await replay(second, b1), { streamId: "post-b", sent: [[b2, result]] });
      // Its own events keep the session's numbering.
      assert.equal(await second.storeEvent("_GET_stream", progress(9)), String(Number(b2) + 1));
      // Another session's priming id names nothing of this session's.
      const other = new StoredSseReplayStore(store, "T", LIMITS, silentLogger);
      assert.deepEqual(await replay(other, priming), { streamId: "post-b", sent: [] });
    } finally {
      await store.close();
    }
  });

  test("a session created now (fresh): its first priming event writes nothing, and still resumes its stream (after a restart too)", async () => {
    const store = await sqlite("fresh");
    try {
      const es = new StoredSseReplayStore(store, "F", LIMITS, silentLogger, true);
      const priming = await es.storeEvent("init", PRIMING);
      assert.equal(priming, "p0.init", "numbered after 0: nothing of a session created now is stored");
      assert.equal((await store.replay.size("F")).events, 0, "no row for it");
      const answer = await es.storeEvent("init", result);
      assert.equal(answer, "1");
      const restarted = new StoredSseReplayStore(store, "F", LIMITS, silentLogger); // a later process: not fresh
      assert.equal(await restarted.getStreamIdForEventId(priming), "init");
      assert.deepEqual(await replay(restarted, priming), { streamId: "init", sent: [["1", result]] });
    } finally {
      await store.close();
    }
  });

  test("a priming id is refused once events numbered after it were evicted", async () => {
    const store = await sqlite("evicted");
    try {
      const es = new StoredSseReplayStore(store, "S", { maxEvents: 3, maxBytes: 1_000_000 }, silentLogger);
      await es.storeEvent("a", PRIMING);
      const priming = await es.storeEvent("b", PRIMING);
      assert.match(priming, /^p\d+\.b$/);
      await es.storeEvent("b", progress(1));
      assert.equal(await es.getStreamIdForEventId(priming), "b", "nothing evicted yet");
      for (let i = 0; i < 3; i++) await es.storeEvent("c", progress(i));
      assert.equal(await es.getStreamIdForEventId(priming), undefined, "b's first message is gone: the cursor cannot be honoured");
      await assert.rejects(replay(es, priming));
    } finally {
      await store.close();
    }
  });

  test("a failed write sends the message without an id, logged once until a write succeeds; nothing is written after close", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const broken = await sqlite("broken");
    await broken.close();
    const failing = new StoredSseReplayStore(broken, "S", LIMITS, logger);
    assert.equal(await failing.storeEvent("s", progress(1)), "");
    assert.equal(await failing.storeEvent("s", progress(2)), "");
    assert.deepEqual(
      lines.map((l) => l.msg),
      ["sse_replay_store_failed"],
    );

    const store = await sqlite("closed");
    try {
      const es = new StoredSseReplayStore(store, "S", LIMITS, logger);
      assert.equal(await es.storeEvent("s", progress(1)), "1");
      await es.close();
      assert.equal(await es.storeEvent("s", progress(2)), "");
      assert.equal((await store.replay.size("S")).events, 1);
    } finally {
      await store.close();
    }
  });
});
