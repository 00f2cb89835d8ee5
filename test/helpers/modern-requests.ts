/**
 * Raw 2026-07-28 requests for tests (issue 25): the per-request envelope, the
 * version header, Mcp-Method and Mcp-Name (for the methods that name a tool,
 * resource or task), and polling a tasks-extension task with tasks/get.
 */
import assert from "node:assert/strict";

export const MODERN = "2026-07-28";
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

export interface ModernAnswer {
  status: number;
  body: { id?: unknown; result?: Record<string, any>; error?: { code: number; message: string; data?: any } };
}

export interface ModernRequestOptions {
  /** The envelope's clientCapabilities. @default the tasks extension and elicitation */
  capabilities?: object;
  /** Extra (or overriding) HTTP headers, e.g. authorization. */
  headers?: Record<string, string>;
  clientInfo?: { name: string; version: string };
  /** Hangs up when it aborts (the answer then rejects with the abort). */
  signal?: AbortSignal;
}

/** A well-formed modern request; answers its HTTP status and JSON body. */
export async function modernRequest(url: string, method: string, params: Record<string, unknown> = {}, o: ModernRequestOptions = {}): Promise<ModernAnswer> {
  const name = (params.name ?? params.uri ?? params.taskId) as string | undefined;
  const envelope = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": o.capabilities ?? { extensions: { [TASKS_EXTENSION]: {} }, elicitation: {} },
    "io.modelcontextprotocol/clientInfo": o.clientInfo ?? { name: "modern-test", version: "1" },
  };
  const res = await fetch(url, {
    method: "POST",
    ...(o.signal ? { signal: o.signal } : {}),
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": MODERN,
      "Mcp-Method": method,
      ...(name !== undefined ? { "Mcp-Name": name } : {}),
      ...o.headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { ...params, _meta: envelope } }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as ModernAnswer["body"]) : {} };
}

/** Polls tasks/get until `done` holds, within `timeoutMs` (generous: the machine is shared). */
export async function pollModernTask(
  url: string,
  taskId: string,
  done: (task: Record<string, any>) => boolean,
  what: string,
  o: ModernRequestOptions = {},
  timeoutMs = 60_000,
): Promise<Record<string, any>> {
  const deadline = Date.now() + timeoutMs;
  let last: ModernAnswer | undefined;
  while (Date.now() < deadline) {
    last = await modernRequest(url, "tasks/get", { taskId }, o);
    assert.ok(last.body.result, `tasks/get: ${JSON.stringify(last.body)}`);
    if (done(last.body.result)) return last.body.result;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the task never became ${what}; last: ${JSON.stringify(last?.body)}`);
}
