/**
 * Console login rate limit (src/console/login-limit.ts): the limiter on a
 * manual clock, and the real login form over HTTP with an injected clock the
 * test moves past the window.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { systemClock, type Clock } from "../../src/clock.js";
import { LoginLimiter } from "../../src/console/login-limit.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { everythingStdio, startGateway } from "../helpers/gateway.js";

test("an address is blocked after maxFailures wrong tokens until its window ends; a success clears it; other addresses are not affected", () => {
  const clock = new ManualClock();
  const limiter = new LoginLimiter({ clock, maxFailures: 3, windowMs: 60_000 });
  for (let i = 0; i < 3; i++) {
    assert.equal(limiter.blockedFor("10.0.0.1"), undefined);
    limiter.failed("10.0.0.1");
  }
  clock.advance(10_000);
  assert.equal(limiter.blockedFor("10.0.0.1"), 50_000, "until the window that began with the first failure ends");
  assert.equal(limiter.blockedFor("10.0.0.2"), undefined);
  clock.advance(50_000);
  assert.equal(limiter.blockedFor("10.0.0.1"), undefined, "a new window");
  limiter.failed("10.0.0.1");
  limiter.failed("10.0.0.1");
  limiter.succeeded("10.0.0.1");
  limiter.failed("10.0.0.1");
  limiter.failed("10.0.0.1");
  assert.equal(limiter.blockedFor("10.0.0.1"), undefined, "the success started the count again");
});

test("memory is bounded: at most maxClients addresses, ended windows pruned first, then the oldest", () => {
  const clock = new ManualClock();
  const limiter = new LoginLimiter({ clock, maxFailures: 1, windowMs: 1_000, maxClients: 100 });
  for (let i = 0; i < 100; i++) limiter.failed(`old-${i}`);
  clock.advance(500);
  for (let i = 0; i < 10_000; i++) limiter.failed(`new-${i}`);
  assert.equal(limiter.size, 100);
  assert.equal(limiter.blockedFor("new-9999") !== undefined, true, "the newest are kept");
  assert.equal(limiter.blockedFor("old-0"), undefined, "the oldest went first");
  clock.advance(1_000);
  limiter.failed("late");
  assert.equal(limiter.size, 1, "ended windows are pruned before anything else");
});

/** Real time, moved forward by the test (the gateway's timers run on real time). */
class ShiftedClock implements Clock {
  offset = 0;
  now = () => Date.now() + this.offset;
  setTimeout: Clock["setTimeout"] = (fn, ms) => systemClock.setTimeout(fn, ms);
  clearTimeout: Clock["clearTimeout"] = (handle) => systemClock.clearTimeout(handle);
}

test("/console/login: 5 wrong tokens per minute, then 429 with Retry-After even for the right token, until the minute ends", { timeout: 120_000 }, async () => {
  const TOKEN = "login-limit-token-0123456789";
  const clock = new ShiftedClock();
  const gw = await startGateway({ mcpServers: { everything: everythingStdio() }, gateway: { token: TOKEN } }, { clock });
  try {
    const base = gw.url.replace(/\/mcp$/, "");
    const login = (token: string) =>
      fetch(`${base}/console/login`, {
        method: "POST",
        redirect: "manual",
        headers: { Origin: base, "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token, next: "/console" }).toString(),
      });
    for (let i = 0; i < 5; i++) assert.equal((await login("wrong")).status, 401, `wrong token ${i + 1}`);
    const blocked = await login("wrong");
    assert.equal(blocked.status, 429);
    const retryAfter = Number(blocked.headers.get("retry-after"));
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After in seconds: ${retryAfter}`);
    assert.match(await blocked.text(), /Too many wrong tokens from this address/);
    const right = await login(TOKEN);
    assert.equal(right.status, 429, "the right token too, while blocked");
    assert.equal(right.headers.get("set-cookie"), null);
    clock.offset += 60_000;
    const after = await login(TOKEN);
    assert.equal(after.status, 303, "after the window, the right token logs in");
    assert.match(after.headers.get("set-cookie") ?? "", /emceepee_console=/);
  } finally {
    await gw.close();
  }
});
