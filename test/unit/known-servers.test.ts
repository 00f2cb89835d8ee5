/**
 * KnownServers.answerFor: sessions opened before an upstream first answered wait for one connect (the first of them
 * makes it), not a process each (issue 27); a connect that fails lets them connect themselves, at once.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { KnownServers } from "../../src/upstream/known-servers.js";

const config = { command: "node", args: ["server.js"] };
const answer = { serverInfo: { name: "up", version: "1" }, capabilities: { tools: {} }, instructions: "hi" };

/** Whether `p` has settled after the queued callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

describe("KnownServers.answerFor", () => {
  test("nothing known: the first caller connects, the next ones wait for its answer and get it", async () => {
    const known = new KnownServers();
    const first = await known.answerFor("up", config);
    assert.equal(first.info, undefined);
    assert.equal(typeof first.done, "function", "the first caller is the one to connect");
    const waiting = [known.answerFor("up", config), known.answerFor("up", { ...config })];
    assert.equal(await settled(Promise.race(waiting)), false, "they wait while the first connects");
    known.learn("up", config, answer);
    first.done!();
    for (const w of await Promise.all(waiting)) {
      assert.deepEqual(w.info, answer);
      assert.equal(w.done, undefined);
    }
    assert.deepEqual((await known.answerFor("up", config)).info, answer, "known from now on, at once");
  });

  test("the first connect fails: the waiting callers connect themselves (no one claims again while they wait)", async () => {
    const known = new KnownServers();
    const first = await known.answerFor("up", config);
    const waiting = known.answerFor("up", config);
    first.done!(); // failed: nothing learned
    assert.deepEqual(await waiting, { info: undefined });
    const later = await known.answerFor("up", config);
    assert.equal(typeof later.done, "function", "a later session tries again");
    later.done!();
  });

  test("a first session connecting with another config is not waited for", async () => {
    const known = new KnownServers();
    const other = await known.answerFor("up", { ...config, args: ["other.js"] });
    const mine = await known.answerFor("up", config);
    assert.equal(typeof mine.done, "function", "another config's answer is not this one's: this session connects itself");
    other.done!();
    mine.done!();
  });
});
