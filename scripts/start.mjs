#!/usr/bin/env node
/**
 * `npm start`: build dist/ only when a source changed since the last build,
 * then run the CLI — the bundle the package ships (dist/cli/program.mjs, made
 * by scripts/bundle.mjs in the build; docs/adr/0039) — in THIS process — so the gateway is the process npm
 * signals. npm runs a script through `sh -c`, and sh (dash) does not exec
 * its last command: SIGTERM to npm reaches only sh, which dies and leaves the
 * gateway running. The `exec` in package.json's start script makes this
 * process replace sh; npm forwards SIGTERM/SIGINT to it (npm 10/11).
 *
 * Because npm shares the terminal's process group and forwards what it got,
 * a Ctrl-C reaches the gateway twice: run() is told to count a repeat within
 * REPEAT_WINDOW_MS as the same signal (a second Ctrl-C later still forces).
 *
 * Up to date means: the list of inputs (path, size, mtime of src/** and the
 * tsconfig files; scripts/build-inputs.mjs) equals the one recorded after the
 * last successful build here, and dist/cli/program.mjs exists; otherwise the
 * message names what changed. The first `npm start` after `npm ci` builds once.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { buildInputs, recordBuild, stampPath } from "./build-inputs.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ENTRY = path.join(ROOT, "dist/cli/program.mjs");
const STAMP = stampPath(ROOT);
const REPEAT_WINDOW_MS = 1000;

/** Why a build is needed, or undefined when dist/ is current. */
function staleness(now, before) {
  if (before === undefined) return "no build recorded";
  if (!existsSync(ENTRY)) return `${path.relative(ROOT, ENTRY)} is missing`;
  const was = new Set(before);
  const changed = now.filter((line) => !was.has(line)).map((line) => line.split("\t")[0]);
  if (changed.length) return `changed: ${changed.slice(0, 3).join(", ")}${changed.length > 3 ? ` and ${changed.length - 3} more` : ""}`;
  return before.length !== now.length ? "a source file was removed" : undefined;
}

const current = buildInputs(ROOT);
const recorded = existsSync(STAMP) ? readFileSync(STAMP, "utf8").split("\n") : undefined;
const why = staleness(current, recorded);
if (why) {
  const first = recorded === undefined ? "the first start after install compiles once; " : "";
  process.stderr.write(`emceepee: compiling TypeScript to dist/ before starting (${first}${why}); this takes a few seconds…\n`);
  const started = Date.now();
  try {
    // The package's own build script (it starts from an empty dist/); npm_execpath is set when npm runs this script.
    const npm = process.env.npm_execpath;
    const [command, args] = npm ? [process.execPath, [npm, "run", "--silent", "build"]] : ["npm", ["run", "--silent", "build"]];
    execFileSync(command, args, { cwd: ROOT, stdio: "inherit", shell: !npm && process.platform === "win32" });
  } catch {
    process.stderr.write("emceepee: the build failed (see above); fix it and run npm start again\n");
    process.exit(2);
  }
  process.stderr.write(`emceepee: compiled in ${((Date.now() - started) / 1000).toFixed(1)} s; starting\n`);
  recordBuild(ROOT, current);
}

const { run } = await import(pathToFileURL(ENTRY).href);
await run(process.argv, { repeatWindowMs: REPEAT_WINDOW_MS });
