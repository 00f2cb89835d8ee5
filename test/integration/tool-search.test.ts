/**
 * search_tools (issue 26, design MF-21): one gateway in process with
 * server-everything and the tool catalogs of test/fixtures/tool-catalog.ts
 * (100+ tools), a visibility rule hiding one tool, a server that never
 * finishes connecting and one that cannot start. Ranking on realistic
 * queries (typos and prefixes too), the reply's shape, a hidden tool never
 * found, the index following tools/list_changed, servers not indexed yet
 * named without blocking, argument errors; with real logins, one principal's
 * view (a tool hidden from the other, a rename) never reaches the other
 * through the shared index.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { call, connectClient, type TestGateway } from "../helpers/gateway.js";
import { errorCodeOf, eventually } from "../helpers/async-extra.js";
import { inProcess, inProcessCatalog, inProcessCatalogServers, startInProcessGateway } from "../helpers/in-process.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { startOidcProvider } from "../helpers/oidc.js";

interface Hit {
  server: string;
  name: string;
  title?: string;
  summary: string;
  score: number;
  input_schema?: { type: string; properties?: Record<string, unknown> };
}
interface Reply {
  query: string;
  results: Hit[];
  total_matches: number;
  indexed: Array<{ server: string; tools: number }>;
  not_indexed: Array<{ server: string; status: string; error?: string }>;
}

const CATALOG_SERVERS = inProcessCatalogServers();

let gw: TestGateway;
let client: Client;

before(async () => {
  gw = await startInProcessGateway({
    mcpServers: CATALOG_SERVERS,
    gateway: {
      // Generous for a loaded machine: in-process upstreams connect in milliseconds.
      toolSearch: { connectWaitMs: 30_000 },
      governance: { profile: "enforce", visibility: [{ id: "no-merge", server: "github", tool: "merge_pull_request", visible: false }] },
    },
  });
  client = await connectClient(gw.url);
});

after(async () => {
  await client.close();
  await gw.close();
});

async function search(args: Record<string, unknown>, c: Client = client): Promise<Reply> {
  const raw = await call(c, "search_tools", args);
  assert.notEqual(raw.isError, true, JSON.stringify(raw).slice(0, 600));
  return raw.structuredContent as unknown as Reply;
}

const top = (r: Reply) => (r.results[0] ? `${r.results[0].server}/${r.results[0].name}` : "none");

describe("search_tools", () => {
  test("finds the right tool first among 100+ tools on nine servers, for plain requests, typos and prefixes", async () => {
    const first = await search({ query: "read a file" });
    assert.equal(first.not_indexed.length, 0, JSON.stringify(first.not_indexed));
    assert.ok(first.indexed.reduce((n, s) => n + s.tools, 0) >= 100, `corpus ${JSON.stringify(first.indexed)}`);
    const cases: Array<[string, string]> = [
      ["read a file", "files/read_file"],
      ["create a github issue", "github/create_issue"],
      ["post a message to a slack channel", "slack/slack_post_message"],
      ["find free time for a meeting", "calendar/find_free_time"],
      ["which queries are slow", "postgres/list_slow_queries"],
      ["take a screenshot of the page", "browser/browser_screenshot"],
      ["screnshot", "browser/browser_screenshot"], // a typo
      ["screensh", "browser/browser_screenshot"], // a prefix
      ["knowledge graph entity observations add", "memory/add_observations"],
      ["move jira issue to done", "jira/jira_transition_issue"],
      ["log time spent", "jira/jira_log_work"],
      ["rename a file", "files/move_file"],
      ["sum of two numbers", "everything/get-sum"],
    ];
    for (const [query, expected] of cases) {
      const r = await search({ query, limit: 5 });
      assert.equal(top(r), expected, `${query}: ${JSON.stringify(r.results.map((h) => `${h.server}/${h.name} ${h.score}`))}`);
    }
    // A parameter name finds the tools that take it.
    const byParam = await search({ query: "thread_ts", limit: 2 });
    assert.deepEqual(byParam.results.map((h) => h.name).sort(), ["slack_get_thread_replies", "slack_reply_to_thread"]);
  });

  test("a hit is server, name, one-line summary and relative score; the schema only when asked; limit and server respected", async () => {
    const bare = await search({ query: "pull request", limit: 3 });
    assert.equal(bare.results.length, 3);
    assert.ok(bare.total_matches > 3);
    assert.equal(bare.results[0]!.score, 1);
    for (const h of bare.results) {
      assert.deepEqual(Object.keys(h).sort(), ["name", "score", "server", "summary"]);
      assert.ok(!h.summary.includes("\n") && h.summary.length <= 160);
      assert.ok(h.score > 0 && h.score <= 1);
    }
    const withSchema = await search({ query: "pull request", limit: 3, include_schema: true });
    assert.deepEqual(
      withSchema.results.map((h) => h.name),
      bare.results.map((h) => h.name),
    );
    for (const h of withSchema.results) assert.equal(h.input_schema?.type, "object");
    assert.ok(withSchema.results.some((h) => h.input_schema?.properties && "pull_number" in h.input_schema.properties));
    const onlyJira = await search({ query: "issue comment", server: "jira" });
    assert.ok(onlyJira.results.length > 0);
    assert.ok(onlyJira.results.every((h) => h.server === "jira"));
    assert.deepEqual(
      onlyJira.indexed.map((s) => s.server),
      ["jira"],
    );
  });

  test("a tool hidden by governance.visibility is never found, not even by its exact name", async () => {
    for (const query of ["merge_pull_request", "merge pull request", "squash rebase"]) {
      const r = await search({ query, limit: 50 });
      assert.ok(!r.results.some((h) => h.name === "merge_pull_request"), `${query}: ${JSON.stringify(r.results.map((h) => h.name))}`);
    }
    const github = (await search({ query: "repository", server: "github" })).indexed[0];
    assert.equal(github?.tools, 24, "25 github tools, one hidden");
  });

  test("the index follows the upstream's tools/list_changed", async () => {
    const before = await search({ query: "extract archive" });
    assert.ok(!before.results.some((h) => h.name === "archive_extract"));
    const unlocked = await call(client, "execute_tool", { server: "dynamic", tool: "unlock_archive_tools", args: {} });
    assert.notEqual(unlocked.isError, true);
    const after = await eventually("archive_extract indexed", async () => {
      const r = await search({ query: "extract archive" });
      return top(r) === "dynamic/archive_extract" ? r : undefined;
    });
    assert.equal(after.indexed.find((s) => s.server === "dynamic")?.tools, 4);
  });

  test("list_tools points agents to search_tools: in its description and when a first page leaves tools out", async () => {
    const listTools = (await client.listTools()).tools.find((t) => t.name === "list_tools");
    assert.match(listTools?.description ?? "", /search_tools/);
    const page = await call(client, "list_tools", {});
    assert.match(page.content[0]?.type === "text" ? page.content[0].text : "", /^\d+ tools; .*search_tools/);
  });

  test("bad arguments are errors that say what to write; nothing crashes", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ query: "" }, /1 to 500 characters/],
      [{ query: "   " }, /1 to 500 characters/],
      [{ query: "the a of" }, /no searchable words/],
      [{ query: "?!" }, /no searchable words/],
      [{ query: "file", limit: 0 }, /limit/],
      [{ query: "file", limit: 51 }, /limit/],
      [{ query: "file", limit: 2.5 }, /limit/],
      [{ query: "x".repeat(501) }, /query/],
      [{ query: "file", topk: 3 }, /topk|Unrecognized/i],
    ];
    for (const [args, message] of cases) {
      const r: CallToolResult = await call(client, "search_tools", args);
      assert.equal(r.isError, true, `${JSON.stringify(args)} was accepted`);
      const text = r.content.map((c) => (c.type === "text" ? c.text : "")).join(" ");
      assert.match(text, message, JSON.stringify(args));
    }
    const unknown = await call(client, "search_tools", { query: "file", server: "nope" });
    assert.equal(errorCodeOf(unknown), "EMCP_UNKNOWN_SERVER");
    assert.equal(top(await search({ query: "read a file" })), "files/read_file", "still serving");
  });
});

describe("search_tools with servers not connected yet", () => {
  test("a server still connecting and one that cannot start are named in not_indexed; the connected ones are searched", async () => {
    const slow = await startInProcessGateway({
      mcpServers: {
        files: inProcessCatalog("files"),
        // A real process that never answers initialize.
        hung: { command: process.execPath, args: ["-e", "setInterval(() => {}, 1000)"] },
        broken: { command: "/nonexistent/emceepee-test-command" },
      },
      gateway: { toolSearch: { connectWaitMs: 1_000 }, upstream: { connectTimeoutMs: 60_000 } },
    });
    const c = await connectClient(slow.url);
    try {
      // In-process `files` connects well within the wait on any machine; allow a retry if not.
      const r = await eventually("files indexed", async () => {
        const reply = await search({ query: "read file" }, c);
        return reply.indexed.some((s) => s.server === "files") ? reply : undefined;
      });
      assert.equal(top(r), "files/read_file");
      assert.deepEqual(
        r.not_indexed.map((s) => [s.server, s.status]),
        [
          ["hung", "connecting"],
          ["broken", "error"],
        ],
      );
      assert.match(r.not_indexed[1]!.error ?? "", /EMCP_/);
      const raw = await call(c, "search_tools", { query: "read file" });
      assert.match(raw.content[0]?.type === "text" ? raw.content[0].text : "", /not searched yet/);
    } finally {
      await c.close();
      await slow.close();
    }
  });
});

test("per principal (real logins): the gateway's one index never gives bob a tool hidden from him or alice's renamed name", { timeout: 240_000 }, async () => {
  const SCOPE = "mcp:tools";
  const REDIRECT = "http://127.0.0.1:65500/callback";
  const idp = await startOidcProvider({ scopes: [SCOPE] });
  const gw = await startInProcessGateway({
    mcpServers: { everything: inProcess("everything") },
    gateway: {
      auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
      toolSearch: { connectWaitMs: 30_000 },
      governance: {
        profile: "enforce",
        visibility: [{ id: "no-env-for-bob", server: "everything", tool: "get-env", principal: { subject: "bob" }, visible: false }],
        curation: [{ server: "everything", tool: "echo", principal: { subject: "alice" }, name: "alice_echo" }],
      },
    },
  });
  const clients: Client[] = [];
  try {
    const alice = (await loginAndConnect(gw.url, "alice", new MemoryOAuthClient(REDIRECT))).client;
    const bob = (await loginAndConnect(gw.url, "bob", new MemoryOAuthClient(REDIRECT))).client;
    clients.push(alice, bob);
    const names = async (c: Client, query: string) => (await search({ query, limit: 50 }, c)).results.map((h) => h.name);
    // Alice first: her view (get-env, alice_echo) is indexed before bob asks.
    assert.equal((await names(alice, "environment variables"))[0], "get-env");
    assert.ok((await names(alice, "echo")).includes("alice_echo"));
    assert.ok(!(await names(alice, "echo")).includes("echo"), "alice sees echo only under her name");
    for (const query of ["environment variables", "get-env", "env"]) assert.ok(!(await names(bob, query)).includes("get-env"), `bob: ${query}`);
    assert.ok(!(await names(bob, "alice_echo")).includes("alice_echo"));
    assert.ok((await names(bob, "echo")).includes("echo"));
    assert.equal((await search({ query: "echo" }, bob)).indexed[0]?.tools, (await search({ query: "echo" }, alice)).indexed[0]!.tools - 1);
  } finally {
    for (const c of clients) {
      await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await c.close().catch(() => undefined);
    }
    await gw.close();
    await idp.close();
  }
});
