/**
 * WarmPool refills one process of a server at a time (ADR 0044): a burst of
 * takes starts one replacement, the next once it is running — never as many
 * starts at once as there were takes, beside the sessions' own first calls —
 * and none while sessions are still asking (QUIET_MS, at most MAX_HOLD_MS in
 * a row); a server whose spares fail is started again after a delay that
 * doubles (FAILED_START_BACKOFF), not in a loop. The pool's own logic over
 * transports whose start the test settles, on a manual clock.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ServerConfig } from "../../src/config/server-entry.js";
import { silentLogger } from "../../src/logging.js";
import { ChildProcessLimiter } from "../../src/upstream/children.js";
import { FAILED_START_BACKOFF, MAX_HOLD_MS, QUIET_MS, WarmPool } from "../../src/upstream/sharing/warm-pool.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { ManualClock } from "../fixtures/manual-clock.js";

interface Start {
  running: boolean;
  ended: boolean;
  settle(ok: boolean): void;
  /** Its process exits (the transport's onclose). */
  exit(): void;
}

function harness() {
  const starts: Start[] = [];
  const inner: TransportFactory = () => {
    let settle!: (ok: boolean) => void;
    const started = new Promise<void>((resolve, reject) => {
      settle = (ok) => {
        s.running = ok;
        if (ok) resolve();
        else reject(new Error("spawn failed"));
      };
    });
    const s: Start = {
      running: false,
      ended: false,
      settle: (ok) => settle(ok),
      exit: () => {
        s.running = false;
        (transport as { onclose?: (() => void) | undefined }).onclose?.();
      },
    };
    starts.push(s);
    const transport = {
      prestart: () => started,
      get running() {
        return s.running;
      },
      onclose: undefined,
      start: () => Promise.resolve(),
      send: () => Promise.resolve(),
      close: () => Promise.resolve(),
    };
    return {
      transport,
      terminate: () => {
        s.ended = true;
        return Promise.resolve();
      },
    };
  };
  const children = { tryAcquire: () => () => {} } as unknown as ChildProcessLimiter;
  const config = { command: "node", args: [] } as unknown as ServerConfig;
  const clock = new ManualClock();
  const pool = new WarmPool(inner, { size: 8, children, logger: silentLogger, warmable: () => config, clock });
  pool.start();
  return { pool, starts, config, clock };
}

const turn = () => new Promise((r) => setImmediate(r));
const starting = (starts: Start[]) => starts.filter((s) => !s.running && !s.ended).length;

test("after a burst of takes the pool starts one process at a time, each once the one before runs", async () => {
  const { pool, starts, config, clock } = harness();
  try {
    // Four sessions take a process (none waits yet: each gets its own start from the factory).
    for (let i = 0; i < 4; i++) pool.factory("s", config);
    assert.equal(starts.length, 4, "the sessions' own four");
    for (const s of starts.slice(0, 4)) s.settle(true);
    await turn();
    clock.advance(QUIET_MS); // the sessions stopped asking
    // Demand is four: the pool refills, one start at a time.
    for (let n = 1; n <= 4; n++) {
      await turn();
      assert.equal(starts.length, 4 + n, `start ${n} begun`);
      assert.equal(starting(starts), 1, `one start in flight, not ${starting(starts)}`);
      starts.at(-1)!.settle(true);
      await turn();
    }
    await turn();
    assert.equal(starts.length, 8, "no start beyond the demand");
    assert.equal(pool.size, 4);
  } finally {
    await pool.close();
  }
});

test("a start that fails frees its turn: the pool goes on with the next", async () => {
  const { pool, starts, config, clock } = harness();
  try {
    pool.factory("s", config);
    pool.factory("s", config);
    for (const s of starts) s.settle(true);
    await turn();
    clock.advance(QUIET_MS);
    await turn();
    assert.equal(starts.length, 3);
    assert.equal(starting(starts), 1);
    starts[2]!.settle(false); // dropped, not waiting
    await turn();
    await turn();
    assert.equal(starts.length, 3, "no new start at once after a failed one (FAILED_START_BACKOFF)");
    clock.advance(maxDelay(1));
    await turn();
    assert.equal(starts.length, 4, "a new start after the failed one, once its delay passed");
    assert.equal(starting(starts), 1);
  } finally {
    await pool.close();
  }
});

test("sessions opening hold the starts as takes do (their initialize takes no process), and change no demand", async () => {
  const { pool, starts, config, clock } = harness();
  try {
    pool.factory("s", config); // the demand: one; its refill waits QUIET_MS
    starts[0]!.settle(true);
    await turn();
    clock.advance(QUIET_MS / 2);
    pool.opening(); // a session opens meanwhile
    clock.advance(QUIET_MS / 2);
    await turn();
    assert.equal(starts.length, 1, "QUIET_MS after the take, but a session opened since: no start");
    clock.advance(QUIET_MS / 2);
    await turn();
    assert.equal(starts.length, 2, "the refill once sessions stopped opening for QUIET_MS");
    assert.equal(pool.wanted("s"), 1, "opening asked for no process");
  } finally {
    await pool.close();
  }
});

test("while sessions keep asking the pool starts nothing: the first start once they stopped for QUIET_MS", async () => {
  const { pool, starts, config, clock } = harness();
  try {
    // A burst: sessions ask one after another, QUIET_MS / 2 apart (their first calls run meanwhile).
    for (let i = 0; i < 3; i++) {
      pool.factory("s", config);
      starts.at(-1)!.settle(true);
      await turn();
      await turn();
      assert.equal(starts.length, i + 1, `after ask ${i + 1}: only the sessions' own processes, no refill`);
      clock.advance(QUIET_MS / 2);
    }
    await turn();
    assert.equal(starts.length, 3, "QUIET_MS / 2 after the last ask: still none");
    clock.advance(QUIET_MS / 2);
    await turn();
    assert.equal(starts.length, 4, "QUIET_MS after the last ask: the first refill start");
    assert.equal(starting(starts), 1);
  } finally {
    await pool.close();
  }
});

test("sessions that never stop asking hold starts for MAX_HOLD_MS at most", async () => {
  const { pool, starts, config, clock } = harness();
  try {
    const step = QUIET_MS / 4;
    let own = 0;
    for (let t = 0; t < MAX_HOLD_MS; t += step) {
      pool.factory("s", config);
      own++;
      starts.at(-1)!.settle(true);
      await turn();
      await turn();
      clock.advance(step);
    }
    await turn();
    assert.ok(starts.length > own, `a refill start after MAX_HOLD_MS of asks (${starts.length} starts, ${own} the sessions')`);
    assert.equal(starting(starts), 1, "one");
  } finally {
    await pool.close();
  }
});

/** The longest delay FAILED_START_BACKOFF gives after `n` failures in a row (its jitter drawn at the top). */
function maxDelay(n: number): number {
  const { initialDelayMs, maxDelayMs, jitter } = FAILED_START_BACKOFF;
  return Math.ceil(Math.min(maxDelayMs, initialDelayMs * 2 ** (n - 1)) * (1 + jitter));
}
function minDelay(n: number): number {
  const { initialDelayMs, maxDelayMs, jitter } = FAILED_START_BACKOFF;
  return Math.floor(Math.min(maxDelayMs, initialDelayMs * 2 ** (n - 1)) * (1 - jitter));
}

test("a server whose spares exit at start is started again later each time, not in a loop; a take starts the count over", async () => {
  const { pool, starts, config, clock } = harness();
  try {
    pool.factory("s", config); // demand: one
    starts[0]!.settle(true);
    clock.advance(QUIET_MS);
    await turn();
    await turn();
    assert.equal(starts.length, 2, "the spare");
    // Three spares in a row start and exit at once: each next start waits longer (about 1 s, 2 s, 4 s).
    for (let n = 1; n <= 3; n++) {
      starts.at(-1)!.settle(true);
      await turn();
      starts.at(-1)!.exit();
      await turn();
      await turn();
      assert.equal(starts.length, 1 + n, `failure ${n}: no start at once`);
      clock.advance(minDelay(n) - 1);
      await turn();
      assert.equal(starts.length, 1 + n, `failure ${n}: no start before its delay`);
      clock.advance(maxDelay(n) - minDelay(n) + 1);
      await turn();
      assert.equal(starts.length, 2 + n, `failure ${n}: one start after its delay`);
    }
    // This one runs and a session takes it: the next failure waits the first delay again.
    starts.at(-1)!.settle(true);
    await turn();
    pool.factory("s", config);
    assert.equal(starts.length, 5, "the session took the waiting spare");
    clock.advance(QUIET_MS);
    await turn();
    await turn();
    assert.equal(starts.length, 6, "the refill");
    starts.at(-1)!.settle(true);
    await turn();
    starts.at(-1)!.exit();
    await turn();
    clock.advance(maxDelay(1));
    await turn();
    assert.equal(starts.length, 7, "after a take the count started over: the first delay");
  } finally {
    await pool.close();
  }
});

test("at the child cap a waiting process's slot goes to its own server's connection, not to another's asking in the same tick", async () => {
  const { pool, config, clock } = harness();
  await pool.close(); // the harness's pool has no cap: this case builds its own
  let alive = 0;
  const inner: TransportFactory = () => {
    let running = false;
    const transport = {
      prestart: () => {
        running = true;
        alive++;
        return Promise.resolve();
      },
      get running() {
        return running;
      },
      onclose: undefined,
      start: () => Promise.resolve(),
      send: () => Promise.resolve(),
      close: () => Promise.resolve(),
    };
    return {
      transport,
      terminate: async () => {
        await new Promise((r) => setTimeout(r, 20));
        if (running) alive--;
        running = false;
      },
    };
  };
  const children = new ChildProcessLimiter(2);
  const capped = new WarmPool(inner, { size: 1, children, logger: silentLogger, warmable: () => config, clock });
  children.reclaim = (server) => capped.reclaim(server);
  capped.start();
  try {
    children.acquire("B"); // a session's own process: 1 of 2
    capped.factory("A", config); // a session of A asked once (its own process from the factory: no slot counted here)
    clock.advance(QUIET_MS);
    for (let i = 0; i < 4; i++) await turn();
    assert.equal(capped.size, 1, "A's spare waits: 2 of 2 slots");
    const [a, c] = await Promise.allSettled([children.reserve("A"), children.reserve("C")]);
    assert.equal(a.status, "fulfilled", "A's connection gets the slot of A's own spare");
    assert.equal(c.status, "rejected", "C asked at the cap with nothing left to reclaim");
    assert.ok(children.count <= children.limit, `never more than the cap (${children.count})`);
    assert.ok(alive <= 2);
  } finally {
    await capped.close();
  }
});
