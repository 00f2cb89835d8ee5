/**
 * A session the client was told about survives a shutdown that comes while its
 * initialize's answer is still being written (design EV-1, "nothing told done
 * is ever lost"): the client has the 200 and its Mcp-Session-Id, the gateway
 * closes before the SSE body is finished, and the session's record stays for
 * the next start. In process, on a real SQLite file; the initialize's answer
 * is held by its replay write (the second of the stream: the first is the
 * priming event, written before the headers).
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
    const hold = holdingReplay(store, 2);
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
    // 2025-11-25: the stream is primed (the priming event is the stream's first replay write).
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
