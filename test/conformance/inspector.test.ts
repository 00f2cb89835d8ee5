/**
 * MCP Inspector 2.x's CLI against the gateway in both protocol eras, on the
 * same URL (issue 25 "Proof with the official tools"): `--protocol-era modern`
 * and `--protocol-era legacy` against /servers/everything/mcp, listing tools
 * and calling one; a recording proxy in front of the gateway shows which era
 * each run spoke. And both eras against `emceepee stdio --face server:everything`
 * (the stdio face pins each connection to its first request's era). `@modelcontextprotocol/inspector` is not a dependency (it
 * pulls vite and react): it is installed on demand into
 * node_modules/.cache/emceepee-inspector (about a minute, once) and run with
 * a Node >= 22.19 from node22.ts. Skipped, saying why, only when the npm
 * registry cannot be reached. Not part of `npm test`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { CLI_ARGS } from "../helpers/core-extra.js";
import { ROOT, startGateway, type TestGateway } from "../helpers/gateway.js";
import { node22 } from "./node22.js";

const run = promisify(execFile);
const VERSION = "2.12.0";
const CACHE = path.join(ROOT, "node_modules/.cache/emceepee-inspector");
const LAUNCHER = path.join(CACHE, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");

/** The Inspector's launcher, installed once into the cache; or why it cannot be. */
async function inspector(): Promise<{ launcher: string } | { skip: string }> {
  const installed = path.join(CACHE, "node_modules/@modelcontextprotocol/inspector/package.json");
  if (
    existsSync(installed) &&
    (JSON.parse(await import("node:fs/promises").then((fs) => fs.readFile(installed, "utf8"))) as { version: string }).version === VERSION
  ) {
    return { launcher: LAUNCHER };
  }
  mkdirSync(CACHE, { recursive: true });
  try {
    await run("npm", ["install", "--prefix", CACHE, "--no-audit", "--no-fund", "--no-save", "--loglevel=error", `@modelcontextprotocol/inspector@${VERSION}`], {
      timeout: 600_000,
    });
  } catch (err) {
    return { skip: `@modelcontextprotocol/inspector@${VERSION} could not be installed from the npm registry (${String(err).slice(0, 200)})` };
  }
  return { launcher: LAUNCHER };
}

interface Seen {
  method: string;
  protocolVersion: string | undefined;
  sessionId: string | undefined;
}

/** A pass-through HTTP proxy that notes each JSON-RPC method with its MCP-Protocol-Version and Mcp-Session-Id headers. */
async function recordingProxy(target: string): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const upstream = new URL(target);
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (req.method === "POST") {
        try {
          const message = JSON.parse(body.toString("utf8")) as { method?: string };
          const header = (name: string) => req.headers[name] as string | undefined;
          if (message.method) seen.push({ method: message.method, protocolVersion: header("mcp-protocol-version"), sessionId: header("mcp-session-id") });
        } catch {
          // not JSON: passed on as is
        }
      }
      const forward = httpRequest(
        { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on("error", () => res.writeHead(502).end());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${upstream.pathname}`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("MCP Inspector 2.x CLI, both eras, one URL", { timeout: 900_000 }, () => {
  let gw: TestGateway;
  let proxy: Awaited<ReturnType<typeof recordingProxy>>;
  let node: { bin: string } | { skip: string };
  let tool: { launcher: string } | { skip: string };
  let home: string;
  before(async () => {
    [node, tool] = await Promise.all([node22(), inspector()]);
    gw = await startGateway();
    proxy = await recordingProxy(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"));
    // The Inspector keeps a catalog and client settings under ~/.mcp-inspector: a home of its own.
    home = mkdtempSync(path.join(os.tmpdir(), "emceepee-inspector-"));
  });
  after(async () => {
    await proxy?.close();
    await gw?.close();
  });

  /** One Inspector CLI run against `target` (a URL, or `--` and a command): its JSON output (`--format json`). */
  async function cli(era: "modern" | "legacy", args: string[], target: string[] = ["--server-url", proxy.url]): Promise<Record<string, any>> {
    if ("skip" in node || "skip" in tool) throw new Error("unreachable");
    const { stdout } = await run(node.bin, [tool.launcher, "--cli", "--protocol-era", era, "--format", "json", "--quiet", ...args, ...target], {
      cwd: home,
      env: { ...process.env, HOME: home, MCP_CATALOG_PATH: path.join(home, "mcp.json") },
      timeout: 120_000,
    });
    return JSON.parse(stdout) as Record<string, any>;
  }

  for (const era of ["modern", "legacy"] as const) {
    it(`--protocol-era ${era}: tools/list and tools/call echo`, async (t) => {
      if ("skip" in node) return t.skip(node.skip);
      if ("skip" in tool) return t.skip(tool.skip);
      const from = proxy.seen.length;
      const listed = await cli(era, ["--method", "tools/list"]);
      const tools = (listed.result?.tools ?? listed.tools) as Array<{ name: string; execution?: unknown }>;
      assert.ok(Array.isArray(tools), JSON.stringify(listed).slice(0, 500));
      assert.ok(tools.some((x) => x.name === "echo") && tools.some((x) => x.name === "get-sum"), tools.map((x) => x.name).join(","));
      const called = await cli(era, ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", `message=inspector ${era}`]);
      const result = (called.result ?? called) as { content?: Array<{ text?: string }>; resultType?: string };
      assert.equal(result.content?.[0]?.text, `Echo: inspector ${era}`, JSON.stringify(called));
      const spoken = proxy.seen.slice(from);
      t.diagnostic(`${era}: ${spoken.map((s) => `${s.method}@${s.protocolVersion ?? "-"}`).join(" ")}`);
      if (era === "modern") {
        // 2026-07-28 results carry resultType; every request names the revision and none has a session.
        assert.equal(result.resultType, "complete");
        assert.ok(!spoken.some((s) => s.method === "initialize"), "no initialize in the modern era");
        assert.ok(spoken.some((s) => s.method === "tools/call"));
        assert.ok(
          spoken.every((s) => s.protocolVersion === "2026-07-28" && s.sessionId === undefined),
          JSON.stringify(spoken),
        );
      } else {
        assert.equal(result.resultType, undefined, "no 2026-07-28 fields on the 2025 path");
        assert.equal(spoken.filter((s) => s.method === "initialize").length, 2, "one handshake per run");
        assert.ok(
          spoken.filter((s) => s.method === "tools/call").every((s) => s.protocolVersion === "2025-11-25" && s.sessionId !== undefined),
          JSON.stringify(spoken),
        );
      }
    });
  }

  for (const era of ["modern", "legacy"] as const) {
    it(`--protocol-era ${era} over stdio (emceepee stdio --face server:everything)`, async (t) => {
      if ("skip" in node) return t.skip(node.skip);
      if ("skip" in tool) return t.skip(tool.skip);
      const command = ["--cwd", ROOT, "--", process.execPath, ...CLI_ARGS, "stdio", "--face", "server:everything", "--store", "memory"];
      const listed = await cli(era, ["--method", "tools/list"], command);
      const tools = (listed.result?.tools ?? listed.tools) as Array<{ name: string; execution?: { taskSupport?: string } }>;
      assert.ok(Array.isArray(tools) && tools.some((x) => x.name === "get-sum"), JSON.stringify(listed).slice(0, 500));
      const called = await cli(era, ["--method", "tools/call", "--tool-name", "get-sum", "--tool-args-json", '{"a":2,"b":40}'], command);
      const result = (called.result ?? called) as { content?: Array<{ text?: string }>; resultType?: string };
      assert.match(result.content?.[0]?.text ?? "", /\b42\b/, JSON.stringify(called));
      // The era shows in the results: 2026-07-28 ones carry resultType, 2025 ones do not.
      assert.equal(result.resultType, era === "modern" ? "complete" : undefined, JSON.stringify(called));
    });
  }
});
