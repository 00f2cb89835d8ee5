/**
 * A child process for the SIGKILL test (test/unit/store-sqlite.test.ts):
 * writes to a SQLite store in a tight loop and prints a line after each
 * commit, so the parent knows what was acknowledged when it kills it.
 *
 *   node --import tsx test/store/crash-writer.ts <file> <name> <sharedCount>
 *
 * Lines: `T <taskId>` (task stored and completed with its result),
 * `E <eventId>` (event appended), `D <id> <id>…` (one take: those events were
 * handed out), `W shared-<n>` (this child's compare-and-set won that shared task).
 *
 * Each iteration ends with a 1 ms pause: SQLite's file lock is not fair, and a
 * writer in a tight loop would starve the other writer's busy handler (which
 * sleeps between retries) — the gateway itself is one writer per file.
 */
import { openStore } from "../../src/store/open.js";

const [file, name, sharedArg] = process.argv.slice(2);
if (!file || !name) throw new Error("usage: crash-writer.ts <file> <name> <sharedCount>");
const shared = Number(sharedArg ?? 0);
const limits = { maxPerSession: 1_000_000, maxTotal: 1_000_000 };
const out = (line: string) => process.stdout.write(`${line}\n`);

const store = await openStore({ kind: "sqlite", path: file });
out("READY");
for (let i = 1; ; i++) {
  const taskId = `${name}-${String(i).padStart(6, "0")}`;
  const now = Date.now();
  await store.tasks.create({
    taskId,
    sessionId: name,
    server: "srv",
    toolName: "tool",
    toolArgs: { i },
    status: "working",
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs: 60_000,
    expiresAt: now + 60_000,
  });
  const result = { content: [{ type: "text", text: `result of ${taskId}` }] };
  const done = await store.tasks.transition(taskId, {
    from: ["working"],
    to: "completed",
    patch: { result, resultBytes: JSON.stringify(result).length, lastUpdatedAt: Date.now() },
  });
  if (done) out(`T ${taskId}`);
  const { event } = await store.events.append(name, { id: `ev-${taskId}`, type: "task_completed", server: "srv", createdAt: now, data: { taskId } }, limits);
  out(`E ${event.id}`);
  if (i % 3 === 0) {
    const take = await store.events.takeUndelivered(name);
    if (take.events.length) out(`D ${take.events.map((e) => e.id).join(" ")}`);
  }
  if (i <= shared) {
    const won = await store.tasks.transition(`shared-${i}`, { from: ["working"], to: "completed", patch: { statusMessage: name } });
    if (won) out(`W shared-${i}`);
  }
  await new Promise((resolve) => setTimeout(resolve, 1));
}
