/**
 * Code mode against plain meta-tool calls (issue 26): one multi-step workflow
 * — read three resources, then call two tools with data from the first —
 * done by an agent (1) with read_resource / execute_tool, one tool call per
 * step, and (2) with one run_code. Both run for real against the gateway
 * (server-everything over stdio, an SDK client on /mcp); what the agent would
 * send and read is counted with a real tokenizer (js-tiktoken, cl100k_base):
 * the tool calls it writes (name + JSON arguments), the tool results it reads
 * (their text blocks, as an MCP host hands them to the model), the definitions
 * of the meta-tools it needs, and the input tokens over all model turns when
 * each turn re-reads the conversation so far. Round trips: model turns that
 * make tool calls (sequential; with parallel tool calls the reads can share a
 * turn, also shown). The final answer turn is the same for both and left out.
 * Both paths must produce the same two tool results (checked).
 * Run: npm run bench:codemode   (about 10 s). The report (markdown) goes to stdout.
 */
import os from "node:os";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { getEncoding } from "js-tiktoken";
import { everythingServerEntry } from "../src/config/demo.js";
import { parseConfig } from "../src/config/load.js";
import { createGateway } from "../src/server/gateway.js";

const enc = getEncoding("cl100k_base");
const tokens = (text: string) => enc.encode(text).length;

const DOCS = ["architecture.md", "features.md", "extension.md"].map((n) => `demo://resource/static/document/${n}`);

interface Step {
  tool: string;
  args: Record<string, unknown>;
  result: CallToolResult;
}

/** What the model reads of a tool result: its text blocks (the session envelope included, as a host shows it). */
function resultText(r: CallToolResult): string {
  return r.content.map((c) => (c.type === "text" ? c.text : JSON.stringify(c))).join("\n");
}

function definitionText(t: Tool): string {
  return JSON.stringify({ name: t.name, description: t.description, input_schema: t.inputSchema });
}

async function plain(client: Client): Promise<Step[]> {
  const steps: Step[] = [];
  const step = async (tool: string, args: Record<string, unknown>) => {
    const result = (await client.callTool({ name: tool, arguments: args })) as CallToolResult;
    if (result.isError) throw new Error(`${tool} failed: ${resultText(result)}`);
    steps.push({ tool, args, result });
    return result;
  };
  const docs: string[] = [];
  for (const uri of DOCS) {
    const r = await step("read_resource", { server: "everything", uri });
    const contents = (JSON.parse((r.content[0] as { text: string }).text) as { contents: Array<{ text: string }> }).contents;
    docs.push(contents[0]!.text);
  }
  const first = docs[0]!;
  await step("execute_tool", { server: "everything", tool: "get-sum", args: { a: first.length, b: first.split("\n").length } });
  await step("execute_tool", { server: "everything", tool: "echo", args: { message: first.split("\n")[0] } });
  return steps;
}

const CODE = `const docs = [];
for (const name of ["architecture.md", "features.md", "extension.md"]) {
  const { contents } = await mcp.readResource("everything", "demo://resource/static/document/" + name);
  docs.push(contents[0].text);
}
const first = docs[0];
const sum = mcp.text(await mcp.call("everything", "get-sum", { a: first.length, b: first.split("\\n").length }));
const echo = mcp.text(await mcp.call("everything", "echo", { message: first.split("\\n")[0] }));
return { sum, echo, sizes: docs.map((d) => d.length) };`;

async function codeMode(client: Client): Promise<Step[]> {
  const args = { code: CODE };
  const result = (await client.callTool({ name: "run_code", arguments: args })) as CallToolResult;
  if (result.isError) throw new Error(`run_code failed: ${resultText(result)}`);
  return [{ tool: "run_code", args, result }];
}

interface Tally {
  roundTrips: number;
  parallelRoundTrips: number;
  sent: number;
  read: number;
  definitions: number;
  inputOverTurns: number;
}

/** Tokens per path; `turns` groups the steps into model turns (parallel tool calls share one). */
function tally(steps: Step[], defs: Tool[], parallelTurns: number): Tally {
  const definitions = defs.reduce((n, t) => n + tokens(definitionText(t)), 0);
  let context = definitions;
  let inputOverTurns = 0;
  let sent = 0;
  let read = 0;
  for (const s of steps) {
    // The turn that writes this call reads everything so far.
    inputOverTurns += context;
    const call = tokens(JSON.stringify({ name: s.tool, arguments: s.args }));
    const result = tokens(resultText(s.result));
    sent += call;
    read += result;
    context += call + result;
  }
  // The final answer turn reads the whole conversation once (not a round trip of tools).
  inputOverTurns += context;
  return { roundTrips: steps.length, parallelRoundTrips: parallelTurns, sent, read, definitions, inputOverTurns };
}

async function main() {
  const config = parseConfig({
    mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry()] } },
    gateway: { port: 0, logLevel: "silent", accessLog: false },
  });
  const gateway = createGateway(config);
  const { url } = await gateway.listen();
  const connect = async () => {
    const c = new Client({ name: "bench-code-mode", version: "1.0.0" });
    await c.connect(new StreamableHTTPClientTransport(new URL(url)));
    // Warm up: the server is started and its first events delivered, so neither path pays for them.
    await c.callTool({ name: "list_servers", arguments: {} });
    await c.callTool({ name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: "warm" } } });
    await c.callTool({ name: "list_servers", arguments: {} });
    return c;
  };
  try {
    const a = await connect();
    const b = await connect();
    const meta = (await a.listTools()).tools;
    const def = (name: string) => meta.find((t) => t.name === name)!;
    let t0 = performance.now();
    const p = await plain(a);
    const plainMs = performance.now() - t0;
    t0 = performance.now();
    const c = await codeMode(b);
    const codeMs = performance.now() - t0;
    // Again, warm: the first run also loaded the QuickJS engine.
    t0 = performance.now();
    await plain(a);
    const plainWarmMs = performance.now() - t0;
    t0 = performance.now();
    await codeMode(b);
    const codeWarmMs = performance.now() - t0;

    // Both paths got the same two tool results.
    const reply = c[0]!.result.structuredContent as { result: { sum: string; echo: string } };
    const plainSum = resultText(p[3]!.result).split("\n")[0];
    const plainEcho = resultText(p[4]!.result).split("\n")[0];
    if (reply.result.sum !== plainSum || reply.result.echo !== plainEcho) {
      throw new Error(`the paths disagree: ${JSON.stringify(reply.result)} vs ${plainSum} / ${plainEcho}`);
    }

    const P = tally(p, [def("read_resource"), def("execute_tool")], 2);
    const C = tally(c, [def("run_code")], 1);
    const ratio = (x: number, y: number) => `${(x / y).toFixed(2)}×`;
    const rows: Array<[string, number, number]> = [
      ["model round trips (sequential tool calls)", P.roundTrips, C.roundTrips],
      ["model round trips (reads in parallel)", P.parallelRoundTrips, C.parallelRoundTrips],
      ["tokens the agent writes (tool calls)", P.sent, C.sent],
      ["tokens the agent reads (tool results)", P.read, C.read],
      ["tokens of the meta-tool definitions needed", P.definitions, C.definitions],
      ["input tokens over all turns (context re-read per turn)", P.inputOverTurns, C.inputOverTurns],
    ];
    console.log(`| measure | execute_tool / read_resource | run_code | plain ÷ run_code |`);
    console.log(`| --- | --- | --- | --- |`);
    for (const [name, x, y] of rows) console.log(`| ${name} | ${x} | ${y} | ${ratio(x, y)} |`);
    console.log(
      `\n${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, Node ${process.version}, cl100k_base; wall time plain ${plainMs.toFixed(0)} ms then ${plainWarmMs.toFixed(0)} ms, run_code ${codeMs.toFixed(0)} ms (loads the engine) then ${codeWarmMs.toFixed(0)} ms (load ${os.loadavg()[0]!.toFixed(1)}; no model in the loop, so a model's seconds per round trip come on top of the plain path's)`,
    );
    await a.close();
    await b.close();
  } finally {
    await gateway.close();
  }
}

await main();
