/**
 * Governance decision cost (issue 24): what deciding each tool call costs,
 * rules only and through Cedar, as ratios against no policy, in one run
 * (`node --import tsx bench/governance-cost.bench.ts`).
 *
 * Two measures:
 * - decision alone: Governance.authorize() (the decision, its record
 *   appended to a memory store, the log line at silent level) in this
 *   process, µs per decision, for ten ordered rules (the ninth matches) and
 *   for Cedar (rules fall through to `policy`; four policies, one forbid);
 * - per call: three in-process gateways (startInProcessGateway: the
 *   server-everything upstream linked in, HTTP on loopback, memory store),
 *   governance off / rules / Cedar, each sent `tools/call echo` on the
 *   transparent face, interleaved (each call to the next gateway, the order
 *   reversed every round); the figure is wall time per call from the client,
 *   and each round's ratio to "off"; the median ratio over rounds is reported
 *   (a shared 2-core machine moves single rounds, not the median). A
 *   "control" gateway (off again) gives the run's noise floor.
 *
 * Options (env): BENCH_CALLS=1500 calls per gateway (after 50 warm-up),
 * BENCH_ROUNDS=10, BENCH_DECISIONS=5000.
 * Output: a markdown report on stdout.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { makePrincipal } from "../src/auth/principal.js";
import { systemClock, ulidGenerator } from "../src/clock.js";
import { governanceSchema } from "../src/config/governance.js";
import { Governance } from "../src/governance/governance.js";
import { silentLogger } from "../src/logging.js";
import { openStore } from "../src/store/open.js";
import { startInProcessGateway } from "../test/helpers/in-process.js";
import type { TestGateway } from "../test/helpers/gateway.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 1500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const DECISIONS = Number(process.env.BENCH_DECISIONS ?? 5000);

const dir = mkdtempSync(path.join(os.tmpdir(), "emceepee-governance-bench-"));
const policyFile = path.join(dir, "policy.cedar");
writeFileSync(
  policyFile,
  `permit(principal, action == Action::"call_tool", resource) when { resource.name == "echo" };
permit(principal, action == Action::"call_tool", resource) when { principal.claims has groups && principal.claims.groups.contains("admins") };
permit(principal, action == Action::"call_tool", resource) when { resource.name like "get_*" };
forbid(principal, action, resource) when { context.arguments has path && context.arguments.path like "/secrets/*" };
`,
);
/** Ten rules, the ninth matches echo: a realistic walk through the list. */
const rules = (last: "allow" | "policy") => [
  ...Array.from({ length: 8 }, (_, i) => ({ id: `r${i}`, server: "other*", tool: `t${i}_*`, action: "deny" as const })),
  { id: "echo", server: "*", tool: "echo", action: last },
  { id: "rest", action: "deny" as const },
];
const VARIANTS = {
  off: { profile: "off" },
  control: { profile: "off" },
  rules: { profile: "enforce", rules: rules("allow"), defaultAction: "deny" },
  cedar: { profile: "enforce", rules: rules("policy"), defaultAction: "deny", cedar: { policyFile } },
} as const;
type Variant = keyof typeof VARIANTS;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function decisionAlone(variant: "rules" | "cedar"): Promise<number> {
  const store = await openStore({ kind: "memory" }, { clock: systemClock });
  const settings = governanceSchema.parse({ ...VARIANTS[variant], audit: { maxRecords: 1000 } });
  const g = new Governance(settings, { clock: systemClock, newId: ulidGenerator(), logger: silentLogger, store: () => store });
  await g.start();
  const principal = makePrincipal({ issuer: "https://idp.example", subject: "alice", scopes: [], claims: { groups: ["staff"] } });
  const call = { principal, face: "server", sessionId: "S1", server: "everything", tool: "echo", args: { message: "hello" } };
  for (let i = 0; i < 200; i++) await g.authorize(call);
  const t0 = performance.now();
  for (let i = 0; i < DECISIONS; i++) await g.authorize(call);
  const us = ((performance.now() - t0) * 1000) / DECISIONS;
  await store.close();
  return us;
}

async function main(): Promise<void> {
  const alone = { rules: await decisionAlone("rules"), cedar: await decisionAlone("cedar") };
  process.stderr.write(`decision alone: rules ${alone.rules.toFixed(1)} µs, cedar ${alone.cedar.toFixed(1)} µs\n`);

  const names = Object.keys(VARIANTS) as Variant[];
  const gateways = new Map<Variant, TestGateway>();
  const clients = new Map<Variant, Client>();
  try {
    for (const v of names) {
      const gw = await startInProcessGateway({ gateway: { governance: VARIANTS[v] } });
      gateways.set(v, gw);
      const client = new Client({ name: `bench-${v}`, version: "0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"))));
      clients.set(v, client);
    }
    const once = async (v: Variant) => {
      const res = await clients.get(v)!.callTool({ name: "echo", arguments: { message: "hello" } });
      if (res.isError) throw new Error(`${v}: the call failed: ${JSON.stringify(res.content)}`);
    };
    for (let i = 0; i < 50; i++) for (const v of names) await once(v);
    const perRound = Math.ceil(CALLS / ROUNDS);
    const ms = new Map<Variant, number[]>(names.map((v) => [v, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? [...names].reverse() : names;
      const spent = new Map<Variant, number>(names.map((v) => [v, 0]));
      for (let i = 0; i < perRound; i++) {
        for (const v of order) {
          const t0 = performance.now();
          await once(v);
          spent.set(v, spent.get(v)! + performance.now() - t0);
        }
      }
      for (const v of names) ms.get(v)!.push(spent.get(v)! / perRound);
      process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
    }
    const off = ms.get("off")!;
    const rows = names.map((v) => {
      const own = ms.get(v)!;
      const ratios = own.map((x, i) => x / off[i]!);
      const mean = own.reduce((a, b) => a + b, 0) / own.length;
      return `| ${v} | ${(mean * 1000).toFixed(0)} | ${median(ratios).toFixed(3)} | ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)} |`;
    });
    const offUs = (off.reduce((a, b) => a + b, 0) / off.length) * 1000;
    const cpu = os.cpus();
    process.stdout.write(
      [
        `## Governance decision cost (${new Date().toISOString().slice(0, 10)}, ${cpu.length} × ${cpu[0]?.model.trim() ?? "cpu"}, Node ${process.versions.node})`,
        "",
        `Decision alone (Governance.authorize, record appended to a memory store; ${DECISIONS} decisions):`,
        "",
        "| policy | µs per decision | share of an ungoverned call |",
        "| --- | ---: | ---: |",
        `| rules only (10 rules, the 9th matches) | ${alone.rules.toFixed(1)} | ${((alone.rules / offUs) * 100).toFixed(1)} % |`,
        `| Cedar (rules fall through to 4 policies) | ${alone.cedar.toFixed(1)} | ${((alone.cedar / offUs) * 100).toFixed(1)} % |`,
        "",
        `Per call (transparent face, tools/call echo, in-process gateways over loopback HTTP; ${perRound * ROUNDS} calls each in ${ROUNDS} interleaved rounds):`,
        "",
        "| gateway | µs per call (mean) | ratio to off (median of rounds) | range over rounds |",
        "| --- | ---: | ---: | --- |",
        ...rows,
        "",
      ].join("\n"),
    );
  } finally {
    for (const c of clients.values()) await c.close().catch(() => undefined);
    for (const gw of gateways.values()) await gw.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
