/**
 * Limits per principal (design LM-8, ADR 0018 "Limits per principal") with
 * real parts: a real OpenID provider (oidc-provider, test/helpers/oidc.ts)
 * logs alice and bob in through the SDK's OAuth client, and the slow-server
 * fixture's tools, in process (test/helpers/in-process.ts), run the calls. Alice reaches sessions.maxPerPrincipal
 * across faces while bob and the static token's operator still open
 * sessions; ending one of hers frees a slot. The same for task slots: a task
 * on the transparent face and an execute_tool promotion on the meta face
 * fill alice's tasks.maxPerPrincipal; beyond it both faces refuse at once
 * with EMCP_PRINCIPAL_LIMIT, bob is not held back, and a cancel frees a slot.
 * /metrics counts the refusals by limit.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { LONG, rpcError, startTask } from "../helpers/tasks.js";

const SCOPE = "mcp:tools";
const STATIC_TOKEN = "static-machine-token-0123456789";
const REDIRECT = "http://127.0.0.1:65500/callback";
const MAX_SESSIONS = 3;
const MAX_TASKS = 2;
/** Longer than the test: a slow call holds its task slot until it is cancelled. */
const SLOW = { ms: 600_000 };

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

describe("limits per principal (OAuth users, real provider)", { timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let gw: TestGateway;
  let base: string;
  const clients: Client[] = [];
  /** Alice's and bob's logins per face (an access token is bound to its face, RFC 8707). */
  const aliceMeta = new MemoryOAuthClient(REDIRECT);
  const aliceSlow = new MemoryOAuthClient(REDIRECT);
  const bobMeta = new MemoryOAuthClient(REDIRECT);
  let a1: Client; // alice, /mcp
  let a2: Client; // alice, /servers/slow/mcp
  let b1: Client; // bob, /mcp

  /** A raw initialize with `token`: its HTTP status, session id and JSON body. */
  const initialize = async (face: string, token: string) => {
    const res = await fetch(`${base}${face}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify(INITIALIZE),
    });
    const body = await res.text();
    return { status: res.status, sessionId: res.headers.get("mcp-session-id"), body };
  };
  const end = async (face: string, token: string, sessionId: string) => {
    const res = await fetch(`${base}${face}`, { method: "DELETE", headers: { authorization: `Bearer ${token}`, "mcp-session-id": sessionId } });
    assert.equal(res.status, 200, `DELETE ${face}`);
  };
  const connect = async (face: string, oauth: MemoryOAuthClient) => {
    const client = new Client({ name: "limits-test", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}${face}`), { authProvider: oauth }));
    clients.push(client);
    return client;
  };
  const execute = (client: Client, timeout_ms: number) =>
    client.callTool({ name: "execute_tool", arguments: { server: "slow", tool: "slow", args: SLOW, timeout_ms } }, undefined, LONG) as Promise<CallToolResult>;
  const promotedTaskId = (result: CallToolResult) => {
    assert.notEqual(result.isError, true, JSON.stringify(result.content));
    const id = (result.structuredContent as { task_id?: string } | undefined)?.task_id;
    assert.ok(id, `promoted to a task: ${JSON.stringify(result.content)}`);
    return id;
  };
  const refusals = async () => {
    const page = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${STATIC_TOKEN}` } })).text();
    const count = (limit: string) => Number(new RegExp(`^emceepee_principal_limit_refusals_total\\{limit="${limit}"\\} (\\d+)$`, "m").exec(page)?.[1]);
    return { sessions: count("sessions"), tasks: count("tasks") };
  };

  before(async () => {
    idp = await startOidcProvider({ scopes: [SCOPE] });
    gw = await startInProcessGateway({
      mcpServers: { slow: inProcess("slow") },
      gateway: {
        token: STATIC_TOKEN,
        auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
        sessions: { maxPerPrincipal: MAX_SESSIONS },
        tasks: { maxPerPrincipal: MAX_TASKS },
      },
    });
    base = new URL(gw.url).origin;
    a1 = (await loginAndConnect(`${base}/mcp`, "alice", aliceMeta)).client;
    a2 = (await loginAndConnect(`${base}/servers/slow/mcp`, "alice", aliceSlow)).client;
    b1 = (await loginAndConnect(`${base}/mcp`, "bob", bobMeta)).client;
    clients.push(a1, a2, b1);
  });

  after(async () => {
    for (const c of clients) {
      await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await c.close().catch(() => undefined);
    }
    await gw?.close();
    await idp?.close();
  });

  test("alice's sessions beyond sessions.maxPerPrincipal, on any face, get 429 EMCP_PRINCIPAL_LIMIT; bob and the operator still open sessions; ending one of alice's frees a slot", async () => {
    const aliceToken = aliceMeta.saved!.access_token;
    const before = await refusals();
    const a3 = await connect("/mcp", aliceMeta); // her third: /mcp, /servers/slow/mcp, /mcp
    for (const [face, token] of [
      ["/mcp", aliceToken],
      ["/servers/slow/mcp", aliceSlow.saved!.access_token],
    ] as const) {
      const refused = await initialize(face, token);
      assert.equal(refused.status, 429, `${face}: ${refused.body}`);
      assert.equal(refused.sessionId, null, "no session id for a refused session");
      const { error } = JSON.parse(refused.body) as { error: { code: number; message: string; data: Record<string, unknown> } };
      assert.equal(error.code, -32603);
      assert.match(error.message, /^EMCP_PRINCIPAL_LIMIT: you already hold 3 sessions .* may hold 3 \(gateway\.sessions\.maxPerPrincipal\); close sessions/);
      assert.deepEqual(error.data, { limit: "sessions", max: MAX_SESSIONS, held: MAX_SESSIONS, code: "EMCP_PRINCIPAL_LIMIT" });
    }
    // Bob has his own count; the static token's operator is not limited per principal.
    const b2 = await initialize("/mcp", bobMeta.saved!.access_token);
    assert.equal(b2.status, 200, b2.body);
    const operator: string[] = [];
    for (let i = 0; i < MAX_SESSIONS + 2; i++) {
      const r = await initialize("/mcp", STATIC_TOKEN);
      assert.equal(r.status, 200, r.body);
      operator.push(r.sessionId!);
    }
    // Alice ends one of hers (DELETE): the next initialize is hers again.
    await (a3.transport as StreamableHTTPClientTransport).terminateSession();
    const again = await initialize("/mcp", aliceToken);
    assert.equal(again.status, 200, again.body);
    assert.equal((await initialize("/mcp", aliceToken)).status, 429, "and she is at her limit again");
    const after = await refusals();
    assert.equal(after.sessions - before.sessions, 3, "three refusals counted under limit=sessions");
    await end("/mcp", aliceToken, again.sessionId!);
    await end("/mcp", bobMeta.saved!.access_token, b2.sessionId!);
    for (const id of operator) await end("/mcp", STATIC_TOKEN, id);
  });

  test("alice's task slots are counted across her sessions and faces: beyond tasks.maxPerPrincipal both faces refuse at once; bob is not held back; a cancel frees a slot", async () => {
    const before = await refusals();
    // One gateway-owned task on the transparent face, one execute_tool promoted at once (timeout_ms 0) on the meta face.
    const t1 = await startTask(a2, "slow", SLOW, 600_000);
    assert.equal(t1.status, "working");
    const t2 = promotedTaskId(await execute(a1, 0));
    // Alice holds two: the meta face's execute_tool is refused (an isError result), the transparent face's task too (JSON-RPC error).
    const meta = await execute(a1, 0);
    assert.equal(meta.isError, true);
    const metaText = (meta.content[0] as { text: string }).text;
    assert.match(metaText, /^EMCP_PRINCIPAL_LIMIT: you already have 2 working tasks and calls in flight .* may have 2 \(gateway\.tasks\.maxPerPrincipal\)/);
    const transparent = await rpcError(startTask(a2, "slow", SLOW));
    assert.equal(transparent.code, -32603);
    assert.match(transparent.message, /EMCP_PRINCIPAL_LIMIT: .*gateway\.tasks\.maxPerPrincipal/);
    assert.deepEqual(transparent.data, { limit: "tasks", max: MAX_TASKS, held: MAX_TASKS, code: "EMCP_PRINCIPAL_LIMIT" });
    // Neither refusal became a task.
    const listed = await a1.callTool({ name: "list_tasks", arguments: {} }, undefined, LONG);
    assert.deepEqual(
      ((listed.structuredContent as { tasks: Array<{ task_id: string }> }).tasks ?? []).map((t) => t.task_id),
      [t2],
      "the meta session has its one promoted task, nothing more",
    );
    // Bob is not held back by alice's work.
    const bobTask = promotedTaskId(await execute(b1, 0));
    // Alice cancels one (tasks/cancel): the next call is hers again.
    assert.equal((await a2.experimental.tasks.cancelTask(t1.taskId, LONG)).status, "cancelled");
    const t3 = await startTask(a2, "slow", SLOW, 600_000);
    assert.equal(t3.status, "working");
    assert.equal((await execute(a1, 0)).isError, true, "and she is at her limit again");
    const after = await refusals();
    assert.equal(after.tasks - before.tasks, 3, "three refusals counted under limit=tasks");
    for (const [client, id] of [
      [a1, t2],
      [b1, bobTask],
    ] as const) {
      await client.callTool({ name: "cancel_task", arguments: { task_id: id } }, undefined, LONG);
    }
    await a2.experimental.tasks.cancelTask(t3.taskId, LONG);
  });
});
