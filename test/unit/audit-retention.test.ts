/**
 * The retention sweep of decision records (src/governance/audit-retention.ts)
 * on a ManualClock: a quiet gateway (no new decision to trim on append) still
 * deletes records past maxAgeMs and beyond maxRecords, every sweepMs, with the
 * audit block in force at each sweep; close() leaves no timer; a failing store
 * is logged and the sweep goes on.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import pino from "pino";
import { governanceSchema, type GovernanceSettings } from "../../src/config/governance.js";
import { AuditRetention } from "../../src/governance/audit-retention.js";
import { silentLogger } from "../../src/logging.js";
import type { DecisionRecord, Store } from "../../src/store/contracts.js";
import { openStore } from "../../src/store/open.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const HOUR = 3_600_000;

function decision(id: string, at: number): DecisionRecord {
  return {
    id,
    at,
    outcome: "allow",
    profile: "enforce",
    decidedBy: "rule",
    face: "meta",
    server: "fs",
    tool: "read_file",
    argumentsDigest: "ab".repeat(32),
    policyVersion: "fedcba9876543210",
  };
}

/** Lets the sweep's store calls (promises) settle after a timer fired. */
async function settled(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000 && !(await check()); i++) await new Promise((r) => setImmediate(r));
  assert.ok(await check(), "the sweep did not settle");
}

test("every sweepMs the records past maxAgeMs go, then the oldest beyond maxRecords; close() leaves no timer", async () => {
  const clock = new ManualClock();
  const store = await openStore({ kind: "memory" }, { clock });
  let audit: GovernanceSettings["audit"] = governanceSchema.parse({ audit: { maxAgeMs: 2 * HOUR - 1500, maxRecords: 1000, sweepMs: HOUR } }).audit;
  const keepAll = { maxAgeMs: 1000 * HOUR, maxRecords: 1000 };
  const t0 = clock.now();
  for (let i = 0; i < 4; i++) await store.decisions.append(decision(`0${i}`, t0 + i * 1000), keepAll);
  const retention = new AuditRetention({ clock, logger: silentLogger, store: () => store, audit: () => audit });
  retention.start();
  retention.start(); // twice: still one timer
  assert.equal(clock.pendingTimers, 1);

  clock.advance(HOUR); // the first sweep, at t0 + 1 h: nothing is that old yet
  await settled(async () => clock.pendingTimers === 1);
  assert.equal(await store.decisions.count(), 4);

  clock.advance(HOUR); // the sweep at t0 + 2 h: records at t0 and t0 + 1 s are past maxAgeMs (2 h - 1.5 s)
  await settled(async () => (await store.decisions.count()) === 2);
  assert.deepEqual(
    (await store.decisions.list()).map((d) => d.id),
    ["02", "03"],
  );

  // The block in force changes (a SIGHUP reload): the next sweep keeps at most one.
  audit = { ...audit, maxAgeMs: 1000 * HOUR, maxRecords: 1 };
  clock.advance(HOUR);
  await settled(async () => (await store.decisions.count()) === 1);
  assert.deepEqual(
    (await store.decisions.list()).map((d) => d.id),
    ["03"],
  );

  await retention.close();
  assert.equal(clock.pendingTimers, 0, "close() cleared the timer");
  retention.start();
  assert.equal(clock.pendingTimers, 0, "a closed sweep does not start again");
  await store.close();
});

test("a store that fails is logged (audit_retention_failed) and the sweep runs again at the next interval", async () => {
  const clock = new ManualClock();
  const memory = await openStore({ kind: "memory" }, { clock });
  let fail = true;
  const store = {
    ...memory,
    decisions: {
      ...memory.decisions,
      prune: (r: { now: number; maxAgeMs: number; maxRecords: number }) => (fail ? Promise.reject(new Error("the disk is full")) : memory.decisions.prune(r)),
    },
  } as Store;
  const lines: Array<{ msg?: string; err?: string }> = [];
  const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line) as { msg?: string; err?: string }) });
  await memory.decisions.append(decision("01", clock.now()), { maxAgeMs: 1000 * HOUR, maxRecords: 1000 });
  const audit = governanceSchema.parse({ audit: { maxAgeMs: 1000, sweepMs: HOUR } }).audit;
  const retention = new AuditRetention({ clock, logger, store: () => store, audit: () => audit });
  retention.start();
  clock.advance(HOUR);
  await settled(async () => lines.some((l) => l.msg === "audit_retention_failed"));
  assert.match(lines.find((l) => l.msg === "audit_retention_failed")!.err!, /the disk is full/);
  await settled(async () => clock.pendingTimers === 1);
  fail = false;
  clock.advance(HOUR);
  await settled(async () => (await memory.decisions.count()) === 0);
  await settled(async () => lines.some((l) => l.msg === "audit_retention_swept"));
  await retention.close();
  assert.equal(clock.pendingTimers, 0);
  await memory.close();
});
