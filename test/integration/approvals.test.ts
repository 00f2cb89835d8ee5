/**
 * Human approval as a durable task (issue 24, docs/adr/0025-approvals.md), in
 * process: one gateway with server-everything in process and a real SQLite
 * store. A call a rule sends to `approve` becomes a task at once
 * (execute_tool: a promoted task; a task-augmented tools/call:
 * CreateTaskResult, input_required "Awaiting approval"); an approval runs the
 * call, a rejection fails the task with the reason; a plain call is held and
 * withdrawn after holdMs naming the approval; a requester cannot approve
 * their own call; arguments changed after the request are refused; an
 * approval nobody decides expires; post-approval revalidation fails a call
 * the policy now denies; cancel withdraws a pending approval; each event is a
 * decision record.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, GetTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { OPERATOR } from "../../src/auth/principal.js";
import { parseConfig } from "../../src/config/load.js";
import type { ApprovalRecord } from "../../src/store/contracts.js";
import { openSqliteDatabase } from "../../src/store/sqlite/driver.js";
import { block, call, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { waitFor } from "../helpers/tasks.js";

const TOKEN = "approvals-test-token-0123456789";
let dir: string;
let gw: TestGateway;
const clients: Client[] = [];

const rules = (echo: "approve" | "deny") => [
  { id: "echo-needs-approval", server: "everything", tool: "echo", action: echo },
  { id: "sum-needs-approval", server: "everything", tool: "get-sum", action: "approve" },
  { id: "research-needs-approval", server: "everything", tool: "simulate-research-query", action: "approve" },
];
/** What the webhooks received: a real HTTP server on loopback. */
const hooked: Array<{ path: string; body: Record<string, unknown> }> = [];
const hooks = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c: Buffer) => (body += c.toString("utf8")));
  req.on("end", () => {
    hooked.push({ path: req.url ?? "", body: JSON.parse(body) as Record<string, unknown> });
    res.writeHead(req.url === "/broken" ? 500 : 204).end();
  });
});
let hooksBase = "";

const governance = (echo: "approve" | "deny", approvals: Record<string, unknown> = {}) => ({
  profile: "enforce",
  rules: rules(echo),
  audit: { storeArguments: false },
  approvals: {
    holdMs: 1_500,
    keepAliveMs: 200,
    pollMs: 100,
    ttlMs: 600_000,
    // A JSON hook, a Slack one, one that answers 500 and one nobody listens on: the last two only log.
    webhooks: [
      { url: `${hooksBase}/json`, format: "json" },
      { url: `${hooksBase}/slack`, format: "slack" },
      { url: `${hooksBase}/broken` },
      { url: "http://127.0.0.1:9/closed" },
    ],
    consoleUrl: "https://gw.example.com",
    ...approvals,
  },
});

before(async () => {
  await new Promise<void>((resolve) => hooks.listen(0, "127.0.0.1", resolve));
  hooksBase = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}`;
  dir = mkdtempSync(path.join(tmpdir(), "approvals-"));
  gw = await startInProcessGateway({
    mcpServers: { everything: inProcess("everything") },
    gateway: { token: TOKEN, store: { kind: "sqlite", path: path.join(dir, "state.db") }, governance: governance("approve") },
  });
});

after(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await gw.close();
  hooks.close();
  rmSync(dir, { recursive: true, force: true });
});

async function connect(face = ""): Promise<Client> {
  const client = new Client({ name: "approvals-test", version: "1.0.0" });
  const url = new URL(gw.url.replace(/\/mcp$/, `${face}/mcp`));
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
  clients.push(client);
  return client;
}

const ctx = () => gw.gateway.context;
const records = () => ctx().approvalRecords!;
/** A second person: decides as someone other than the requester (the static token's operator). */
const approver = { name: "bob", principal: undefined };

const approvalOfTask = (taskId: string) =>
  waitFor(async () => (await ctx().store.approvals.list()).find((r) => r.taskId === taskId), `the approval of task ${taskId}`);

test("execute_tool: a promoted task, input_required 'Awaiting approval'; approved in the console it runs and completes", async () => {
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "hello approval" } });
  const taskId = block<string>(res, "task_id")!;
  const approvalId = block<{ id: string }>(res, "approval")!.id;
  assert.ok(taskId && approvalId, JSON.stringify(res));
  const task = block<Record<string, unknown>>(await call(meta, "get_task", { task_id: taskId }), "task")!;
  assert.equal(task.status, "input_required", JSON.stringify(task));
  assert.match(String(task.status_message ?? task.statusMessage), /Awaiting approval/);
  assert.equal(task.ttl_ms, 300_000 + 600_000, "the task lives through the approval's ttlMs, then the call's default TTL");
  const a = (await records().get(approvalId))!;
  assert.equal(a.state, "pending");
  assert.equal(a.server, "everything");
  assert.equal(a.tool, "echo");
  assert.deepEqual(a.arguments, { message: "hello approval" });
  assert.equal(a.ruleId, "echo-needs-approval");
  assert.equal(a.requester?.subject, OPERATOR.subject);
  await records().decide(approvalId, approver, "approve", "looks fine");
  ctx().approvals!.poke();
  const result = await call(meta, "get_task_result", { task_id: taskId, timeout_ms: 30_000 });
  assert.match(JSON.stringify(result), /hello approval/);
  const outcomes = (await ctx().store.decisions.list()).filter((d) => d.tool === "echo").map((d) => d.outcome);
  assert.deepEqual(outcomes.slice(-2), ["approval_required", "approval_approved"]);
  const after = (await records().get(approvalId))!;
  assert.equal(after.state, "approved");
  assert.equal(after.decidedBy, "bob");
  assert.ok(after.claimedAt !== undefined);
  assert.equal(after.arguments, undefined, "arguments are dropped once the call ran (audit.storeArguments is false)");
});

test("task-augmented tools/call: CreateTaskResult input_required at once; a rejection fails the task with the reason", async () => {
  const single = await connect("/servers/everything");
  const created = await single.request({ method: "tools/call", params: { name: "echo", arguments: { message: "no way" } } }, CreateTaskResultSchema, {
    task: { ttl: 120_000 },
    timeout: 60_000,
  });
  assert.equal(created.task.status, "input_required");
  assert.match(created.task.statusMessage ?? "", /Awaiting approval/);
  const a = await approvalOfTask(created.task.taskId);
  await records().decide(a.id, approver, "reject", "not on a Friday");
  ctx().approvals!.poke();
  const failed = await waitFor(async () => {
    const t = await single.request({ method: "tasks/get", params: { taskId: created.task.taskId } }, GetTaskResultSchema);
    return t.status === "failed" ? t : undefined;
  }, "the task to fail");
  assert.match(failed.statusMessage ?? "", /rejected by bob: not on a Friday/);
  await assert.rejects(
    single.request({ method: "tasks/result", params: { taskId: created.task.taskId } }, CallToolResultSchema),
    /rejected by bob: not on a Friday/,
  );
  assert.equal((await ctx().store.decisions.list()).at(-1)?.outcome, "approval_rejected");
});

test("a plain tools/call is held with keep-alives, then fails naming the approval, which is withdrawn", async () => {
  const single = await connect("/servers/everything");
  const progress: string[] = [];
  const err = await single
    .callTool({ name: "echo", arguments: { message: "held" } }, CallToolResultSchema, {
      timeout: 60_000,
      onprogress: (p) => progress.push(p.message ?? ""),
    })
    .then(
      (r) => assert.fail(`expected a refusal, got ${JSON.stringify(r)}`),
      (e: unknown) => e as Error,
    );
  const id = /approval (\S+),/.exec(err.message)?.[1];
  assert.ok(id, err.message);
  assert.match(err.message, /EMCP_APPROVAL_TIMEOUT|nobody decided within 1500ms/);
  assert.ok(
    progress.some((m) => m.includes(`approval ${id}`)),
    `keep-alives: ${JSON.stringify(progress)}`,
  );
  assert.equal((await records().get(id))!.state, "cancelled");
});

test("a plain tools/call approved while held returns the tool's result", async () => {
  const single = await connect("/servers/everything");
  const pending = single.callTool({ name: "echo", arguments: { message: "held then approved" } }, CallToolResultSchema, { timeout: 60_000 });
  const a = await waitFor(
    async () => (await ctx().store.approvals.list({ states: ["pending"] })).find((r) => r.arguments?.message === "held then approved"),
    "the held call's approval",
  );
  await records().decide(a.id, approver, "approve", "");
  ctx().approvals!.poke();
  assert.match(JSON.stringify(await pending), /held then approved/);
});

test("the requester cannot approve their own call; another approver can", async () => {
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "get-sum", args: { a: 1, b: 2 } });
  const id = block<{ id: string }>(res, "approval")!.id;
  await assert.rejects(records().decide(id, { name: "operator", principal: OPERATOR }, "approve", "me"), /EMCP_FORBIDDEN|asked for this call yourself/);
  assert.equal((await records().get(id))!.state, "pending");
  await records().decide(id, approver, "approve", "");
  await assert.rejects(records().decide(id, approver, "reject", "too late"), /already approved/);
});

test("arguments changed after the request are refused: the task fails, nothing runs", async () => {
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "original" } });
  const taskId = block<string>(res, "task_id")!;
  const id = block<{ id: string }>(res, "approval")!.id;
  // Someone with write access to the store changes the task's arguments.
  const db = openSqliteDatabase(path.join(dir, "state.db"));
  try {
    db.prepare("UPDATE tasks SET record = json_set(record, '$.toolArgs.message', 'tampered') WHERE task_id = ?").run(taskId);
  } finally {
    db.close();
  }
  await records().decide(id, approver, "approve", "");
  ctx().approvals!.poke();
  const out = await call(meta, "get_task_result", { task_id: taskId, timeout_ms: 30_000 }).then(
    (r) => JSON.stringify(r),
    (e: unknown) => String(e),
  );
  assert.match(out, /other arguments than the task's/);
  assert.doesNotMatch(out, /Echo: tampered/);
});

test("post-approval revalidation: a policy that now denies fails the approved call with that reason", async () => {
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "revalidate me" } });
  const taskId = block<string>(res, "task_id")!;
  const id = block<{ id: string }>(res, "approval")!.id;
  const next = parseConfig({ mcpServers: {}, gateway: { governance: governance("deny") } }).gateway.governance;
  assert.deepEqual((await ctx().governance!.reload(next)).applied, true);
  try {
    await records().decide(id, approver, "approve", "");
    ctx().approvals!.poke();
    const out = await call(meta, "get_task_result", { task_id: taskId, timeout_ms: 30_000 }).then(
      (r) => JSON.stringify(r),
      (e: unknown) => String(e),
    );
    assert.match(out, /does not allow calling 'echo'.*echo-needs-approval/);
  } finally {
    await ctx().governance!.reload(parseConfig({ mcpServers: {}, gateway: { governance: governance("approve") } }).gateway.governance);
  }
});

test("cancel_task withdraws a pending approval", async () => {
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "never mind" } });
  const taskId = block<string>(res, "task_id")!;
  const id = block<{ id: string }>(res, "approval")!.id;
  await call(meta, "cancel_task", { task_id: taskId });
  const a = await waitFor(async () => {
    const r = await records().get(id);
    return r?.state === "cancelled" ? r : undefined;
  }, "the approval to be withdrawn");
  assert.equal(a.decidedBy, "requester");
  await assert.rejects(records().decide(id, approver, "approve", ""), /EMCP_APPROVAL_DECIDED|already cancelled/);
});

test("an approval nobody decides expires: the task fails 'approval expired'", async () => {
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "too slow" } });
  const taskId = block<string>(res, "task_id")!;
  const id = block<{ id: string }>(res, "approval")!.id;
  // Expiry by the stored expiresAt: moved to now rather than waiting out ttlMs.
  const db = openSqliteDatabase(path.join(dir, "state.db"));
  try {
    db.prepare("UPDATE approvals SET record = json_set(record, '$.expiresAt', ?) WHERE id = ?").run(Date.now(), id);
  } finally {
    db.close();
  }
  const out = await call(meta, "get_task_result", { task_id: taskId, timeout_ms: 30_000 }).then(
    (r) => JSON.stringify(r),
    (e: unknown) => String(e),
  );
  assert.match(out, /approval expired/);
  const a: ApprovalRecord = (await records().get(id))!;
  assert.equal(a.state, "expired");
  assert.equal(a.decidedBy, "expiry");
  assert.ok((await ctx().store.decisions.list()).some((d) => d.outcome === "approval_expired" && d.approval?.id === id));
});

test("webhooks are told of each new approval (JSON and Slack bodies, a console link, no arguments); a failing one blocks nothing", async () => {
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "hook me", secret: "s3cr3t" } });
  const id = block<{ id: string }>(res, "approval")!.id;
  const json = await waitFor(() => hooked.find((h) => h.path === "/json" && h.body.approvalId === id), "the JSON webhook");
  assert.equal(json.body.type, "approval_requested");
  assert.equal(json.body.server, "everything");
  assert.equal(json.body.tool, "echo");
  assert.equal(json.body.rule, "echo-needs-approval");
  assert.equal(json.body.link, `https://gw.example.com/console/approvals#${id}`);
  assert.equal(typeof json.body.argumentsDigest, "string");
  assert.equal("arguments" in json.body, false, "arguments only with audit.storeArguments");
  const slack = await waitFor(() => hooked.find((h) => h.path === "/slack" && String(h.body.text).includes(id)), "the Slack webhook");
  assert.match(String(slack.body.text), /wants to call `echo` on `everything` \(rule echo-needs-approval\)/);
  assert.doesNotMatch(JSON.stringify(hooked), /s3cr3t/);
  await waitFor(() => hooked.find((h) => h.path === "/broken"), "the broken webhook to be tried");
  await call(meta, "cancel_task", { task_id: block<string>(res, "task_id")! });
});

test("a tool the upstream runs as a task (taskSupport optional / required) runs as an upstream task once approved", async () => {
  const meta = await connect();
  const tools = block<Array<{ server: string; tools: Array<{ name: string; execution?: { taskSupport?: string } }> }>>(
    await call(meta, "list_tools", { server: "everything", name_contains: "simulate-research", limit: 10 }),
    "servers",
  );
  const support = tools?.flatMap((s) => s.tools).find((t) => t.name === "simulate-research-query")?.execution?.taskSupport;
  assert.equal(support, "required", "server-everything runs simulate-research-query only as a task: a plain call would fail");
  const res = await call(meta, "execute_tool", { server: "everything", tool: "simulate-research-query", args: { topic: "approvals" } });
  const taskId = block<string>(res, "task_id")!;
  const id = block<{ id: string }>(res, "approval")!.id;
  await records().decide(id, approver, "approve", "");
  ctx().approvals!.poke();
  const result = await call(meta, "get_task_result", { task_id: taskId, timeout_ms: 60_000 });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.match(JSON.stringify(result), /approvals/);
});
