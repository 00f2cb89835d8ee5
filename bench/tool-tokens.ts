/**
 * Tokens an agent reads to find and call the right tool (issue 26): the full
 * tool list (the transparent /all/mcp face's tools/list, or the meta face's
 * list_tools paged to the end) against one search_tools call, for a set of
 * tasks, counted with js-tiktoken (cl100k_base) over the text an LLM reads.
 * Corpus: server-everything plus the catalogs of test/fixtures/tool-catalog.ts
 * (realistic names and descriptions; server-filesystem and server-memory are
 * not installed here, so "files" and "memory" carry their tool names), all in
 * process. Also reports whether the right tool ranks first / in the top 3.
 *
 *   node --import tsx bench/tool-tokens.ts [--limit=3]
 */
import os from "node:os";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { getEncoding } from "js-tiktoken";
import { call, connectClient } from "../test/helpers/gateway.js";
import { inProcessCatalogServers, startInProcessGateway } from "../test/helpers/in-process.js";

const LIMIT = Number(/^--limit=(\d+)$/.exec(process.argv.find((a) => a.startsWith("--limit=")) ?? "")?.[1] ?? 3);

/** Each task: what an agent would type, and the tool that does it. */
const TASKS: Array<{ task: string; query: string; expected: string }> = [
  { task: "Show me what's in config.yaml", query: "read file contents", expected: "files/read_file" },
  { task: "Rename notes.txt to notes.md", query: "rename move file", expected: "files/move_file" },
  { task: "Remember that Ana leads the data team", query: "add observations to entity", expected: "memory/add_observations" },
  { task: "Open a bug for the login crash on GitHub", query: "create github issue", expected: "github/create_issue" },
  { task: "Approve PR 42", query: "review pull request approve", expected: "github/create_pull_request_review" },
  { task: "Re-run the failed CI build", query: "rerun failed workflow", expected: "github/rerun_workflow" },
  { task: "Tell #deploys the release is out", query: "post slack message channel", expected: "slack/slack_post_message" },
  { task: "Find a slot for Ana, Bo and me next week", query: "find free time calendar", expected: "calendar/find_free_time" },
  { task: "Email the minutes to the team", query: "send email", expected: "calendar/send_email" },
  { task: "Which queries are slow on prod?", query: "slow queries", expected: "postgres/list_slow_queries" },
  { task: "What columns does the orders table have?", query: "describe table columns", expected: "postgres/describe_table" },
  { task: "Take a screenshot of the dashboard", query: "screenshot page", expected: "browser/browser_screenshot" },
  { task: "Move PROJ-12 to Done", query: "transition jira issue status", expected: "jira/jira_transition_issue" },
  { task: "Log 2 hours on PROJ-7", query: "log work time jira", expected: "jira/jira_log_work" },
  { task: "Add 17 and 25", query: "sum two numbers", expected: "everything/get-sum" },
];

const enc = getEncoding("cl100k_base");
const tokens = (text: string) => enc.encode(text).length;
/** What an LLM reads of a tool result: its text blocks. */
const resultTokens = (r: CallToolResult) => tokens(r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n"));

const gw = await startInProcessGateway({
  mcpServers: inProcessCatalogServers(["dynamic"]),
  gateway: { toolSearch: { connectWaitMs: 30_000 } },
});
const meta = await connectClient(gw.url);
const all = new Client({ name: "bench", version: "1.0.0" });
await all.connect(new StreamableHTTPClientTransport(new URL(gw.url.replace(/\/mcp$/, "/all/mcp"))));
try {
  // Warm: every server connected and indexed.
  const warm = (await call(meta, "search_tools", { query: "file" })).structuredContent as { indexed: Array<{ tools: number }> };
  const toolCount = warm.indexed.reduce((n, s) => n + s.tools, 0);
  const servers = warm.indexed.length;

  const native = (await all.listTools()).tools;
  const nativeTokens = tokens(JSON.stringify(native));
  let listTokens = 0;
  let pages = 0;
  for (let cursor: string | undefined; ;) {
    const r = await call(meta, "list_tools", { limit: 500, ...(cursor ? { cursor } : {}) });
    listTokens += resultTokens(r);
    pages++;
    cursor = (r.structuredContent as { next_cursor?: string }).next_cursor;
    if (!cursor) break;
  }
  const metaToolsTokens = tokens(JSON.stringify((await meta.listTools()).tools));

  const rows: string[] = [];
  let searchSum = 0;
  let first = 0;
  let top3 = 0;
  for (const t of TASKS) {
    const r = await call(meta, "search_tools", { query: t.query, limit: LIMIT, include_schema: true });
    const hits = (r.structuredContent as { results: Array<{ server: string; name: string }> }).results.map((h) => `${h.server}/${h.name}`);
    const rank = hits.indexOf(t.expected) + 1;
    if (rank === 1) first++;
    if (rank >= 1 && rank <= 3) top3++;
    const n = resultTokens(r);
    searchSum += n;
    rows.push(`| ${t.task} | \`${t.query}\` | ${t.expected} | ${rank || "—"} | ${n} | ${(nativeTokens / n).toFixed(0)}× |`);
  }
  const avg = searchSum / TASKS.length;
  const date = new Date().toISOString().slice(0, 10);
  console.log(`## Tool search tokens (\`node --import tsx bench/tool-tokens.ts\`)

Corpus: ${toolCount} tools on ${servers} servers (server-everything and test/fixtures/tool-catalog.ts). Tokens: js-tiktoken cl100k_base over the text an LLM reads. Run ${date} on ${os.cpus()[0]?.model ?? "?"} (${os.cpus().length} cores), Node ${process.version}.

| what the agent reads to find the tool | tokens |
| --- | --- |
| every tool as native definitions (\`tools/list\` on \`/all/mcp\`) | ${nativeTokens} |
| meta \`list_tools\` paged to the end (${pages} page(s) of 500) | ${listTokens} |
| one \`search_tools\` (limit ${LIMIT}, with input schemas), mean of ${TASKS.length} tasks | ${avg.toFixed(0)} |
| the meta face's own tool definitions (read once either way) | ${metaToolsTokens} |

Ratio: one search reads **${(nativeTokens / avg).toFixed(0)}×** fewer tokens than the native tool list and **${(listTokens / avg).toFixed(0)}×** fewer than paging \`list_tools\`. The right tool ranked first in ${first}/${TASKS.length} tasks, in the top 3 in ${top3}/${TASKS.length}.

| task | query | right tool | its rank | search tokens | native list ÷ search |
| --- | --- | --- | --- | --- | --- |
${rows.join("\n")}`);
} finally {
  await all.close();
  await meta.close();
  await gw.close();
}
