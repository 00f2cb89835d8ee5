/**
 * One process that runs `emceepee` commands one after another for
 * test/helpers/cli-host.ts: the CLI's run() (argv in; its stdout, stderr and
 * exit code out) with process.stdout/stderr.write and process.exit taken over
 * for the command in flight. Only for commands that end by themselves (help,
 * version, schema, check, config and flag errors): a served gateway or a
 * process's own exit paths are tested by spawning the CLI (core-extra.ts).
 * argv[2]: the CLI's program module (test/helpers/cli-build.ts cliProgramModule(): the bundle's program.mjs).
 */
import { pathToFileURL } from "node:url";

const { run } = await import(pathToFileURL(process.argv[2]).href);

/** Thrown by the taken-over process.exit: as in a real exit, nothing after it in the same call runs. */
class Exited extends Error {}

let current;
const capture = (stream) =>
  function write(chunk, encoding, callback) {
    if (current && !current.exited) current[stream] += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    const done = typeof encoding === "function" ? encoding : callback;
    if (typeof done === "function") queueMicrotask(() => done());
    return true;
  };
const exit = process.exit.bind(process);
process.stdout.write = capture("stdout");
process.stderr.write = capture("stderr");
process.exit = (code) => {
  if (current && !current.exited) Object.assign(current, { exited: true, code: code ?? process.exitCode ?? 0 });
  throw new Exited("process.exit");
};
// What would end a real CLI process with exit code 1 (Node's default for an uncaught error) ends the command.
const crash = (err) => {
  if (!current || current.exited) return;
  current.stderr += `${err instanceof Error ? err.stack : String(err)}\n`;
  Object.assign(current, { exited: true, code: 1 });
};
process.on("uncaughtException", (err) => {
  if (!(err instanceof Exited)) crash(err);
});
process.on("unhandledRejection", (err) => {
  if (!(err instanceof Exited)) crash(err);
});
// The test process is gone (or done with it): so is this one.
process.on("disconnect", () => exit(0));

process.on("message", async ({ id, args, env }) => {
  const saved = {};
  for (const [key, value] of Object.entries(env)) {
    saved[key] = process.env[key];
    process.env[key] = value;
  }
  current = { stdout: "", stderr: "", code: 0, exited: false };
  process.exitCode = undefined;
  try {
    await run([process.execPath, "emceepee", ...args]);
  } catch (err) {
    if (!(err instanceof Exited)) crash(err);
  }
  // Continuations the command left (a rejection handler after its exit) run before the result is read.
  await new Promise((resolve) => setImmediate(resolve));
  const { stdout, stderr, exited, code } = current;
  current = undefined;
  const result = { id, stdout, stderr, code: exited ? code : (process.exitCode ?? 0) };
  process.exitCode = undefined;
  for (const [key, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  process.send(result);
});
process.send({ ready: true });
