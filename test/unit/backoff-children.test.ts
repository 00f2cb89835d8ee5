/**
 * Backoff, the child-process cap, and process groups with real processes:
 * reapGroup ends a whole group (members that ignore SIGTERM, orphans of a
 * dead leader), ProcessGroups kills synchronously, and the group stdio
 * transport reports spawn and write failures clearly.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { backoffDelay } from "../../src/upstream/backoff.js";
import { ChildProcessLimiter, ProcessGroups, groupMembers, reapGroup, signalGroup, type GroupLeader } from "../../src/upstream/children.js";
import { GroupStdioClientTransport } from "../../src/upstream/stdio-transport.js";

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

/**
 * A process group like a wrapper upstream's: a detached leader (ignoring
 * SIGTERM when `stubbornLeader`) with one child that ignores SIGTERM. Resolves
 * once both run, with the child's pid.
 */
async function startGroup(stubbornLeader = false): Promise<{ leader: ChildProcess; ref: GroupLeader; childPid: number }> {
  const child = "process.on('SIGTERM', () => {}); setInterval(() => {}, 1e6); console.log(process.pid)";
  const leaderScript = [
    stubbornLeader ? "process.on('SIGTERM', () => {});" : "",
    "const {spawn} = require('child_process');",
    `spawn(process.execPath, ['-e', ${JSON.stringify(child)}], { stdio: ['ignore', 'inherit', 'ignore'] });`,
    "setInterval(() => {}, 1e6);",
  ].join(" ");
  const leader = spawn(process.execPath, ["-e", leaderScript], { detached: true, stdio: ["ignore", "pipe", "ignore"] });
  const [line] = (await once(leader.stdout, "data")) as [Buffer];
  const ref: GroupLeader = { pgid: leader.pid!, hasExited: () => leader.exitCode !== null || leader.signalCode !== null };
  return { leader, ref, childPid: Number(line.toString("utf8").trim()) };
}

function killGroupQuietly(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    /* gone */
  }
}

test("reapGroup ends the whole group, members and a leader that ignore SIGTERM included, and resolves only when it is gone", async () => {
  const { leader, ref, childPid } = await startGroup(true);
  try {
    assert.deepEqual(groupMembers(ref.pgid)?.sort(), [leader.pid!, childPid].sort(), "leader and child share the leader's group");
    const exited = once(leader, "exit");
    await reapGroup(ref, 200);
    assert.deepEqual(groupMembers(ref.pgid), [], "nothing of the group is left when reapGroup resolves");
    const [, signal] = (await exited) as [number | null, NodeJS.Signals | null];
    assert.equal(signal, "SIGKILL", "the stubborn leader needed SIGKILL");
  } finally {
    killGroupQuietly(ref.pgid);
  }
});

test("a leader that was SIGKILLed still has its orphaned children reaped through the group id", async () => {
  const { leader, ref, childPid } = await startGroup();
  try {
    leader.kill("SIGKILL");
    await once(leader, "exit");
    assert.deepEqual(groupMembers(ref.pgid), [childPid], "the orphan lives on (re-parented), still in the group");
    await reapGroup(ref, 200);
    assert.deepEqual(groupMembers(ref.pgid), []);
    assert.equal(signalGroup(ref, "SIGKILL"), false, "a gone group is never signalled again (its id may be reused)");
  } finally {
    killGroupQuietly(ref.pgid);
  }
});

test("ProcessGroups.killAll sends SIGKILL to every tracked group synchronously; terminateAll awaits each owner", async () => {
  const a = await startGroup(true);
  const b = await startGroup(true);
  const groups = new ProcessGroups();
  const terminated: number[] = [];
  for (const g of [a, b]) {
    const untrack = groups.track({
      kill: () => signalGroup(g.ref, "SIGKILL"),
      terminate: async () => {
        terminated.push(g.ref.pgid);
        untrack();
      },
    });
  }
  try {
    assert.equal(groups.size, 2);
    const exits = [once(a.leader, "exit"), once(b.leader, "exit")];
    groups.killAll();
    for (const [, signal] of (await Promise.all(exits)) as Array<[number | null, NodeJS.Signals | null]>) assert.equal(signal, "SIGKILL");
    await groups.terminateAll();
    assert.deepEqual(terminated.sort(), [a.ref.pgid, b.ref.pgid].sort());
    assert.equal(groups.size, 0, "owners untrack themselves once their group is gone");
  } finally {
    killGroupQuietly(a.ref.pgid);
    killGroupQuietly(b.ref.pgid);
  }
});

test("the stdio transport names a command that does not exist, and a cwd that does not exist", async () => {
  const missing = new GroupStdioClientTransport({ command: "emceepee-no-such-command", args: [], env: { PATH: process.env.PATH ?? "" }, killGraceMs: 100 });
  await assert.rejects(missing.start(), /cannot start upstream command 'emceepee-no-such-command': not found \(ENOENT\); give an absolute path/);
  await missing.close();
  await missing.close(); // idempotent

  const badCwd = new GroupStdioClientTransport({ command: process.execPath, args: [], env: {}, cwd: "/nonexistent/emceepee-dir", killGraceMs: 100 });
  await assert.rejects(badCwd.start(), /cwd '\/nonexistent\/emceepee-dir' does not exist/);
});

test("the stdio transport starts its child as a group leader, rejects sends once it has exited, and closes once", async () => {
  const groups = new ProcessGroups();
  const transport = new GroupStdioClientTransport({
    command: process.execPath,
    args: ["-e", "process.stdin.once('data', () => process.exit(0))"],
    env: {},
    killGraceMs: 100,
    groups,
  });
  let closes = 0;
  const errors: Error[] = [];
  transport.onclose = () => closes++;
  transport.onerror = (err) => errors.push(err);
  await transport.start();
  const pid = transport.pid!;
  assert.deepEqual(groupMembers(pid), [pid], "pgid = pid");
  assert.equal(groups.size, 1);
  await transport.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  await new Promise<void>((resolve) => {
    const prev = transport.onclose;
    transport.onclose = () => (prev?.(), resolve());
  });
  await assert.rejects(transport.send({ jsonrpc: "2.0", method: "ping", id: 1 }), /not connected: the upstream process .* is not running/);
  await transport.close();
  await transport.close();
  assert.equal(closes, 1, "onclose fires once");
  assert.equal(groups.size, 0, "the group is untracked once gone");
  assert.deepEqual(errors, []);
});

test("a write to a child that closed its stdin fails with a clear error instead of crashing the gateway (EPIPE)", async () => {
  const transport = new GroupStdioClientTransport({
    command: process.execPath,
    args: ["-e", "require('fs').closeSync(0); console.error('stdin closed'); setInterval(() => {}, 1e6)"],
    env: {},
    killGraceMs: 100,
  });
  const errors: Error[] = [];
  transport.onerror = (err) => errors.push(err);
  const stdinClosed = once(transport.stderr, "data");
  await transport.start();
  try {
    await stdinClosed;
    let failure: unknown;
    for (let i = 0; i < 20 && !failure; i++) {
      await transport.send({ jsonrpc: "2.0", method: "ping", id: i }).catch((err: unknown) => (failure = err));
    }
    assert.match(String(failure), /cannot write to upstream '.*node.*': .*EPIPE/);
    assert.ok(
      errors.some((e) => /stdin: .*EPIPE.*the process exited or closed its input/.test(e.message)),
      errors.map((e) => e.message).join("; "),
    );
  } finally {
    await transport.close();
  }
  assert.deepEqual(groupMembers(transport.pid!), [], "close() ended the child that ignored stdin EOF");
});
