/**
 * run_code (design MF-25..MF-27, docs/adr/0028-code-mode-sandbox.md): one script in
 * a fresh sandbox whose `mcp` calls are the meta-tools' own operations. The
 * run is started like an execute_tool call and promoted to a task the same
 * way (src/tasks/execute.ts) when it outlives `timeout_ms`; the task's result
 * is the run's reply, `{result, logs, calls}` or an EMCP_CODE_* error with
 * the logs and calls so far.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { DEFAULT_SETTINGS } from "../../../config/schema.js";
import { ErrorCodes, GatewayError } from "../../../errors.js";
import { executeWithPromotion } from "../../../tasks/execute.js";
import { defineTool, json, promoted, type Extra, type MetaContext } from "../define.js";
import { taskView } from "../tools/task-view.js";
import { mcpHostOps, type CallRecord } from "./host.js";
import { runInSandbox } from "./sandbox.js";

/** The pseudo-server run_code tasks belong to (the gateway's own, as in list_resources). */
const GATEWAY = "emceepee";
const TOOL = "run_code";

const { defaultTimeoutMs: DEFAULT_TIMEOUT_MS } = DEFAULT_SETTINGS.tools;
const D = DEFAULT_SETTINGS.codeMode;

const DESCRIPTION = `Run a short JavaScript program that calls upstream tools, so a multi-step job takes one call instead of one call per step (and intermediate data need not pass through you).

The code is the body of an async function: use \`await\`, and \`return\` the value you want back (plain JSON data). Inside the program:
- \`await mcp.call(server, tool, args)\` → the tool's result \`{content, structuredContent?, isError?}\`, exactly as execute_tool returns it; the same policies, approvals and rate limits apply.
- \`mcp.json(result)\` → \`structuredContent\`, or the first text block parsed as JSON; \`mcp.text(result)\` → the text blocks joined (these two are local, not calls).
- \`await mcp.readResource(server, uri)\` → \`{contents: [{uri, mimeType, text | blob}]}\`.
- \`await mcp.getPrompt(server, name, args)\` → \`{messages: [...]}\` (args: string values).
- \`await mcp.search(query, {server?, limit?, include_schema?})\` → \`{results: [{server, name, summary, score, input_schema?}], ...}\`, as search_tools: find a tool by what it does.
- \`await mcp.listTools(server?)\` → \`[{server, tools: [{name, description, inputSchema}]}]\` (every definition: prefer mcp.search when there are many).
- \`console.log(...)\` / \`console.error(...)\` → returned in \`logs\`.
A failed mcp.* call throws an Error whose \`code\` is an EMCP_* code (e.g. EMCP_UNKNOWN_TOOL, EMCP_POLICY_DENIED); catch it to go on. A call that needs a person's approval returns execute_tool's task reply (\`structuredContent.task_id\`): return it, and follow the task with get_task_result. Calls run one at a time unless you use Promise.all.
There is nothing else: no require or import, fetch, process, file system, setTimeout; nothing survives between runs.

Reply: \`{result, logs, calls}\` (calls: each mcp.* call with its outcome). A script that throws or goes past a bound is an error (EMCP_CODE_ERROR with its line, or EMCP_CODE_LIMIT naming the bound) that still carries logs and calls. Bounds (defaults): ${D.maxCalls} mcp.* calls, ${D.cpuTimeMs} ms of computing, ${D.wallTimeMs / 1000} s in all, about ${11 + D.memoryBytes / 1024 / 1024} MiB memory, ${D.maxOutputBytes / 1024} KiB of logs + result. A run still going after \`timeout_ms\` (default ${DEFAULT_TIMEOUT_MS}) continues as a task: the reply gives task_id; get_task_result returns the same reply when it ends.

Example (read three resources, then call two tools with data from the first):
const docs = [];
for (const uri of ["demo://resource/static/document/architecture.md", "demo://resource/static/document/features.md", "demo://resource/static/document/extension.md"]) {
  const { contents } = await mcp.readResource("everything", uri);
  docs.push(contents[0].text);
}
const sum = mcp.text(await mcp.call("everything", "get-sum", { a: docs[0].length, b: docs[1].length }));
const echo = mcp.text(await mcp.call("everything", "echo", { message: docs[0].split("\\n")[0] }));
console.log("lengths", docs.map((d) => d.length));
return { sum, echo };`;

export const runCode = defineTool({
  name: TOOL,
  title: "Run a script that calls tools",
  description: DESCRIPTION,
  input: {
    code: z
      .string()
      .min(1)
      .describe("JavaScript: the body of an async function; `return` the result. `mcp` and `console` are the only globals beyond the language's own."),
    timeout_ms: z
      .number()
      .int()
      .min(0)
      .max(3_600_000)
      .optional()
      .describe(`How long to wait before the run continues as a task (default ${DEFAULT_TIMEOUT_MS})`),
  },
  enabled: (gateway) => gateway.settings.codeMode.enabled,
  async run(ctx, { code, timeout_ms }, extra) {
    const { session, gateway } = ctx;
    const limits = gateway.settings.codeMode;
    if (code.length > limits.maxCodeChars) {
      throw new GatewayError(
        ErrorCodes.BAD_ARGUMENTS,
        `the code has ${code.length} characters, more than gateway.codeMode.maxCodeChars (${limits.maxCodeChars}); send a shorter program`,
      );
    }
    const timeoutMs = timeout_ms ?? gateway.settings.tools.defaultTimeoutMs;
    const outcome = await executeWithPromotion({
      run: (o) => runScript(ctx, extra, code, o.signal),
      tasks: session.tasks,
      connection: { name: GATEWAY, upstreamSessionId: undefined, callTool: notAnUpstream },
      clock: gateway.clock,
      tool: TOOL,
      args: { code },
      timeoutMs,
      ttlMs: gateway.settings.tasks.defaultTtlMs,
      callTimeoutMs: limits.wallTimeMs,
      signal: extra.signal,
    });
    if (outcome.kind === "result") return outcome.result;
    const { task } = outcome;
    return promoted(
      json(
        { task_id: task.taskId, proxy_task: taskView(task) },
        `The script is still running after ${timeoutMs} ms; it goes on as task ${task.taskId}. get_task_result returns its reply ({result, logs, calls}) when it ends; await_activity waits for activity, cancel_task stops it.`,
      ),
    );
  },
});

/** One run: the sandbox's outcome as the tool's reply. Never rejects for what the script did. */
async function runScript(ctx: MetaContext, extra: Extra, code: string, signal: AbortSignal): Promise<CallToolResult> {
  const { gateway } = ctx;
  const limits = gateway.settings.codeMode;
  const calls: CallRecord[] = [];
  const ops = mcpHostOps({ ctx, extra, calls });
  const outcome = await runInSandbox({ code, limits, ops, clock: gateway.clock, signal });
  ctx.session.logger.debug({ ok: outcome.ok, calls: calls.length, logs: outcome.logs.length }, "run_code_end");
  if (outcome.ok) return json({ result: outcome.result, logs: outcome.logs, calls });
  const error = { code: outcome.code, message: outcome.message };
  return {
    content: [
      { type: "text", text: `${outcome.code}: ${outcome.message}` },
      { type: "text", text: JSON.stringify({ error, logs: outcome.logs, calls }) },
    ],
    structuredContent: { error, logs: outcome.logs, calls },
    isError: true,
  };
}

/** executeWithPromotion's default call path; run_code passes its own `run`, so this is never called. */
function notAnUpstream(): Promise<CallToolResult> {
  return Promise.reject(new GatewayError(ErrorCodes.INTERNAL, "run_code has no upstream to call"));
}
