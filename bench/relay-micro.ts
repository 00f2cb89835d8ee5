/**
 * The per-call pieces issue 27's cuts changed, in this process (CPU per
 * operation, median of 6 blocks): a SQLite replay append alone in its turn
 * and 16 in one turn (group commit), a ULID in a new millisecond with ulid's
 * default PRNG and with `pooledRandom`, a session hash computed and
 * remembered. `node --import tsx bench/relay-micro.ts`
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { monotonicFactory } from "ulid";
import { pooledRandom } from "../src/clock.js";
import { sessionHash } from "../src/logging.js";
import { openSqliteStore } from "../src/store/sqlite/index.js";
import { ManualClock } from "../test/fixtures/manual-clock.js";

const cpu = (): number => {
  const c = process.cpuUsage();
  return c.user + c.system;
};
const med = (a: number[]): string => [...a].sort((x, y) => x - y)[a.length >> 1]!.toFixed(1);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-relay-micro-"));
const store = openSqliteStore(path.join(dir, "s.db"), new ManualClock(0));
const msg = { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "Echo: hello world 123" }] } };
const limits = { maxEvents: 100, maxBytes: 1 << 20 };
const single: number[] = [];
const grouped: number[] = [];
for (let r = 0; r < 6; r++) {
  let t = cpu();
  for (let i = 0; i < 1600; i++) await store.replay.append(`s${i % 16}`, "st", msg, limits);
  single.push((cpu() - t) / 1600);
  t = cpu();
  for (let i = 0; i < 100; i++) await Promise.all(Array.from({ length: 16 }, (_, k) => store.replay.append(`s${k}`, "st", msg, limits)));
  grouped.push((cpu() - t) / 1600);
}
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
console.log(`SQLite replay append, CPU µs per message: one per turn ${med(single)}, 16 per turn ${med(grouped)}`);

const byDefault = monotonicFactory();
const pooled = monotonicFactory(pooledRandom());
const a: number[] = [];
const b: number[] = [];
let now = 1;
for (let r = 0; r < 6; r++) {
  let t = cpu();
  for (let i = 0; i < 20000; i++) byDefault(now++);
  a.push((cpu() - t) / 20000);
  t = cpu();
  for (let i = 0; i < 20000; i++) pooled(now++);
  b.push((cpu() - t) / 20000);
}
console.log(`ULID in a new millisecond, CPU µs: ulid's default PRNG ${med(a)}, pooledRandom ${med(b)}`);

const h1: number[] = [];
const h2: number[] = [];
for (let r = 0; r < 6; r++) {
  let t = cpu();
  for (let i = 0; i < 20000; i++)
    createHash("sha256")
      .update(`sess-${i % 16}`)
      .digest("hex")
      .slice(0, 8);
  h1.push((cpu() - t) / 20000);
  t = cpu();
  for (let i = 0; i < 20000; i++) sessionHash(`sess-${i % 16}`);
  h2.push((cpu() - t) / 20000);
}
console.log(`session hash, CPU µs: SHA-256 each time ${med(h1)}, remembered ${med(h2)}`);
