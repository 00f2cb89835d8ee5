/**
 * A session the client was told about survives a shutdown that comes while its
 * initialize's answer is still being written (design EV-1, "nothing told done
 * is ever lost"): the client has the 200 and its Mcp-Session-Id, the gateway
 * closes before the SSE body is finished, and the session's record stays for
 * the next start. In process, on a real SQLite file; the initialize's answer
 * is held by its replay write (the stream's first: the priming event, sent
 * before the headers' end, is not stored for a session created by this
 * initialize). Also a shutdown that reaches the
 * endpoints earlier, while the initialize's record is being stored (the
 * sessions part held back by a stored-session sweep in progress): the session
 * the client is told about keeps its record, and an initialize the transport
 * refuses keeps none.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { pino } from "pino";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/contracts.js";
import { initializeBody, MCP_POST_HEADERS } from "../helpers/core-extra.js";
import { startInProcessGateway } from "../helpers/in-process.js";

/** `store` with its replay appends held from the `from`-th on, until `release()`. */
function holdingReplay(store: Store, from: number): { store: Store; held: Promise<void>; release(): void } {
  let count = 0;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let heldNow!: () => void;
  const held = new Promise<void>((resolve) => (heldNow = resolve));
  const replay = new Proxy(store.replay, {
    get(target, key) {
      const value = Reflect.get(target, key) as unknown;
      if (key !== "append" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        if (++count >= from) {
          heldNow();
          await gate;
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  const wrapped = new Proxy(store, {
    get(target, key) {
      if (key === "replay") return replay;
      const value = Reflect.get(target, key) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { store: wrapped, held, release };
}

test("a shutdown while the initialize's answer is written keeps the session's record (the client has its id)", { timeout: 120_000 }, async () => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-shutdown-init-"));
  const store = await openStore({ kind: "sqlite", path: path.join(tmp, "state.db") });
  try {
    const hold = holdingReplay(store, 1);
    // The endpoints' close ends their requests' streams at once, then waits for their replay writes: the part just
    // before it in the shutdown's order has closed (logged synchronously, the endpoints' close starts right after).
    const lines: Array<{ msg?: string; part?: string; reason?: string }> = [];
    const watch: { before?: string | undefined } = {};
    let reached!: () => void;
    const endpointsClosing = new Promise<void>((resolve) => (reached = resolve));
    const logger = pino(
      { level: "debug" },
      {
        write(line: string) {
          const entry = JSON.parse(line) as { msg?: string; part?: string };
          lines.push(entry);
          if (watch.before === undefined ? entry.msg === "registry_shutdown_start" : entry.msg === "part_closed" && entry.part === watch.before) reached();
        },
      },
    );
    const gw = await startInProcessGateway({}, { store: hold.store, logger });
    const order = gw.gateway.closeOrder;
    assert.ok(order.includes("endpoints"), order.join(", "));
    watch.before = order[order.indexOf("endpoints") - 1];
    // 2025-11-25: the stream is primed (its priming event stores nothing: the session is new), then the answer is stored.
    const answer = await fetch(gw.url, { method: "POST", headers: MCP_POST_HEADERS, body: initializeBody(1, "2025-11-25") });
    assert.equal(answer.status, 200);
    const sessionId = answer.headers.get("mcp-session-id");
    assert.ok(sessionId, "the client was told its session id");
    await hold.held; // the answer's body is being written
    const closing = gw.close();
    await endpointsClosing; // the shutdown is at the endpoints while the initialize's request is still open
    hold.release();
    await closing;
    await answer.body?.cancel().catch(() => undefined);
    const destroyed = lines.filter((l) => l.msg === "session_destroyed").map((l) => l.reason);
    assert.deepEqual(destroyed, ["gateway shutdown"], "ended by the shutdown only, not as a failed initialize");
    assert.ok(await store.sessions.get(sessionId), "the session's record is kept for the next start");
  } finally {
    await store.close();
    await rm(tmp, { recursive: true, force: true });
  }
});

/** `store` whose `sessions.put` and `sessions.listExpired` each wait at a gate while armed. */
function holdingSessions(store: Store) {
  const gate = () => {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    let reached!: () => void;
    const at = new Promise<void>((resolve) => (reached = resolve));
    return { armed: false, opened, open, at, reached };
  };
  const gates = { put: gate(), listExpired: gate() };
  const sessions = new Proxy(store.sessions, {
    get(target, key) {
      const value = Reflect.get(target, key) as unknown;
      if (typeof value !== "function") return value;
      const g = key === "put" || key === "listExpired" ? gates[key] : undefined;
      if (!g) return value.bind(target);
      return async (...args: unknown[]) => {
        if (g.armed) {
          g.reached();
          await g.opened;
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  const wrapped = new Proxy(store, {
    get(target, key) {
      if (key === "sessions") return sessions;
      const value = Reflect.get(target, key) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { store: wrapped, gates };
}

/**
 * Starts a gateway whose stored-session sweep is held in progress (so the sessions part's close waits), sends an
 * initialize whose record write is held, shuts down, lets the write go once the endpoints have closed, and returns
 * the answer and the first outcome the endpoint logged for that session.
 */
async function initializeAcrossShutdown(headers: Record<string, string>, outcome: readonly string[]) {
  const tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-shutdown-init-"));
  const store = await openStore({ kind: "sqlite", path: path.join(tmp, "state.db") });
  const { store: held, gates } = holdingSessions(store);
  const lines: Array<{ msg?: string; part?: string; reason?: string }> = [];
  const waiters: Array<() => void> = [];
  const logger = pino(
    { level: "debug" },
    {
      write(line: string) {
        lines.push(JSON.parse(line) as { msg?: string });
        for (const wake of waiters.splice(0)) wake();
      },
    },
  );
  /** The first line `match` accepts, waiting for it (bounded: a loaded machine, but never forever). */
  const logged = async (match: (l: (typeof lines)[number]) => boolean, what: string) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const found = lines.find(match);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no ${what} logged within 60 s: ${lines.map((l) => l.msg).join(", ")}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 1_000).unref();
      });
    }
  };
  const gw = await startInProcessGateway({ gateway: { sessions: { sweepIntervalMs: 50 } } }, { store: held, logger });
  const cleanup = async () => {
    gates.put.open();
    gates.listExpired.open();
    await gw.close().catch(() => undefined);
    await store.close();
    await rm(tmp, { recursive: true, force: true });
  };
  try {
    gates.listExpired.armed = true;
    await gates.listExpired.at; // a sweep is in progress: the sessions part's close waits for it
    gates.put.armed = true;
    const answering = fetch(gw.url, { method: "POST", headers, body: initializeBody(1, "2025-11-25") });
    await gates.put.at; // the initialize stores its record, before its answer
    gates.put.armed = false;
    const closing = gw.close();
    await logged((l) => l.msg === "part_closed" && l.part === "endpoints", "endpoints' close");
    gates.put.open();
    const answer = await answering;
    const sessionId = answer.headers.get("mcp-session-id");
    await answer.text().catch(() => undefined);
    const first = await logged((l) => outcome.includes(l.msg ?? ""), outcome.join(" or "));
    gates.listExpired.open();
    await closing;
    const destroyed = lines.filter((l) => l.msg === "session_destroyed").map((l) => l.reason);
    return { answer, sessionId, first, destroyed, store, cleanup };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

test("a shutdown that reaches the endpoints while the initialize stores its record keeps it (the client gets the id)", { timeout: 180_000 }, async () => {
  const run = await initializeAcrossShutdown(MCP_POST_HEADERS, ["session_kept_at_shutdown", "session_destroyed"]);
  try {
    assert.equal(run.answer.status, 200);
    assert.ok(run.sessionId, "the client was told its session id");
    assert.equal(run.first.msg, "session_kept_at_shutdown", `first outcome: ${JSON.stringify(run.first)}`);
    assert.deepEqual(run.destroyed, ["gateway shutdown"], "ended by the shutdown only, not as a client's close");
    assert.ok(await run.store.sessions.get(run.sessionId), "the session's record is kept for the next start");
  } finally {
    await run.cleanup();
  }
});

test("an initialize the transport refuses during a shutdown keeps no record", { timeout: 180_000 }, async () => {
  // Accept without text/event-stream: the SDK transport answers 406 before it takes the initialize.
  const run = await initializeAcrossShutdown({ ...MCP_POST_HEADERS, Accept: "application/json" }, ["session_destroyed"]);
  try {
    assert.equal(run.answer.status, 406);
    assert.equal(run.sessionId, null, "no session id was given");
    assert.equal(run.first.reason, "initialize failed");
    assert.deepEqual(await run.store.sessions.listExpired(Number.MAX_SAFE_INTEGER, 100), [], "no record is left");
  } finally {
    await run.cleanup();
  }
});
