/**
 * Principals are isolated everywhere (issue 22, docs/adr/0018 "Ownership"),
 * with real parts: `emceepee serve` processes, a real OpenID provider
 * (test/helpers/oidc.ts) logging alice and bob in through the SDK's OAuth
 * client, server-everything over Streamable HTTP as the upstream, a SQLite
 * file across a restart and a real redis-server behind two replicas. Bob
 * cannot use, attach to, read or answer anything of alice's on the meta face
 * and the transparent faces; where he probes her task or request ids he gets
 * the answer of an unknown id. A refused request resumes or adopts nothing.
 * Sessions made before authentication was on are no OAuth principal's.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { sessionHash } from "../../src/logging.js";
import { ROOT } from "../helpers/gateway.js";
import {
  freePort,
  logLines,
  pollFor,
  startCliServe,
  startEverythingHttp,
  stopChild,
  waitExit,
  type ChildServer,
  type RunningCli,
} from "../helpers/core-extra.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { loginHeadless, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { Balancer } from "../helpers/balancer.js";
import { redisSkipReason, startRedis, type RedisServer } from "../helpers/redis.js";

const SLOW = { timeout: 600_000 };
const SCOPE = "mcp:tools";
const STATIC_TOKEN = "static-operator-token-0123456789";
const REDIRECT = "http://127.0.0.1:65502/callback";
const FACES = ["/mcp", "/servers/up/mcp", "/all/mcp"] as const;
type Face = (typeof FACES)[number];
/** Ids of the right form that name nothing. */
const UNKNOWN_SESSION = "00000000-0000-4000-8000-000000000000";
const UNKNOWN_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

interface Reply {
  status: number;
  sessionId: string | undefined;
  text: string;
  messages: Array<Record<string, any>>;
}

let seq = 0;
/** One JSON-RPC request over HTTP, with a bearer token and (optionally) a session id; SSE or JSON replies alike. */
async function rpc(url: string, token: string, sessionId: string | undefined, method: string, params: Record<string, unknown> = {}): Promise<Reply> {
  const res = await fetch(url, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25",
      ...(sessionId ? { "mcp-session-id": sessionId } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: ++seq, method, params }),
  });
  const text = await res.text();
  let messages: Array<Record<string, any>> = [];
  if (res.status === 200) {
    messages = (res.headers.get("content-type") ?? "").includes("text/event-stream")
      ? text
          .split(/\r?\n/)
          .filter((l) => l.startsWith("data:") && l.length > 6)
          .map((l) => JSON.parse(l.slice(5)) as Record<string, any>)
      : [JSON.parse(text) as Record<string, any>];
  }
  return { status: res.status, sessionId: res.headers.get("mcp-session-id") ?? undefined, text, messages };
}

const INIT = { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "isolation", version: "1" } };

async function initialize(url: string, token: string): Promise<string> {
  const r = await rpc(url, token, undefined, "initialize", INIT);
  assert.equal(r.status, 200, r.text);
  assert.ok(r.sessionId);
  await fetch(url, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": r.sessionId,
    },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  return r.sessionId;
}

/** The JSON-RPC response of a reply (not its notifications). */
function response(r: Reply): Record<string, any> {
  const m = r.messages.find((x) => "result" in x || "error" in x);
  assert.ok(m, `no response in ${r.status} ${r.text}`);
  return m;
}

/** A meta tool's result (the parsed envelope text) or its error. */
async function tool(url: string, token: string, sid: string, name: string, args: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const r = await rpc(url, token, sid, "tools/call", { name, arguments: args });
  assert.equal(r.status, 200, r.text);
  return response(r);
}

/** What an answer says, with `ids` written as <id> and request-specific parts (JSON-RPC ids, times) dropped. */
function masked(reply: unknown, ids: string[]): string {
  let s = JSON.stringify(reply, (k, v: unknown) => (k === "id" && typeof v === "number" ? 0 : v));
  for (const id of ids) s = s.split(id).join("<id>");
  return s.replace(/"(?:now|at|createdAt|lastUpdatedAt|timestamp)":"[^"]*"/g, '"$1":"-"');
}

/** Access tokens by user and resource: one login each for the whole file (the provider's tokens outlive the gateway's restarts). */
const tokenCache = new Map<string, string>();

/** Logs a user in for each face (a token is bound to its face: RFC 8707) and returns the tokens; a face logged in before keeps its token. */
async function login<F extends string = Face>(base: string, user: string, faces: readonly F[] = FACES as unknown as readonly F[]): Promise<Record<F, string>> {
  const tokens = {} as Record<F, string>;
  for (const face of faces) {
    const key = `${user} ${base}${face}`;
    let token = tokenCache.get(key);
    if (token === undefined) {
      const oauth = new MemoryOAuthClient(REDIRECT);
      const { client } = await loginAndConnect(`${base}${face}`, user, oauth);
      await client.close();
      token = oauth.saved!.access_token;
      tokenCache.set(key, token);
    }
    tokens[face] = token;
  }
  return tokens;
}

/** A token for `url` by the spec's discovery (401 → PRM → login), without connecting afterwards. */
async function tokenOnly(url: string, user: string): Promise<string> {
  const oauth = new MemoryOAuthClient(REDIRECT);
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: oauth });
  await assert.rejects(new Client({ name: "isolation", version: "1" }).connect(transport), UnauthorizedError);
  await transport.finishAuth(await loginHeadless(oauth.authorizationUrl!, user, REDIRECT));
  return oauth.saved!.access_token;
}

/** What alice leaves lying around: a session on each face, meta tasks waiting on an elicitation and on a sampling request, transparent tasks. */
interface AliceWork {
  sessions: Record<Face, string>;
  metaTask: string;
  requestId: string;
  samplingTask: string;
  samplingRequestId: string;
  transparentTasks: string[];
}

/** Promotes a meta-face call of `tool` on `up` to a task (it waits on alice's answer) and returns the task id. */
async function promotedTask(meta: string, token: string, sid: string, upTool: string, args: Record<string, unknown>): Promise<string> {
  const promoted = await tool(meta, token, sid, "execute_tool", { server: "up", tool: upTool, args, timeout_ms: 1_000 });
  const taskId = /"task_id":\s*"([0-9A-Z]{26})"/.exec(JSON.stringify(promoted))?.[1];
  assert.ok(taskId, `no task id in ${JSON.stringify(promoted)}`);
  return taskId;
}

/** The request ids of the sampling requests pending for a meta-face session. */
async function samplingRequests(meta: string, token: string, sid: string): Promise<string[]> {
  const r = await tool(meta, token, sid, "get_sampling_requests");
  return ((r.result?.structuredContent?.sampling_requests as Array<{ requestId: string }> | undefined) ?? []).map((x) => x.requestId);
}

async function aliceWorks(base: string, tokens: Record<Face, string>): Promise<AliceWork> {
  const sessions = {} as Record<Face, string>;
  for (const face of FACES) sessions[face] = await initialize(`${base}${face}`, tokens[face]);
  const meta = `${base}/mcp`;
  const metaTask = await promotedTask(meta, tokens["/mcp"], sessions["/mcp"], "trigger-elicitation-request", {});
  const samplingTask = await promotedTask(meta, tokens["/mcp"], sessions["/mcp"], "trigger-sampling-request", { prompt: "alice's prompt" });
  const samplingRequestId = await pollFor(
    async () => (await samplingRequests(meta, tokens["/mcp"], sessions["/mcp"]))[0],
    "alice's pending sampling request",
    60_000,
  );
  const requestId = await pollFor(
    async () => {
      const r = await tool(meta, tokens["/mcp"], sessions["/mcp"], "get_elicitations");
      return (r.result?.structuredContent?.elicitations as Array<{ requestId: string }> | undefined)?.[0]?.requestId;
    },
    "alice's pending elicitation",
    60_000,
  );
  const transparentTasks: string[] = [];
  for (const [face, name] of [
    ["/servers/up/mcp", "echo"],
    ["/all/mcp", "up__echo"],
  ] as const) {
    const r = await rpc(`${base}${face}`, tokens[face], sessions[face], "tools/call", { name, arguments: { message: "alice's" }, task: { ttl: 300_000 } });
    const taskId = response(r).result?.task?.taskId as string | undefined;
    assert.ok(taskId, `no task in ${r.text}`);
    transparentTasks.push(taskId);
  }
  return { sessions, metaTask, requestId, samplingTask, samplingRequestId, transparentTasks };
}

/**
 * Everything bob can try against alice's work, from his own sessions and with
 * her session ids: each answer must equal the one for an unknown id.
 */
async function bobProbes(base: string, bob: Record<Face, string>, alice: AliceWork): Promise<void> {
  const bobSessions = {} as Record<Face, string>;
  for (const face of FACES) bobSessions[face] = await initialize(`${base}${face}`, bob[face]);
  const aliceIds = [...Object.values(alice.sessions), alice.metaTask, alice.requestId, alice.samplingTask, alice.samplingRequestId, ...alice.transparentTasks];
  const same = (what: string, foreign: unknown, unknown: unknown, ids: string[]) =>
    assert.equal(masked(foreign, ids), masked(unknown, ids), `${what}: another principal's id is answered like an unknown one`);

  // Her session ids, on every face: the 404 of an unknown session; attaching to them too.
  for (const face of FACES) {
    for (const [owner, sid] of Object.entries(alice.sessions)) {
      const foreign = await rpc(`${base}${face}`, bob[face], sid, "tools/list");
      const unknown = await rpc(`${base}${face}`, bob[face], UNKNOWN_SESSION, "tools/list");
      assert.equal(foreign.status, 404, `${face} with alice's ${owner} session: ${foreign.text}`);
      same(`${face} with alice's ${owner} session`, foreign.text, unknown.text, [sid, UNKNOWN_SESSION]);
    }
  }
  // GET (her SSE stream), DELETE (ending her session) and a JSON-RPC response (answering her client's requests) with her ids.
  for (const face of FACES) {
    const sid = alice.sessions[face];
    const headers = (id: string) => ({
      authorization: `Bearer ${bob[face]}`,
      "mcp-session-id": id,
      "mcp-protocol-version": "2025-11-25",
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
    });
    const answer = JSON.stringify({ jsonrpc: "2.0", id: 0, result: { action: "accept", content: {} } });
    for (const init of [{ method: "GET" }, { method: "DELETE" }, { method: "POST", body: answer }]) {
      const foreign = await fetch(`${base}${face}`, { ...init, headers: headers(sid) });
      const unknown = await fetch(`${base}${face}`, { ...init, headers: headers(UNKNOWN_SESSION) });
      assert.equal(foreign.status, 404, `${init.method} ${face} with alice's session`);
      same(`${init.method} ${face} with alice's session`, await foreign.text(), await unknown.text(), [sid, UNKNOWN_SESSION]);
    }
  }
  for (const [owner, sid] of Object.entries(alice.sessions)) {
    const foreign = await rpc(`${base}/mcp?session=${sid}`, bob["/mcp"], undefined, "initialize", INIT);
    const unknown = await rpc(`${base}/mcp?session=${UNKNOWN_SESSION}`, bob["/mcp"], undefined, "initialize", INIT);
    assert.equal(foreign.status, 404, `attaching to alice's ${owner} session: ${foreign.text}`);
    same(`attaching to alice's ${owner} session`, foreign.text, unknown.text, [sid, UNKNOWN_SESSION]);
  }

  // Meta face: her tasks and requests by id, from his session.
  const meta = `${base}/mcp`;
  const mine = (name: string, args: Record<string, unknown>) => tool(meta, bob["/mcp"], bobSessions["/mcp"], name, args);
  for (const taskId of [alice.metaTask, ...alice.transparentTasks]) {
    for (const [name, args] of [
      ["get_task", { task_id: taskId }],
      ["get_task_result", { task_id: taskId, timeout_ms: 0 }],
      ["cancel_task", { task_id: taskId }],
    ] as const) {
      const foreign = await mine(name, args);
      assert.equal(foreign.result?.isError, true, `${name} of alice's task answered ${JSON.stringify(foreign)}`);
      same(`${name} of alice's task`, foreign, await mine(name, { ...args, task_id: UNKNOWN_ID }), [taskId, UNKNOWN_ID]);
    }
  }
  for (const action of ["accept", "decline", "cancel"]) {
    const args = { request_id: alice.requestId, action, ...(action === "accept" ? { content: {} } : {}) };
    const foreign = await mine("respond_to_elicitation", args);
    assert.equal(foreign.result?.isError, true, `respond_to_elicitation of alice's request answered ${JSON.stringify(foreign)}`);
    same(`respond_to_elicitation (${action}) of alice's request`, foreign, await mine("respond_to_elicitation", { ...args, request_id: UNKNOWN_ID }), [
      alice.requestId,
      UNKNOWN_ID,
    ]);
  }
  // Her sampling request, answered and rejected: the answer for an unknown id (alice's test checks it is still pending for her).
  for (const answer of [{ text: "bob's completion" }, { error: "bob says no" }]) {
    const foreign = await mine("respond_to_sampling", { request_id: alice.samplingRequestId, ...answer });
    assert.equal(foreign.result?.isError, true, `respond_to_sampling of alice's request answered ${JSON.stringify(foreign)}`);
    same(
      `respond_to_sampling (${Object.keys(answer)[0]}) of alice's request`,
      foreign,
      await mine("respond_to_sampling", { request_id: UNKNOWN_ID, ...answer }),
      [alice.samplingRequestId, UNKNOWN_ID],
    );
  }
  // What he can list or wait for names none of hers.
  for (const [name, args] of [
    ["list_tasks", {}],
    ["get_elicitations", {}],
    ["get_sampling_requests", {}],
    ["await_activity", { timeout_ms: 0 }],
    ["get_notifications", {}],
  ] as const) {
    const seen = JSON.stringify(await mine(name, args));
    for (const id of aliceIds) assert.ok(!seen.includes(id), `${name} shows bob alice's ${id}: ${seen}`);
  }

  // Transparent faces: tasks/* with her task ids, from his sessions.
  for (const face of ["/servers/up/mcp", "/all/mcp"] as const) {
    const url = `${base}${face}`;
    for (const taskId of [alice.metaTask, ...alice.transparentTasks]) {
      for (const method of ["tasks/get", "tasks/result", "tasks/cancel"]) {
        const foreign = response(await rpc(url, bob[face], bobSessions[face], method, { taskId }));
        const unknown = response(await rpc(url, bob[face], bobSessions[face], method, { taskId: UNKNOWN_ID }));
        assert.ok(foreign.error, `${face} ${method} of alice's task answered ${JSON.stringify(foreign)}`);
        same(`${face} ${method} of alice's task`, foreign, unknown, [taskId, UNKNOWN_ID]);
      }
    }
    const listed = JSON.stringify(response(await rpc(url, bob[face], bobSessions[face], "tasks/list")));
    for (const id of aliceIds) assert.ok(!listed.includes(id), `${face} tasks/list shows bob alice's ${id}`);
  }
}

/** Alice still has all of it: her sessions answer her, her meta task and her request are there. */
async function aliceStillWorks(base: string, tokens: Record<Face, string>, alice: AliceWork): Promise<void> {
  for (const face of FACES) {
    const r = await rpc(`${base}${face}`, tokens[face], alice.sessions[face], "tools/list");
    assert.equal(r.status, 200, `${face}: ${r.text}`);
  }
  const task = await tool(`${base}/mcp`, tokens["/mcp"], alice.sessions["/mcp"], "get_task", { task_id: alice.metaTask });
  assert.notEqual(task.result?.isError, true, JSON.stringify(task));
  const got = response(
    await rpc(`${base}/servers/up/mcp`, tokens["/servers/up/mcp"], alice.sessions["/servers/up/mcp"], "tasks/get", { taskId: alice.transparentTasks[0] }),
  );
  assert.equal(got.result?.taskId, alice.transparentTasks[0], JSON.stringify(got));
}

// One provider and one upstream for both suites: each suite's gateways are its own.
let idp: TestOidcProvider;
let remote: ChildServer;

before(async () => {
  // Tokens are reused across the file's tests (login() above): longer than its run on a loaded machine.
  idp = await startOidcProvider({ scopes: [SCOPE], accessTokenTTL: 3_600 });
  remote = await startEverythingHttp();
});

after(async () => {
  await remote?.close();
  await idp?.close();
});

describe("principals are isolated: one gateway, across a restart (SQLite)", SLOW, () => {
  let tmp: string;
  let port: number;
  let base: string;
  let served: RunningCli | undefined;

  async function start(auth: boolean): Promise<void> {
    const config = path.join(tmp, `config-${auth}.json`);
    const gateway = auth ? { token: STATIC_TOKEN, auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } } } : {};
    await writeFile(config, JSON.stringify({ mcpServers: { up: { url: remote.url } }, gateway }));
    served = await startCliServe(ROOT, [
      "--config",
      config,
      "--port",
      String(port),
      "--store",
      `sqlite:${path.join(tmp, "state.db")}`,
      "--no-upstream-check",
      "--log-level",
      "info",
    ]);
  }

  async function stop(): Promise<void> {
    const old = served!;
    old.child.kill("SIGTERM");
    const { code } = await waitExit(old.child, 60_000);
    assert.equal(code, 0, old.stderr().slice(-3000));
    served = undefined;
  }

  const resumed = (sid: string) => logLines(served!.stderr(), "session_resumed").filter((l) => l.sessionHash === sessionHash(sid));

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-isolation-"));
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
  });

  after(async () => {
    if (served) await stopChild(served.child);
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  test("a session made without authentication is no OAuth principal's after authentication is turned on; the static token's operator keeps it", async () => {
    await start(false);
    const r = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: INIT }),
    });
    assert.equal(r.status, 200);
    const ownerless = r.headers.get("mcp-session-id")!;
    await stop();
    await start(true);
    const alice = await login(base, "alice");
    const asAlice = await rpc(`${base}/mcp`, alice["/mcp"], ownerless, "tools/list");
    const unknown = await rpc(`${base}/mcp`, alice["/mcp"], UNKNOWN_SESSION, "tools/list");
    assert.equal(asAlice.status, 404, asAlice.text.slice(0, 300));
    assert.equal(masked(asAlice.text, [ownerless, UNKNOWN_SESSION]), masked(unknown.text, [ownerless, UNKNOWN_SESSION]));
    assert.deepEqual(resumed(ownerless), [], "a refused request resumes nothing");
    const attach = await rpc(`${base}/mcp?session=${ownerless}`, alice["/mcp"], undefined, "initialize", INIT);
    assert.equal(attach.status, 404, attach.text);
    const asOperator = await rpc(`${base}/mcp`, STATIC_TOKEN, ownerless, "tools/list");
    assert.equal(asOperator.status, 200, `${asOperator.text}\n${served!.stderr().slice(-6000)}`);
    assert.equal(resumed(ownerless).length, 1);
    // Resumed now, held in memory: still not alice's.
    assert.equal((await rpc(`${base}/mcp`, alice["/mcp"], ownerless, "tools/list")).status, 404);
  });

  test("bob cannot use, attach to, read or answer anything of alice's, live and after a restart; his refused requests resume nothing", async () => {
    if (!served) await start(true);
    const aliceTokens = await login(base, "alice");
    const bobTokens = await login(base, "bob");
    const alice = await aliceWorks(base, aliceTokens);
    await bobProbes(base, bobTokens, alice);
    await aliceStillWorks(base, aliceTokens, alice);
    // Bob's answers to her sampling request reached nothing: it is still pending for her, and her own answer ends her task with it.
    const meta = `${base}/mcp`;
    assert.deepEqual(await samplingRequests(meta, aliceTokens["/mcp"], alice.sessions["/mcp"]), [alice.samplingRequestId]);
    const answered = await tool(meta, aliceTokens["/mcp"], alice.sessions["/mcp"], "respond_to_sampling", {
      request_id: alice.samplingRequestId,
      text: "alice's completion",
    });
    assert.notEqual(answered.result?.isError, true, JSON.stringify(answered));
    const sampled = await tool(meta, aliceTokens["/mcp"], alice.sessions["/mcp"], "get_task_result", { task_id: alice.samplingTask, timeout_ms: 60_000 });
    assert.notEqual(sampled.result?.isError, true, JSON.stringify(sampled));
    assert.match(JSON.stringify(sampled), /alice's completion/);
    assert.doesNotMatch(JSON.stringify(sampled), /bob's completion|bob says no/);

    await stop();
    await start(true);
    // Her sessions are in the store only now: bob's requests with their ids must not bring them back.
    for (const face of FACES) {
      for (const sid of Object.values(alice.sessions)) {
        assert.equal((await rpc(`${base}${face}`, bobTokens[face], sid, "tools/list")).status, 404);
      }
    }
    for (const sid of Object.values(alice.sessions)) assert.deepEqual(resumed(sid), [], "bob's request resumed alice's session");
    await bobProbes(base, bobTokens, alice);
    for (const sid of Object.values(alice.sessions)) assert.deepEqual(resumed(sid), [], "bob's probes resumed alice's session");
    await aliceStillWorks(base, aliceTokens, alice);
    assert.equal(resumed(alice.sessions["/mcp"]).length, 1, "alice's own request resumes her session");
  });

  test("a runtime server alice adds is hers alone: bob does not see, use, replace or remove it, and hears nothing of it, also after a restart", async () => {
    if (!served) await start(true);
    const alice = await login(base, "alice");
    const bob = await login(base, "bob");
    const meta = `${base}/mcp`;
    const bobMeta = await initialize(meta, bob["/mcp"]);
    const aliceMeta = await initialize(meta, alice["/mcp"]);
    const added = await tool(meta, alice["/mcp"], aliceMeta, "add_server", { name: "alice-up", url: remote.url });
    assert.notEqual(added.result?.isError, true, JSON.stringify(added).slice(0, 500));
    const names = async (token: string, sid: string) =>
      ((await tool(meta, token, sid, "list_servers")).result?.structuredContent?.servers as Array<{ name: string }>).map((s) => s.name).sort();
    const bobSees = async (sid: string) => {
      assert.deepEqual(await names(bob["/mcp"], sid), ["up"], "bob's list_servers");
      const foreign = await tool(meta, bob["/mcp"], sid, "execute_tool", { server: "alice-up", tool: "echo", args: { message: "x" } });
      const unknown = await tool(meta, bob["/mcp"], sid, "execute_tool", { server: "nosuch-up", tool: "echo", args: { message: "x" } });
      assert.equal(foreign.result?.isError, true);
      assert.equal(masked(foreign, ["alice-up", "nosuch-up"]), masked(unknown, ["alice-up", "nosuch-up"]), "her server is unknown to him");
      const removeForeign = await tool(meta, bob["/mcp"], sid, "remove_server", { name: "alice-up" });
      const removeUnknown = await tool(meta, bob["/mcp"], sid, "remove_server", { name: "nosuch-up" });
      assert.equal(masked(removeForeign, ["alice-up", "nosuch-up"]), masked(removeUnknown, ["alice-up", "nosuch-up"]));
      // The same URL does not connect him to hers (it did: "unchanged"), another URL does not replace it.
      for (const url of [remote.url, `${remote.url}?other`]) {
        const replace = await tool(meta, bob["/mcp"], sid, "add_server", { name: "alice-up", url });
        assert.equal(replace.result?.isError, true, JSON.stringify(replace).slice(0, 500));
        assert.match(JSON.stringify(replace), /EMCP_SERVER_EXISTS/);
      }
      const all = await initialize(`${base}/all/mcp`, bob["/all/mcp"]);
      const tools = JSON.stringify(response(await rpc(`${base}/all/mcp`, bob["/all/mcp"], all, "tools/list")));
      assert.ok(tools.includes("up__echo") && !tools.includes("alice-up"), "bob's /all/mcp lists only the config server's tools");
      const activity = JSON.stringify(await tool(meta, bob["/mcp"], sid, "await_activity", { timeout_ms: 0 }));
      assert.ok(!activity.includes("alice-up"), `bob heard of alice's server: ${activity.slice(0, 500)}`);
    };
    await bobSees(bobMeta);
    // Her other sessions see it and use it.
    const aliceOther = await initialize(meta, alice["/mcp"]);
    assert.deepEqual(await names(alice["/mcp"], aliceOther), ["alice-up", "up"]);
    // Its own face: a 404 for him, as for a path no server has.
    const face = await rpc(`${base}/servers/alice-up/mcp`, await tokenOnly(`${base}/servers/alice-up/mcp`, "bob"), undefined, "initialize", INIT);
    assert.equal(face.status, 404, face.text.slice(0, 300));
    assert.match(face.text, /Not found: POST \/servers\/alice-up\/mcp/);

    await stop();
    await start(true);
    await bobSees(bobMeta);
    assert.deepEqual(await names(alice["/mcp"], aliceOther), ["alice-up", "up"], "alice's server came back as hers");
    const called = await tool(meta, alice["/mcp"], aliceOther, "execute_tool", { server: "alice-up", tool: "echo", args: { message: "hers" } });
    assert.notEqual(called.result?.isError, true, JSON.stringify(called).slice(0, 500));
  });
});

const redisSkip = redisSkipReason();

describe("principals are isolated across two replicas (Redis)", { ...SLOW, skip: redisSkip }, () => {
  let redis: RedisServer;
  let tmp: string;
  let balancer: Balancer;
  let base: string;
  const replicas: Array<{ id: string; port: number; served: RunningCli }> = [];
  const alive = () => replicas.filter((r) => r.served.child.exitCode === null && r.served.child.signalCode === null);

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "emceepee-isolation-replicas-"));
    redis = await startRedis();
    balancer = new Balancer(() => alive());
    base = await balancer.start();
    for (const i of [1, 2]) {
      const port = await freePort();
      const id = `r${i}`;
      const config = path.join(tmp, `${id}.json`);
      await writeFile(
        config,
        JSON.stringify({
          mcpServers: { up: { url: remote.url } },
          gateway: {
            store: { kind: "redis", url: redis.url },
            // One public URL for both: tokens are issued for the balancer's address (RFC 8707) and valid on either replica.
            http: { publicUrl: base },
            auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
            cluster: { enabled: true, replicaId: id, advertiseUrl: `http://127.0.0.1:${port}`, secret: "replica-isolation-secret-0123456789", leaseMs: 5_000 },
          },
        }),
      );
      const served = await startCliServe(ROOT, ["--config", config, "--port", String(port), "--no-upstream-check", "--log-level", "info"], 60_000);
      replicas.push({ id, port, served });
    }
  });

  after(async () => {
    await balancer?.close();
    await Promise.allSettled(replicas.map((r) => stopChild(r.served.child)));
    await redis?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  test("a runtime server alice adds through one replica is hers on every replica (server-sync carries its owner)", async () => {
    const alice = await login(base, "alice", ["/mcp"] as const);
    const bob = await login(base, "bob", ["/mcp"] as const);
    const meta = `${base}/mcp`;
    const aliceMeta = await initialize(meta, alice["/mcp"]);
    const added = await tool(meta, alice["/mcp"], aliceMeta, "add_server", { name: "alice-replicated", url: remote.url });
    assert.notEqual(added.result?.isError, true, JSON.stringify(added).slice(0, 500));
    const listed = async (token: string, sid: string) => JSON.stringify(await tool(meta, token, sid, "list_servers")).includes("alice-replicated");
    const holders = new Set<string>();
    // New sessions, started on whichever replica the balancer picks: alice's see it (once that replica applied it), bob's never.
    for (let i = 0; i < 4; i++) {
      const own = await initialize(meta, alice["/mcp"]);
      await pollFor(async () => ((await listed(alice["/mcp"], own)) ? true : undefined), `alice's session ${i} sees her server`, 60_000, 200);
      const bobMeta = await initialize(meta, bob["/mcp"]);
      assert.equal(await listed(bob["/mcp"], bobMeta), false, `bob's list_servers (session ${i}) shows alice's server`);
      for (const sid of [own, bobMeta]) {
        const holder = replicas.find((r) => logLines(r.served.stderr(), "session_created").some((l) => l.sessionHash === sessionHash(sid)));
        if (holder) holders.add(holder.id);
      }
    }
    assert.equal(holders.size, 2, "sessions were made on both replicas");
  });

  test("bob cannot use, attach to, read or answer anything of alice's through either replica; after her replica dies, his requests adopt nothing", async () => {
    const aliceTokens = await login(base, "alice");
    const bobTokens = await login(base, "bob");
    const alice = await aliceWorks(base, aliceTokens);
    await bobProbes(base, bobTokens, alice);
    await aliceStillWorks(base, aliceTokens, alice);

    // Alice's meta session's replica dies: her session is in Redis only.
    const sid = alice.sessions["/mcp"];
    const holder = replicas.find((r) => logLines(r.served.stderr(), "session_created").some((l) => l.sessionHash === sessionHash(sid)));
    assert.ok(holder, "a replica created alice's meta session");
    holder.served.child.kill("SIGKILL");
    await waitExit(holder.served.child);
    const survivor = alive()[0]!;
    const adopted = () => logLines(survivor.served.stderr(), "cluster_session_adopted").filter((l) => l.sessionHash === sessionHash(sid));
    const taken = () => logLines(survivor.served.stderr(), "session_resumed").filter((l) => l.sessionHash === sessionHash(sid));
    const foreign = await rpc(`${base}/mcp`, bobTokens["/mcp"], sid, "tools/list");
    assert.equal(foreign.status, 404, foreign.text);
    assert.deepEqual(adopted(), [], "bob's request adopted alice's session");
    assert.deepEqual(taken(), [], "bob's request resumed alice's session");
    // Her own request, once the dead replica's lease ran out, adopts and resumes it.
    await pollFor(
      async () => ((await rpc(`${base}/mcp`, aliceTokens["/mcp"], sid, "tools/list")).status === 200 ? true : undefined),
      "alice's session adopted",
      60_000,
      500,
    );
    assert.equal(taken().length, 1);
    await bobProbes(base, bobTokens, alice);
  });
});
