/**
 * The operator's kit in docs/ops matches the gateway (issue 28): every metric
 * and label the Grafana dashboard's and the alert rules' PromQL uses exists in
 * a real `/metrics` scrape of `emceepee serve` after a few calls (allowed,
 * denied, rate-limited, a tool error, an upstream that crashes); the rules pass
 * `promtool check rules` and their unit tests (`promtool test rules`), the
 * dashboard's expressions parse as PromQL (promtool, as recording rules); the
 * systemd unit passes `systemd-analyze verify`. Without CI=true a missing
 * promtool or systemd-analyze skips its case (saying so); with it, it fails.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { GatewayMetrics } from "../../src/observability/metrics.js";
import { timedStore } from "../../src/observability/store-timing.js";
import { openStore } from "../../src/store/open.js";
import { LATEST_VERSION } from "../../src/store/sqlite/migrations.js";
import { FIXTURES, ROOT, call, connectClient, everythingStdio } from "../helpers/gateway.js";
import { pollFor, startCliServe, stopChild, type RunningCli } from "../helpers/core-extra.js";

const run = promisify(execFile);
const OPS = path.join(ROOT, "docs/ops");
const SLOW = { timeout: 300_000 };
/** gateway.upstream.maxChildProcesses in the config below. */
const MAX_CHILDREN = 17;

// --- the Prometheus text format and PromQL, read as far as the check needs ---

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseScrape(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

interface Matcher {
  label: string;
  op: string;
  value: string;
}

interface Selector {
  metric: string;
  matchers: Matcher[];
}

interface ParsedExpr {
  selectors: Selector[];
  /** Labels named in by/without/on/ignoring/group_left/group_right, and label_values()'s second argument. */
  grouping: string[];
}

/** PromQL functions, aggregations and keywords: identifiers that are not metric names. */
const NOT_METRICS = new Set([
  "sum",
  "min",
  "max",
  "avg",
  "count",
  "stddev",
  "stdvar",
  "topk",
  "bottomk",
  "quantile",
  "count_values",
  "group",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "and",
  "or",
  "unless",
  "bool",
  "offset",
  "rate",
  "irate",
  "increase",
  "delta",
  "idelta",
  "deriv",
  "histogram_quantile",
  "abs",
  "clamp_min",
  "clamp_max",
  "vector",
  "scalar",
  "time",
  "label_values",
  "humanize",
  "inf",
  "nan",
]);

/**
 * The metric selectors (with their label matchers) and grouping labels of a
 * PromQL expression or a Grafana `label_values(selector, label)` query. Not a
 * full parser: it reads selectors `name{l op "v", …}`, `[range]`s, grouping
 * clauses and function calls, which is all the kit's expressions use.
 */
function parsePromQL(input: string): ParsedExpr {
  let expr = input.replace(/\$__rate_interval|\$__interval|\$__range/g, "5m");
  const grouping: string[] = [];
  const labelValues = /^\s*label_values\((.*),\s*(\w+)\s*\)\s*$/.exec(expr);
  if (labelValues) {
    expr = labelValues[1]!;
    grouping.push(labelValues[2]!);
  }
  for (const g of expr.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g)) {
    grouping.push(
      ...g[1]!
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    );
  }
  expr = expr.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const selectors: Selector[] = [];
  const token = /([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?|\{[^}]*\}|\[[^\]]*\]|"(?:[^"\\]|\\.)*"|\d+(?:\.\d+)?(?:e[+-]?\d+)?|./gy;
  for (const m of expr.matchAll(token)) {
    const name = m[1];
    if (name === undefined) continue;
    const rest = expr.slice(m.index + m[0].length);
    if (NOT_METRICS.has(name.toLowerCase()) || (/^\s*\(/.test(rest) && !m[2])) continue;
    const matchers = [...(m[2] ?? "").matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)].map((x) => ({ label: x[1]!, op: x[2]!, value: x[3]! }));
    selectors.push({ metric: name, matchers });
  }
  return { selectors, grouping };
}

/** Labels Prometheus adds to every target's series (and the histogram bucket bound). */
const TARGET_LABELS = new Set(["job", "instance"]);
/** Series Prometheus makes itself for each target, not in a scrape. */
const SYNTHETIC = new Set(["up"]);

/** What in `expr` (from `where`) the scrape lacks: metric names, labels, `=` values. */
function missingFrom(samples: Sample[], expr: string, where: string): string[] {
  const { selectors, grouping } = parsePromQL(expr);
  const problems: string[] = [];
  if (selectors.length === 0) problems.push(`${where}: no metric found in ${expr}`);
  const used = selectors.filter((s) => !SYNTHETIC.has(s.metric));
  for (const { metric, matchers } of used) {
    const of = samples.filter((s) => s.name === metric);
    if (of.length === 0) {
      problems.push(`${where}: metric ${metric} is not in the scrape`);
      continue;
    }
    for (const { label, op, value } of matchers) {
      if (TARGET_LABELS.has(label)) continue;
      if (!of.some((s) => label in s.labels)) problems.push(`${where}: ${metric} has no label ${label}`);
      else if (op === "=" && value !== "" && !of.some((s) => s.labels[label] === value))
        problems.push(`${where}: ${metric} has no series with ${label}="${value}"`);
    }
  }
  for (const label of grouping) {
    if (TARGET_LABELS.has(label)) continue;
    if (label === "le" && used.some((s) => s.metric.endsWith("_bucket"))) continue;
    if (!used.some((s) => samples.some((x) => x.name === s.metric && label in x.labels)))
      problems.push(`${where}: none of ${used.map((s) => s.metric).join(", ")} has the label ${label} it groups or matches by`);
  }
  return problems;
}

// --- the kit's files ---

interface Dashboard {
  templating: { list: Array<{ name: string; type: string; query?: string | { query: string } }> };
  panels: Array<{ title: string; type: string; targets?: Array<{ expr: string }> }>;
}

async function dashboardExprs(): Promise<Array<{ where: string; expr: string }>> {
  const dash = JSON.parse(await readFile(path.join(OPS, "grafana-dashboard.json"), "utf8")) as Dashboard;
  const out: Array<{ where: string; expr: string }> = [];
  for (const v of dash.templating.list) {
    if (v.type !== "query" || v.query === undefined) continue;
    out.push({ where: `dashboard variable ${v.name}`, expr: typeof v.query === "string" ? v.query : v.query.query });
  }
  for (const p of dash.panels) for (const t of p.targets ?? []) out.push({ where: `dashboard panel "${p.title}"`, expr: t.expr });
  return out;
}

/** The `expr:` values of alerts.yml (block scalars included), without a YAML parser: the file's layout is ours. */
async function ruleExprs(): Promise<Array<{ where: string; expr: string }>> {
  const lines = (await readFile(path.join(OPS, "alerts.yml"), "utf8")).split("\n");
  const out: Array<{ where: string; expr: string }> = [];
  let alert = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const a = /^\s*- alert: (\S+)/.exec(line);
    if (a) alert = a[1]!;
    const e = /^(\s*)expr:\s*(.*)$/.exec(line);
    if (!e) continue;
    let expr = e[2]!;
    if (expr === "|") {
      const body: string[] = [];
      while (i + 1 < lines.length && (lines[i + 1]!.trim() === "" || lines[i + 1]!.search(/\S/) > e[1]!.length)) body.push(lines[++i]!.trim());
      expr = body.join(" ");
    }
    out.push({ where: `alert ${alert}`, expr });
  }
  return out;
}

/** A tool CI has (.ci/run installs it); outside CI its absence skips the case with a note. */
function tool(name: string, t: { skip: (message: string) => void }): boolean {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) if (dir && existsSync(path.join(dir, name))) return true;
  if (process.env.CI === "true") assert.fail(`${name} is not installed, but CI=true requires it (.ci/run installs it)`);
  t.skip(`${name} is not installed: skipped outside CI (Debian: apt-get install ${name === "promtool" ? "prometheus" : "systemd"})`);
  return false;
}

// --- one gateway, driven and scraped once ---

let tmp: string;
let served: RunningCli | undefined;
let meta: Client | undefined;
let samples: Sample[] = [];

before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-ops-kit-"));
  const config = {
    mcpServers: {
      everything: everythingStdio(),
      // Answers initialize, then exits: a connection that drops (emceepee_upstream_disconnects_total, status error/disconnected).
      crashy: { command: process.execPath, args: [path.join(FIXTURES, "crashy-server.mjs"), "exit-after-initialize"] },
    },
    gateway: {
      logLevel: "warn",
      store: { kind: "sqlite", path: path.join(tmp, "state.db") },
      upstream: { warmPool: 0, maxChildProcesses: MAX_CHILDREN },
      governance: {
        profile: "enforce",
        rules: [{ id: "no-secret-echo", server: "everything", tool: "echo", arguments: [{ pointer: "/message", matches: "secret" }], action: "deny" }],
      },
      rateLimits: [{ name: "one-sum", scope: "tool", server: "everything", tool: "get-sum", capacity: 1, refillPerMinute: 0.01 }],
    },
  };
  const file = path.join(tmp, "config.json");
  await writeFile(file, JSON.stringify(config));
  served = await startCliServe(ROOT, ["--config", file, "--port", "0", "--no-upstream-check"]);
  meta = await connectClient(served.url);
  const calls: Array<[string, Record<string, unknown>]> = [
    ["everything", { tool: "echo", args: { message: "hi" } }], // allowed
    ["everything", { tool: "echo", args: { message: "a secret" } }], // denied by the rule
    ["everything", { tool: "get-sum", args: { a: 1, b: 2 } }], // takes the one token
    ["everything", { tool: "get-sum", args: { a: 1, b: 2 } }], // rate-limited
    ["everything", { tool: "echo", args: {} }], // the upstream answers isError (tool_error)
    ["crashy", { tool: "anything", args: {} }], // connects; the server exits after initialize
    ["everything", { tool: "trigger-long-running-operation", args: { duration: 5, steps: 2 }, timeout_ms: 100 }], // promoted to a task
  ];
  for (const [server, c] of calls) await call(meta, "execute_tool", { server, ...c }).catch(() => undefined);
  await call(meta, "list_servers");
  // Wait for what the calls cause to show (the crash is asynchronous), then keep that scrape.
  samples = await pollFor(
    async () => {
      const res = await fetch(served!.url.replace(/\/mcp$/, "/metrics"));
      const got = parseScrape(await res.text());
      const has = (name: string, labels: Record<string, string>) =>
        got.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
      return has("emceepee_upstream_disconnects_total", { upstream: "crashy" }) &&
        has("emceepee_rate_limited_total", {}) &&
        has("emceepee_governance_decisions_total", { outcome: "deny" }) &&
        has("emceepee_tasks", { kind: "promoted" }) &&
        has("mcp_client_operation_duration_seconds_count", { upstream: "everything", error_type: "tool_error" })
        ? got
        : undefined;
    },
    "the scrape to show the calls' effects (a crashy disconnect, a rate-limited call, a denial, a task, a tool error)",
    90_000,
    250,
  );
});

after(async () => {
  await meta?.close().catch(() => undefined);
  if (served) await stopChild(served.child);
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe("docs/ops against a real scrape", () => {
  test("the build, the store and the process cap are on /metrics", () => {
    const one = (name: string) => samples.filter((s) => s.name === name);
    const build = one("emceepee_build_info");
    assert.equal(build.length, 1, "one emceepee_build_info series");
    const { version } = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string };
    assert.deepEqual(build[0], { name: "emceepee_build_info", labels: { version, schema: String(LATEST_VERSION), node: process.versions.node }, value: 1 });
    assert.deepEqual(one("emceepee_store_up"), [{ name: "emceepee_store_up", labels: {}, value: 1 }]);
    assert.deepEqual(one("emceepee_stdio_child_processes_limit"), [{ name: "emceepee_stdio_child_processes_limit", labels: {}, value: MAX_CHILDREN }]);
    assert.ok(
      one("emceepee_store_errors_total").some((s) => s.labels.store === "sqlite" && s.labels.operation === "sessions.put" && s.value === 0),
      "each store operation's error series is there from its first call",
    );
  });

  test("every metric and label the dashboard uses is in the scrape", async () => {
    const problems = (await dashboardExprs()).flatMap(({ where, expr }) => missingFrom(samples, expr, where));
    assert.deepEqual(problems, []);
  });

  test("every metric and label the alert rules use is in the scrape", async () => {
    const exprs = await ruleExprs();
    assert.ok(exprs.length >= 10, `alerts.yml has ${exprs.length} expressions`);
    const problems = exprs.flatMap(({ where, expr }) => missingFrom(samples, expr, where));
    assert.deepEqual(problems, []);
  });

  test("the check itself sees a name, a label and a value that are not there", () => {
    assert.deepEqual(missingFrom(samples, "sum by (upstream) (rate(emceepee_upstream_disconects_total[5m]))", "typo"), [
      "typo: metric emceepee_upstream_disconects_total is not in the scrape",
      "typo: none of emceepee_upstream_disconects_total has the label upstream it groups or matches by",
    ]);
    assert.deepEqual(missingFrom(samples, 'emceepee_sessions{kind="meta"}', "label"), ["label: emceepee_sessions has no label kind"]);
    assert.deepEqual(missingFrom(samples, 'emceepee_upstream_connections{status="up"}', "value"), [
      'value: emceepee_upstream_connections has no series with status="up"',
    ]);
  });
});

describe("promtool and systemd-analyze", () => {
  test("the alert rules pass promtool check rules and their unit tests", SLOW, async (t) => {
    if (!tool("promtool", t)) return;
    const checked = await run("promtool", ["check", "rules", path.join(OPS, "alerts.yml")]);
    assert.match(checked.stdout, /SUCCESS: \d+ rules found/);
    const tested = await run("promtool", ["test", "rules", "alerts.test.yml"], { cwd: OPS });
    assert.match(tested.stdout, /SUCCESS/);
  });

  test("the dashboard's expressions are valid PromQL (promtool, as recording rules)", SLOW, async (t) => {
    if (!tool("promtool", t)) return;
    const exprs = await dashboardExprs();
    const rules = exprs
      .filter(({ expr }) => !expr.startsWith("label_values("))
      .map(({ expr }, i) => {
        const plain = expr.replace(/\$__rate_interval/g, "5m").replace(/\$(job|instance)/g, ".*");
        return `      - record: dashboard:expr_${i}\n        expr: ${JSON.stringify(plain)}\n`;
      });
    const file = path.join(tmp, "dashboard-rules.yml");
    await writeFile(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join("")}`);
    const checked = await run("promtool", ["check", "rules", file]);
    assert.match(checked.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
  });

  test("the systemd unit passes systemd-analyze verify", SLOW, async (t) => {
    if (!tool("systemd-analyze", t)) return;
    // verify checks that ExecStart's program exists and is executable: a copy names this Node binary instead of
    // /usr/local/bin/emceepee (which an install provides), everything else as shipped.
    const unit = await readFile(path.join(OPS, "emceepee.service"), "utf8");
    assert.match(unit, /^ExecStart=\/usr\/local\/bin\/emceepee serve --config \/etc\/emceepee\/config\.json$/m);
    const dir = await mkdtemp(path.join(tmp, "unit-"));
    const copy = path.join(dir, "emceepee.service");
    await writeFile(copy, unit.replace(/^ExecStart=\/usr\/local\/bin\/emceepee /m, `ExecStart=${process.execPath} `));
    const verified = await run("systemd-analyze", ["verify", copy]).catch((err: { stderr?: string; message: string }) => ({
      stdout: "",
      stderr: err.stderr ?? err.message,
    }));
    assert.equal(verified.stderr.trim(), "", "systemd-analyze verify reports nothing");
    for (const line of [
      "DynamicUser=yes",
      "StateDirectory=emceepee",
      "ProtectSystem=strict",
      "ProtectHome=yes",
      "NoNewPrivileges=yes",
      "PrivateTmp=yes",
      "ExecReload=/bin/kill -HUP $MAINPID",
    ])
      assert.ok(unit.split("\n").includes(line), `the unit has ${line}`);
    // Its exposure as systemd rates it (0 best, 10 worst): "OK" is below 2 on systemd 252.
    const security = await run("systemd-analyze", ["security", "--offline=true", copy]).catch(() => undefined);
    if (security) {
      const level = /Overall exposure level for emceepee\.service: ([\d.]+)/.exec(security.stdout);
      assert.ok(level && Number(level[1]) < 3, `exposure ${level?.[1]}`);
    }
  });
});

describe("store errors and store health", () => {
  test("a failing store call counts in emceepee_store_errors_total and a closed store reads 0 in emceepee_store_up", async () => {
    const metrics = new GatewayMetrics();
    const raw = await openStore({ kind: "memory" });
    metrics.setSources({
      sessionsByFace: () => ({}),
      upstreamConnections: () => [],
      stdioChildren: () => 0,
      pendingClientRequests: () => [],
      tasks: () => Promise.resolve([]),
      storeHealthy: () => raw.healthy(),
    });
    const store = timedStore(raw, metrics);
    await store.tasks.get("t-1");
    let text = (await metrics.scrape()).body;
    assert.match(text, /^emceepee_store_errors_total\{store="memory",operation="tasks\.get"\} 0$/m);
    assert.match(text, /^emceepee_store_up 1$/m);
    await raw.close();
    await assert.rejects(store.tasks.get("t-1"));
    text = (await metrics.scrape()).body;
    assert.match(text, /^emceepee_store_errors_total\{store="memory",operation="tasks\.get"\} 1$/m);
    assert.match(text, /^emceepee_store_up 0$/m);
  });
});
