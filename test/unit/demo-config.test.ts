/**
 * The embedded demo config without its optional server-everything: a clear
 * EMCP_CONFIG_INVALID naming the package, how to install it and --config —
 * from the resolver (a real require.resolve from a folder without the
 * package) and from the CLI (a copy of the compiled CLI the integration tests
 * spawn, test/helpers/cli-build.ts, whose node_modules lacks it).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { EVERYTHING_PACKAGE, demoConfig, everythingServerEntry } from "../../src/config/demo.js";
import { GatewayError } from "../../src/errors.js";
import { builtDir } from "../helpers/cli-build.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

function assertMissingMessage(message: string): void {
  assert.match(message, /EMCP_CONFIG_INVALID/);
  assert.ok(message.includes(`${EVERYTHING_PACKAGE}, which is not installed`), message);
  assert.ok(message.includes(`npm install ${EVERYTHING_PACKAGE}`), message);
  assert.ok(message.includes("--config <file>"), message);
}

test("the installed server-everything is the demo config's upstream", () => {
  const entry = everythingServerEntry();
  assert.ok(existsSync(entry), entry);
  assert.deepEqual((demoConfig() as { mcpServers: { everything: { args: string[] } } }).mcpServers.everything.args, [entry, "stdio"]);
});

test("without server-everything the demo config is EMCP_CONFIG_INVALID saying what to install or pass", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-no-everything-"));
  try {
    const resolveThere = createRequire(path.join(dir, "index.js")).resolve;
    assert.throws(
      () => demoConfig(resolveThere),
      (err: unknown) => {
        assert.ok(err instanceof GatewayError);
        assertMissingMessage(`${err.code}: ${err.message}`);
        return true;
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("emceepee check without --config and without server-everything exits 2 with the message, no stack trace", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-no-everything-"));
  try {
    // The compiled CLI (src/ as it is, plain JavaScript: no loader in the child) and package.json; node_modules: every installed package but server-everything.
    cpSync(path.join(builtDir(), "dist"), path.join(dir, "dist"), { recursive: true });
    cpSync(path.join(ROOT, "package.json"), path.join(dir, "package.json"));
    const modules = path.join(ROOT, "node_modules");
    for (const name of readdirSync(modules)) {
      if (name.startsWith("@")) {
        mkdirSync(path.join(dir, "node_modules", name), { recursive: true });
        for (const inner of readdirSync(path.join(modules, name))) {
          if (`${name}/${inner}` !== EVERYTHING_PACKAGE) symlinkSync(path.join(modules, name, inner), path.join(dir, "node_modules", name, inner));
        }
      } else {
        mkdirSync(path.join(dir, "node_modules"), { recursive: true });
        symlinkSync(path.join(modules, name), path.join(dir, "node_modules", name));
      }
    }
    const run = promisify(execFile)(process.execPath, [path.join(dir, "dist/cli/main.js"), "check"], { cwd: dir, timeout: 120_000 });
    const failure = await run.then(
      () => assert.fail("check succeeded without server-everything"),
      (err: { code?: number; stdout: string; stderr: string }) => err,
    );
    assert.equal(failure.code, 2);
    assertMissingMessage(failure.stderr);
    assert.ok(failure.stderr.startsWith("emceepee: EMCP_CONFIG_INVALID: "), failure.stderr);
    assert.doesNotMatch(failure.stderr, /\n\s+at /, "no stack trace");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
