/**
 * The audit trail as OpenTelemetry log records (issue 24): a gateway in
 * process whose OTEL_* environment names an OTLP endpoint sends each decision
 * record and console action to a real OTLP/HTTP receiver (a node:http server
 * here, decoding the JSON bodies the exporter sends): allowed, denied,
 * approval requested and approved (from the console's form), with the
 * principal's hash, server, tool, argument digest, policy version and
 * profile; the arguments only once audit.storeArguments is on (by reload).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { OPERATOR } from "../../src/auth/principal.js";
import { parseConfig } from "../../src/config/load.js";
import { block, call, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { waitFor } from "../helpers/tasks.js";

const TOKEN = "audit-otel-test-token-0123456789";

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
interface Received {
  eventName?: string;
  severityText?: string;
  body?: string;
  service?: string;
  attributes: Record<string, unknown>;
}

const value = (v: AnyValue): unknown => v.stringValue ?? v.intValue ?? v.boolValue ?? (v.arrayValue ? (v.arrayValue.values ?? []).map(value) : undefined);

/** What the receiver decoded, every record of every POST /v1/logs. */
const received: Received[] = [];
const rawBodies: string[] = [];
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    if (req.method === "POST" && req.url === "/v1/logs" && String(req.headers["content-type"]).includes("application/json")) {
      const text = Buffer.concat(chunks).toString("utf8");
      rawBodies.push(text);
      const body = JSON.parse(text) as {
        resourceLogs: Array<{
          resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
          scopeLogs: Array<{
            logRecords: Array<{ eventName?: string; severityText?: string; body?: AnyValue; attributes?: Array<{ key: string; value: AnyValue }> }>;
          }>;
        }>;
      };
      for (const rl of body.resourceLogs) {
        const service = rl.resource?.attributes?.find((a) => a.key === "service.name")?.value.stringValue;
        for (const sl of rl.scopeLogs)
          for (const r of sl.logRecords)
            received.push({
              ...(r.eventName !== undefined ? { eventName: r.eventName } : {}),
              ...(r.severityText !== undefined ? { severityText: r.severityText } : {}),
              ...(r.body?.stringValue !== undefined ? { body: r.body.stringValue } : {}),
              ...(service !== undefined ? { service } : {}),
              attributes: Object.fromEntries((r.attributes ?? []).map((a) => [a.key, value(a.value)])),
            });
      }
    }
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
});

let gw: TestGateway;
const clients: Client[] = [];

const governance = (storeArguments: boolean) => ({
  profile: "enforce",
  rules: [
    { id: "no-sums", server: "everything", tool: "get-sum", action: "deny" },
    { id: "echo-asks-a-person", server: "everything", tool: "echo", arguments: [{ pointer: "/message", matches: "^approve" }], action: "approve" },
  ],
  audit: { storeArguments },
  approvals: { allowSelfApproval: true, pollMs: 100 },
});

before(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  gw = await startInProcessGateway(
    { mcpServers: { everything: inProcess("everything") }, gateway: { token: TOKEN, governance: governance(false) } },
    // The base endpoint: the records go to its /v1/logs; a short batch delay so that they arrive while the test waits.
    { env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BLRP_SCHEDULE_DELAY: "100" } },
  );
});

after(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await gw?.close();
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
});

async function connect(face = ""): Promise<Client> {
  const client = new Client({ name: "audit-otel-test", version: "1.0.0" });
  const url = new URL(gw.url.replace(/\/mcp$/, `${face}/mcp`));
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
  clients.push(client);
  return client;
}

const decisions = () => received.filter((r) => r.eventName === "emceepee.governance.decision");
const decisionOf = (outcome: string, tool: string) =>
  waitFor(
    async () => decisions().find((r) => r.attributes["emceepee.decision.outcome"] === outcome && r.attributes["gen_ai.tool.name"] === tool),
    `a ${outcome} record of ${tool} at the OTLP receiver`,
  );

test("allowed, denied and approval decisions reach the OTLP/HTTP receiver as log records, with the console's decision", async () => {
  const single = await connect("/servers/everything");
  const ok = await single.callTool({ name: "echo", arguments: { message: "plain hello" } });
  assert.notEqual(ok.isError, true, JSON.stringify(ok));
  const denied = await single.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } }).then(
    (r) => JSON.stringify(r),
    (e: unknown) => String(e),
  );
  assert.match(denied, /no-sums/);

  // A call that needs a person: a promoted task on the meta face, approved with the console's own form.
  const meta = await connect();
  const res = await call(meta, "execute_tool", { server: "everything", tool: "echo", args: { message: "approve this one" } });
  const approvalId = block<{ id: string }>(res, "approval")!.id;
  const taskId = block<string>(res, "task_id")!;
  const base = new URL(gw.url).origin;
  const form = await fetch(`${base}/console/approvals/${encodeURIComponent(approvalId)}`, {
    method: "POST",
    redirect: "manual",
    headers: { authorization: `Bearer ${TOKEN}`, origin: base, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ action: "approve", reason: "checked it" }).toString(),
  });
  assert.equal(form.status, 303, await form.text());
  assert.match(JSON.stringify(await call(meta, "get_task_result", { task_id: taskId, timeout_ms: 30_000 })), /approve this one/);

  const allow = await decisionOf("allow", "echo");
  const deny = await decisionOf("deny", "get-sum");
  const asked = await decisionOf("approval_required", "echo");
  const approved = await decisionOf("approval_approved", "echo");
  const policyVersion = gw.gateway.context.governance!.policyVersion;
  for (const r of [allow, deny, asked, approved]) {
    assert.equal(r.service, "emceepee");
    assert.equal(r.attributes["enduser.pseudo.id"], OPERATOR.hash, "the principal by its hash, as traces name it");
    assert.equal(r.attributes["emceepee.server"], "everything");
    assert.match(String(r.attributes["emceepee.arguments.digest"]), /^[0-9a-f]{64}$/);
    assert.equal(r.attributes["emceepee.policy.version"], policyVersion);
    assert.equal(r.attributes["emceepee.governance.profile"], "enforce");
    assert.equal("emceepee.arguments" in r.attributes, false, "no arguments without audit.storeArguments");
  }
  assert.equal(deny.attributes["emceepee.rule.id"], "no-sums");
  assert.equal(deny.severityText, "WARN");
  assert.equal(allow.severityText, "INFO");
  assert.equal(asked.attributes["emceepee.rule.id"], "echo-asks-a-person");
  assert.equal(approved.attributes["emceepee.approval.id"], approvalId);
  assert.equal(approved.attributes["emceepee.approval.reason"], "checked it");
  assert.equal(asked.attributes["emceepee.arguments.digest"], approved.attributes["emceepee.arguments.digest"], "bound to the same arguments");

  const consoleAction = await waitFor(
    async () => received.find((r) => r.eventName === "emceepee.console.action" && r.attributes["emceepee.console.approval_id"] === approvalId),
    "the console's decision as a log record",
  );
  assert.equal(consoleAction.attributes["emceepee.console.action"], "decide");
  assert.equal(consoleAction.attributes["emceepee.console.state"], "approved");
  assert.equal(consoleAction.attributes["enduser.pseudo.id"], OPERATOR.hash);

  const everything = rawBodies.join("\n");
  assert.doesNotMatch(everything, /plain hello|approve this one/, "the arguments are not exported");
  assert.doesNotMatch(everything, new RegExp(TOKEN), "never the token");
});

test("with audit.storeArguments turned on by a reload, the records carry the arguments", async () => {
  const report = await gw.gateway.reload(
    parseConfig({ mcpServers: { everything: inProcess("everything") }, gateway: { token: TOKEN, governance: governance(true) } }),
  );
  assert.equal(report.governance?.applied, true, JSON.stringify(report));
  const single = await connect("/servers/everything");
  const ok = await single.callTool({ name: "echo", arguments: { message: "kept hello" } });
  assert.notEqual(ok.isError, true, JSON.stringify(ok));
  const kept = await waitFor(
    async () =>
      decisions().find((r) => typeof r.attributes["emceepee.arguments"] === "string" && String(r.attributes["emceepee.arguments"]).includes("kept hello")),
    "a record with its arguments",
  );
  assert.deepEqual(JSON.parse(String(kept.attributes["emceepee.arguments"])), { message: "kept hello" });
});
