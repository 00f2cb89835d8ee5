/**
 * Limits per principal (design LM-8, ADR 0018 "Limits per principal"), in
 * the real SessionManager and TaskManager over a memory store on a
 * ManualClock: sessions and task slots are counted per principal across its
 * sessions, refused beyond the limit with EMCP_PRINCIPAL_LIMIT, and freed when
 * a session or task ends; other principals, the static token's operator and
 * sessions without a principal are not limited; a resumed session counts but
 * is never refused. No upstream is configured: nothing connects.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR, makePrincipal } from "../../src/auth/principal.js";
import { parseConfig } from "../../src/config/load.js";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../../src/errors.js";
import { Writable } from "node:stream";
import { createLogger, silentLogger, type Logger } from "../../src/logging.js";
import { SessionManager } from "../../src/session/session-manager.js";
import type { Store } from "../../src/store/contracts.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { executeWithPromotion, UPSTREAM_MAPPING_WAIT_MS, type RunOptions } from "../../src/tasks/execute.js";
import type { UpstreamHandle } from "../../src/upstream/handle.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { flush, track } from "../helpers/promises.js";

const ISSUER = "https://idp.example";
const alice = makePrincipal({ issuer: ISSUER, subject: "alice", scopes: [], claims: {} });
const bob = makePrincipal({ issuer: ISSUER, subject: "bob", scopes: [], claims: {} });
/** Alice's subject at another issuer: another principal. */
const otherAlice = makePrincipal({ issuer: "https://other.example", subject: "alice", scopes: [], claims: {} });

function setup(limits: { sessions?: number; tasks?: number }, store?: Store, clock = new ManualClock(), logger: Logger = silentLogger) {
  const settings = parseConfig({
    gateway: { sessions: { maxPerPrincipal: limits.sessions ?? 100 }, tasks: { maxPerPrincipal: limits.tasks ?? 500 } },
  }).gateway;
  let ids = 0;
  const manager = new SessionManager({
    registry: new ServerRegistry(),
    settings,
    clock,
    newId: () => `id${++ids}`,
    logger,
    upstreams: () => {
      throw new Error("no upstream is configured: nothing may connect");
    },
    store: store ?? createMemoryStore(clock),
  });
  const refusals: string[] = [];
  manager.limits.onRefused = (kind) => refusals.push(kind);
  return { manager, refusals, clock };
}

function refusedWith(limit: "sessions" | "tasks", max: number, held: number, setting: string) {
  return (err: unknown) => {
    assert.ok(err instanceof GatewayError, String(err));
    assert.equal(err.code, ErrorCodes.PRINCIPAL_LIMIT);
    assert.deepEqual(err.details, { limit, max, held });
    assert.ok(err.message.includes(setting), err.message);
    assert.ok(err.message.includes(`${held}`) && err.message.includes(`${max}`), err.message);
    return true;
  };
}

test("a principal's sessions beyond sessions.maxPerPrincipal are refused; others are not; closing one frees a slot", async () => {
  const { manager, refusals } = setup({ sessions: 2 });
  try {
    const a1 = manager.create({ principal: alice });
    manager.create({ principal: alice });
    assert.throws(() => manager.create({ principal: alice }), refusedWith("sessions", 2, 2, "gateway.sessions.maxPerPrincipal"));
    assert.equal(manager.size, 2, "the refused session left nothing behind");
    assert.deepEqual(refusals, ["sessions"]);
    // Other principals (another subject, the same subject at another issuer) have their own count.
    manager.create({ principal: bob });
    manager.create({ principal: bob });
    manager.create({ principal: otherAlice });
    // The static token's operator and sessions of no principal are not limited per principal.
    for (let i = 0; i < 4; i++) {
      manager.create({ principal: OPERATOR });
      manager.create();
    }
    assert.equal(manager.limits.sessionsOf(alice), 2);
    await manager.destroy(a1.id);
    assert.equal(manager.limits.sessionsOf(alice), 1);
    const again = manager.create({ principal: alice });
    assert.equal(again.principal, alice, "the session records its owner");
    assert.throws(() => manager.create({ principal: alice }), refusedWith("sessions", 2, 2, "gateway.sessions.maxPerPrincipal"));
    assert.deepEqual(refusals, ["sessions", "sessions"]);
    const rpc = toJsonRpcError(new GatewayError(ErrorCodes.PRINCIPAL_LIMIT, "x"));
    assert.equal(rpc.code, -32603);
  } finally {
    await manager.close();
  }
});

test("task slots are counted across all of a principal's sessions, refused before anything starts, and freed when calls and tasks end", async () => {
  const { manager, refusals } = setup({ tasks: 3 });
  try {
    const s1 = manager.create({ principal: alice });
    const s2 = manager.create({ principal: alice });
    const b = manager.create({ principal: bob });
    const r1 = s1.tasks.reserveCall();
    const r2 = s1.tasks.reserveCall();
    // A working task counts as much as a call in flight.
    const abort = new AbortController();
    const task = await s2.tasks.create({ server: "x", toolName: "slow", toolArgs: {}, abort });
    assert.equal(manager.limits.taskLoadOf(alice), 3);
    assert.throws(() => s1.tasks.reserveCall(), refusedWith("tasks", 3, 3, "gateway.tasks.maxPerPrincipal"));
    assert.throws(() => s2.tasks.reserveCall(), refusedWith("tasks", 3, 3, "gateway.tasks.maxPerPrincipal"));
    assert.equal(s1.tasks.load, 2, "a refused reservation holds nothing");
    assert.deepEqual(refusals, ["tasks", "tasks"]);
    // Bob is not held back by Alice's work.
    const rb = b.tasks.reserveCall();
    rb();
    // A call that settles frees its slot at once...
    r1();
    const r3 = s2.tasks.reserveCall();
    assert.throws(() => s1.tasks.reserveCall(), refusedWith("tasks", 3, 3, "gateway.tasks.maxPerPrincipal"));
    // ...and so does a task that ends.
    await s2.tasks.complete(task.taskId, { content: [] });
    assert.equal(manager.limits.taskLoadOf(alice), 2);
    const r4 = s1.tasks.reserveCall();
    // A session that ends takes its slots with it.
    await manager.destroy(s1.id);
    assert.equal(manager.limits.taskLoadOf(alice), 1);
    for (const release of [r2, r3, r4]) release();
    assert.equal(manager.limits.taskLoadOf(alice), 0);
  } finally {
    await manager.close();
  }
});

test("0 turns a per-principal limit off; the per-session limit still applies", async () => {
  const { manager, refusals } = setup({ sessions: 0, tasks: 0 });
  try {
    for (let i = 0; i < 5; i++) manager.create({ principal: alice });
    const s = manager.create({ principal: alice });
    const releases = Array.from({ length: 100 }, () => s.tasks.reserveCall());
    assert.throws(
      () => s.tasks.reserveCall(),
      (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.LIMIT_REACHED,
    );
    releases.forEach((r) => r());
    assert.deepEqual(refusals, []);
  } finally {
    await manager.close();
  }
});

test("a session resumed from the store counts toward its owner's limit but is never refused", async () => {
  const clock = new ManualClock();
  const store = createMemoryStore(clock);
  const now = clock.now();
  for (const id of ["old-1", "old-2"]) {
    await store.sessions.put({
      sessionId: id,
      face: { kind: "meta" },
      protocolVersion: "2025-11-25",
      clientCapabilities: {},
      subscriptions: {},
      upstreamSessionIds: {},
      createdAt: now,
      lastActivityAt: now,
      owner: { issuer: ISSUER, subject: "alice" },
    });
  }
  const { manager } = setup({ sessions: 1 }, store, clock);
  try {
    assert.ok(await manager.resume("old-1", { kind: "meta" }));
    assert.ok(await manager.resume("old-2", { kind: "meta" }), "admitted before: resumed though over the limit now");
    assert.equal(manager.limits.sessionsOf(alice), 2);
    assert.throws(() => manager.create({ principal: alice }), refusedWith("sessions", 1, 2, "gateway.sessions.maxPerPrincipal"));
    await manager.destroy("old-1");
    await manager.destroy("old-2");
    assert.ok(manager.create({ principal: alice }), "both ended: a slot is free");
  } finally {
    await manager.close();
  }
  assert.equal(clock.pendingTimers, 0, "no timer left behind");
});

test("regression: an execute_tool promotion keeps its slot while it waits for the upstream to name its task; no other call takes it meanwhile", async () => {
  const { manager, clock } = setup({ tasks: 1 });
  try {
    const s1 = manager.create({ principal: alice });
    const s2 = manager.create({ principal: alice });
    // The call runs as an upstream task whose CreateTaskResult never comes: the promotion waits up to UPSTREAM_MAPPING_WAIT_MS.
    let signal: AbortSignal | undefined;
    const run = (o: RunOptions) => {
      signal = o.signal;
      return new Promise<never>((_resolve, reject) => o.signal.addEventListener("abort", () => reject(o.signal.reason as Error), { once: true }));
    };
    const state = track(
      executeWithPromotion({
        tasks: s1.tasks,
        connection: { name: "slow" } as unknown as UpstreamHandle,
        clock,
        tool: "slow",
        args: {},
        timeoutMs: 100,
        callTimeoutMs: 60_000,
        keepUpstreamTask: true,
        run,
      }),
    );
    clock.advance(100);
    await flush();
    assert.equal(state.settled, false, "promoted, waiting for the upstream's task");
    assert.throws(() => s2.tasks.reserveCall(), refusedWith("tasks", 1, 1, "gateway.tasks.maxPerPrincipal"));
    clock.advance(UPSTREAM_MAPPING_WAIT_MS);
    await flush();
    assert.equal((state.value as { kind: string } | undefined)?.kind, "task", "the task exists");
    assert.equal(manager.limits.taskLoadOf(alice), 1, "counted once: the reservation went when the task came");
    assert.throws(() => s2.tasks.reserveCall(), refusedWith("tasks", 1, 1, "gateway.tasks.maxPerPrincipal"));
    assert.equal(signal?.aborted, false);
  } finally {
    await manager.close();
  }
});

test("a refusal is logged at info with the principal's hash, never its subject", async () => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const { manager } = setup({ sessions: 1 }, undefined, new ManualClock(), createLogger("info", sink));
  try {
    manager.create({ principal: alice });
    assert.throws(() => manager.create({ principal: alice }));
    await new Promise((resolve) => setImmediate(resolve));
    const refused = lines.filter((l) => l.msg === "principal_limit_refused");
    assert.equal(refused.length, 1);
    assert.equal(refused[0]?.principalHash, alice.hash);
    assert.equal(refused[0]?.limit, "sessions");
    assert.equal(refused[0]?.held, 1);
    assert.ok(!JSON.stringify(lines).includes("alice"), "the subject is never logged");
  } finally {
    await manager.close();
  }
});
