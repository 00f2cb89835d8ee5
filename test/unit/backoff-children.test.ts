import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { backoffDelay } from "../../src/upstream/backoff.js";
import { ChildProcessLimiter, descendantsOf, processRef, reap } from "../../src/upstream/children.js";

const policy = { initialDelayMs: 500, maxDelayMs: 30_000, jitter: 0.3 };

test("backoffDelay doubles per attempt, is capped, and spreads ±jitter", () => {
  const mid = () => 0.5;
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => backoffDelay(policy, n, mid)),
    [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000],
  );
  assert.equal(
    backoffDelay(policy, 1, () => 0),
    350,
    "lowest draw: 30% below",
  );
  assert.equal(
    backoffDelay(policy, 1, () => 0.999999),
    650,
    "highest draw: 30% above",
  );
  assert.equal(
    backoffDelay(policy, 100, () => 0.999999),
    39_000,
    "the cap applies before jitter",
  );
  assert.equal(backoffDelay({ ...policy, jitter: 0 }, 3, Math.random), 2000, "no jitter: exact");
});

test("ChildProcessLimiter refuses past its cap with LIMIT_REACHED and releases each slot once", () => {
  const limiter = new ChildProcessLimiter(2);
  const a = limiter.acquire("a");
  limiter.acquire("b");
  assert.throws(
    () => limiter.acquire("c"),
    (err: Error & { code?: string }) => err.code === "EMCP_LIMIT_REACHED" && /'c'.*maxChildProcesses = 2/.test(err.message),
  );
  a();
  a();
  assert.equal(limiter.count, 1, "a second release of the same slot is a no-op");
  limiter.acquire("c");
  assert.equal(limiter.count, 2);
});

test("descendantsOf finds children and grandchildren of a process", async () => {
  const script =
    "const {spawn}=require('child_process'); spawn(process.execPath,['-e','setInterval(()=>{},1e6)'],{stdio:'ignore'}); setInterval(()=>{},1e6); console.log('ready')";
  const parent = spawn(
    process.execPath,
    [
      "-e",
      `const {spawn}=require('child_process'); spawn(process.execPath,['-e',${JSON.stringify(script)}],{stdio:['ignore','inherit','ignore']}); setInterval(()=>{},1e6)`,
    ],
    {
      stdio: ["ignore", "pipe", "ignore"],
    },
  );
  try {
    await new Promise<void>((resolve) => parent.stdout.once("data", () => resolve()));
    const tree = descendantsOf(parent.pid!);
    assert.equal(tree.length, 2, `child and grandchild: ${tree.map((p) => p.pid).join(",")}`);
    assert.ok(
      tree.every((p) => p.start.length > 0),
      "each with its start time",
    );
  } finally {
    for (const pid of [...descendantsOf(parent.pid!).map((p) => p.pid), parent.pid!]) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
  }
});

test("reap signals a process only while its pid still names the process that was seen (no reused pids)", async () => {
  const sleeper = spawn(process.execPath, ["-e", "setInterval(() => {}, 1e6)"], { stdio: "ignore" });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => sleeper.once("exit", (_code, sig) => resolve(sig)));
  try {
    const seen = processRef(sleeper.pid!);
    assert.ok(seen, "the sleeper is visible in /proc");
    reap([{ pid: seen.pid, start: `${seen.start}0` }]);
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(processRef(sleeper.pid!), "a different start time: not signalled");
    reap([seen]);
    assert.equal(await exited, "SIGTERM");
  } finally {
    sleeper.kill("SIGKILL");
  }
});
