/**
 * Governance on every face (issue 24, docs/adr/0022): a gateway in process
 * with server-everything in process and a real SQLite store. A hidden tool is
 * absent from tools/list on /servers/<name>/mcp and /all/mcp and from meta
 * list_tools, and unknown by name on each; a rule with argument conditions
 * denies one call and allows another; a Cedar policy decides; dry-run lets a
 * call through and records would_deny; the decisions are in the store after a
 * restart on the same file.
 */
import { test } from "node:test";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { parseConfig } from "../../src/config/load.js";
import { openStore } from "../../src/store/open.js";
import { CLI_ARGS } from "../helpers/core-extra.js";
import { block, call, connectClient, ROOT } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const HIDDEN = "get-env";

function governance(profile: "enforce" | "dry-run", policyFile: string) {
  return {
    profile,
    visibility: [{ id: "hide-env", server: "everything", tool: HIDDEN, visible: false }],
    rules: [
      { id: "no-secret-echo", server: "everything", tool: "echo", arguments: [{ pointer: "/message", matches: "secret" }], action: "deny" },
      { id: "sum-by-policy", server: "everything", tool: "get-sum", action: "policy" },
    ],
    cedar: { policyFile },
  };
}

const toolNames = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);

async function refusedWith(p: Promise<unknown>, code: string | RegExp): Promise<string> {
  const r = (await p.then(
    (v) => v,
    (e: unknown) => ({ thrown: e }),
  )) as { isError?: boolean; content?: Array<{ text?: string }>; thrown?: Error };
  const text = r.thrown ? r.thrown.message : r.isError ? (r.content ?? []).map((c) => c.text ?? "").join(" ") : "";
  assert.match(text, code instanceof RegExp ? code : new RegExp(code), `expected a refusal with ${String(code)}, got ${JSON.stringify(r).slice(0, 400)}`);
  return text;
}

test(
  "governance: hidden tools absent and unknown on every face, rules with argument conditions, Cedar, decisions kept across a restart",
  { timeout: 300_000 },
  async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "gov-int-"));
    const dbPath = path.join(dir, "state.db");
    const policyFile = path.join(dir, "policy.cedar");
    writeFileSync(
      policyFile,
      `@id("small-sums")\npermit(principal, action == Action::"call_tool", resource == Tool::"everything/get-sum") when { context.arguments.a < 100 };\n`,
    );
    const store = { kind: "sqlite", path: dbPath };
    let gw = await startInProcessGateway({ gateway: { store, governance: governance("enforce", policyFile) } });
    try {
      const meta = await connectClient(gw.url);
      const single = await connectClient(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"));
      const all = await connectClient(gw.url.replace(/\/mcp$/, "/all/mcp"));

      // Visibility: absent from every list, unknown by name on every face.
      const singleTools = await toolNames(single);
      assert.ok(singleTools.includes("echo") && !singleTools.includes(HIDDEN), `/servers/everything/mcp lists ${singleTools.join(", ")}`);
      const allTools = await toolNames(all);
      assert.ok(allTools.includes("everything__echo") && !allTools.includes(`everything__${HIDDEN}`), `/all/mcp lists ${allTools.join(", ")}`);
      const listed =
        block<Array<{ server: string; tools: Array<{ name: string }> }>>(await call(meta, "list_tools", { server: "everything", limit: 500 }), "servers") ?? [];
      const metaTools = listed.flatMap((s) => s.tools.map((t) => t.name));
      assert.ok(metaTools.includes("echo") && !metaTools.includes(HIDDEN), `meta list_tools lists ${metaTools.join(", ")}`);
      await refusedWith(single.callTool({ name: HIDDEN, arguments: {} }), /EMCP_UNKNOWN_TOOL|has no tool/);
      await refusedWith(all.callTool({ name: `everything__${HIDDEN}`, arguments: {} }), /EMCP_UNKNOWN_TOOL|has no tool/);
      await refusedWith(call(meta, "execute_tool", { server: "everything", tool: HIDDEN, args: {} }), /EMCP_UNKNOWN_TOOL/);

      // A rule with an argument condition: one call denied, another allowed, on each face.
      await refusedWith(single.callTool({ name: "echo", arguments: { message: "the secret" } }), /no-secret-echo/);
      await refusedWith(all.callTool({ name: "everything__echo", arguments: { message: "a secret" } }), /no-secret-echo/);
      await refusedWith(call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "secret!" } }), /EMCP_POLICY_DENIED/);
      const ok = await single.callTool({ name: "echo", arguments: { message: "hello" } });
      assert.ok(!ok.isError && JSON.stringify(ok.content).includes("hello"));
      const okMeta = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "hi" } });
      assert.ok(!okMeta.isError, JSON.stringify(okMeta.content));

      // Cedar decides get-sum: a < 100 is permitted, else no policy permits it.
      const sum = await all.callTool({ name: "everything__get-sum", arguments: { a: 2, b: 3 } });
      assert.ok(!sum.isError && JSON.stringify(sum.content).includes("5"), JSON.stringify(sum.content));
      await refusedWith(all.callTool({ name: "everything__get-sum", arguments: { a: 1000, b: 3 } }), /EMCP_POLICY_DENIED|none permitted it/);
      for (const c of [meta, single, all]) await c.close();

      // Decisions by outcome on /metrics.
      const metrics = await (await fetch(new URL("/metrics", gw.url))).text();
      assert.match(metrics, /emceepee_governance_decisions_total\{outcome="deny"\} 4\b/, "three no-secret-echo denials and one Cedar denial");
      assert.match(metrics, /emceepee_governance_decisions_total\{outcome="allow"\} 3\b/);
    } finally {
      await gw.close();
    }

    // Dry-run on the same file: the denied call goes through and is recorded as would_deny.
    gw = await startInProcessGateway({ gateway: { store, governance: governance("dry-run", policyFile) } });
    try {
      const single = await connectClient(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"));
      const r = await single.callTool({ name: "echo", arguments: { message: "another secret" } });
      assert.ok(!r.isError && JSON.stringify(r.content).includes("another secret"), JSON.stringify(r.content));
      await single.close();
    } finally {
      await gw.close();
    }

    // Every decision is in the store file after both gateways closed.
    const opened = await openStore({ kind: "sqlite", path: dbPath });
    try {
      const records = await opened.decisions.list();
      const outcomes = records.map((d) => `${d.face}:${d.tool}:${d.outcome}:${d.ruleId ?? ""}`);
      for (const face of ["server", "all", "meta"]) assert.ok(outcomes.includes(`${face}:echo:deny:no-secret-echo`), `${face} deny in ${outcomes.join(" ")}`);
      assert.ok(outcomes.includes("server:echo:allow:"), outcomes.join(" "));
      assert.ok(outcomes.includes("server:echo:would_deny:no-secret-echo"), outcomes.join(" "));
      const cedar = records.filter((d) => d.decidedBy === "cedar");
      assert.deepEqual(
        cedar.map((d) => [d.outcome, d.policyIds]),
        [
          ["allow", ["small-sums"]],
          ["deny", []],
        ],
      );
      assert.equal(new Set(records.map((d) => d.policyVersion)).size, 1, "one policy version (dry-run shares rules and policy)");
      assert.ok(records.every((d) => d.sessionHash && /^[0-9a-f]{64}$/.test(d.argumentsDigest) && d.arguments === undefined));
    } finally {
      await opened.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test("reload: a bad Cedar policy keeps the one in force (and says so); a good one applies without a restart", { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "gov-reload-"));
  const good = path.join(dir, "good.cedar");
  const bad = path.join(dir, "bad.cedar");
  const open = path.join(dir, "open.cedar");
  writeFileSync(good, `permit(principal, action, resource);\n@id("no-echo")\nforbid(principal, action, resource) when { resource.name == "echo" };\n`);
  writeFileSync(bad, `permit(principal, action, resource);\n\nforbid(principal action, resource);\n`);
  writeFileSync(open, `permit(principal, action, resource);\n`);
  const gov = (policyFile: string) => ({ profile: "enforce", defaultAction: "policy", cedar: { policyFile } });
  const config = (policyFile: string) =>
    parseConfig({ mcpServers: { everything: inProcess("everything") }, gateway: { port: 0, logLevel: "silent", governance: gov(policyFile) } });
  const gw = await startInProcessGateway({ gateway: { governance: gov(good) } });
  try {
    const single = await connectClient(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"));
    await refusedWith(single.callTool({ name: "echo", arguments: { message: "x" } }), /no-echo/);
    const refused = await gw.gateway.reload(config(bad));
    assert.equal(refused.governance?.applied, false);
    assert.match(refused.governance && !refused.governance.applied ? refused.governance.reason : "", /bad\.cedar.*line 3.*is kept/s);
    await refusedWith(single.callTool({ name: "echo", arguments: { message: "x" } }), /no-echo/);
    const applied = await gw.gateway.reload(config(open));
    assert.equal(applied.governance?.applied, true);
    assert.ok(!applied.settingsChanged.includes("governance"), "no restart needed");
    const ok = await single.callTool({ name: "echo", arguments: { message: "now allowed" } });
    assert.ok(!ok.isError, JSON.stringify(ok.content));
    await single.close();
  } finally {
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("emceepee audit export writes the decision records of a SQLite store as JSON lines, from --since", { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "gov-export-"));
  const dbPath = path.join(dir, "state.db");
  try {
    const store = await openStore({ kind: "sqlite", path: dbPath });
    const base = {
      outcome: "deny",
      profile: "enforce",
      decidedBy: "rule",
      face: "meta",
      server: "fs",
      tool: "rm",
      argumentsDigest: "0".repeat(64),
      policyVersion: "0123456789abcdef",
    } as const;
    for (const [id, at] of [
      ["01", 1000],
      ["02", 2000],
      ["03", 3000],
    ] as const)
      await store.decisions.append({ id, at, ...base }, { maxAgeMs: 1e12, maxRecords: 100 });
    await store.close();
    const { stdout } = await promisify(execFile)(process.execPath, [...CLI_ARGS, "audit", "export", "--store", `sqlite:${dbPath}`, "--since", "2000"], {
      cwd: ROOT,
      timeout: 90_000,
    });
    const lines = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string; outcome: string });
    assert.deepEqual(
      lines.map((l) => [l.id, l.outcome]),
      [
        ["02", "deny"],
        ["03", "deny"],
      ],
    );
    await assert.rejects(
      promisify(execFile)(process.execPath, [...CLI_ARGS, "audit", "export", "--store", `sqlite:${dbPath}`, "--since", "yesterday"], {
        cwd: ROOT,
        timeout: 90_000,
      }),
      /--since "yesterday" is neither/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
