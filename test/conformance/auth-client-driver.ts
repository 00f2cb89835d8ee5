/**
 * The conformance suite's client command for its `auth/*` scenarios (issue
 * 23; test/conformance/auth-client-scenarios.test.ts runs it): the suite
 * appends its MCP server's URL; this starts a gateway in process with that
 * URL as the upstream `conf` with `auth: { type: "oauth" }` (the scenario's
 * pre-registered client from MCP_CONFORMANCE_CONTEXT, if any), calls
 * `test-tool` through the meta face, and plays the person: each
 * authorization URL the gateway hands out is followed headlessly (the
 * scenario's authorization server redirects at once) to the gateway's own
 * callback and completion page, then the waiting call's result is awaited.
 * Exits 0 once the tool answered, 1 otherwise (the suite judges the wire).
 */
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { startGateway, type TestGateway } from "../helpers/gateway.js";

/** The client id the suite's CIMD scenario expects (SEP-991): the gateway's document URL behind this public URL. */
const CIMD_PUBLIC_URL = "https://conformance-test.local";

const serverUrl = process.argv.at(-1) ?? "";
const scenario = process.env["MCP_CONFORMANCE_SCENARIO"] ?? "";
const context = JSON.parse(process.env["MCP_CONFORMANCE_CONTEXT"] ?? "{}") as { client_id?: string; client_secret?: string };
const log = (line: string) => process.stderr.write(`[driver ${scenario}] ${line}\n`);

/** The authorization URLs a meta-tool answer hands out (a waiting task's `authorization_url`, or an error's "open <url>"). */
function authorizationUrls(r: CallToolResult): string[] {
  const text = r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
  return [...new Set([...text.matchAll(/"authorization_url":\s*"([^"]+)"|open (https?:\/\/\S+) in a browser/g)].map((m) => (m[1] ?? m[2])!))];
}

function taskIdOf(r: CallToolResult): string | undefined {
  return /"task_id":\s*"([^"]+)"/.exec(r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n"))?.[1];
}

/** The person opens `url`: the authorization server redirects to the gateway's callback, whose page moves on to the completion page. */
async function consent(gw: TestGateway, url: string): Promise<void> {
  const base = new URL(gw.url).origin;
  const res = await fetch(url, { redirect: "manual" });
  const location = res.headers.get("location");
  await res.body?.cancel();
  if (!location) throw new Error(`the authorization endpoint answered ${res.status} without a redirect`);
  const back = new URL(location);
  // The callback's public URL may name the CIMD host: the same path and query on the gateway's own origin.
  const hop = await fetch(`${base}${back.pathname}${back.search}`, { redirect: "manual" });
  const next = /url=([^"]+)"/.exec(await hop.text())?.[1]?.replace(/&amp;/g, "&");
  if (!next) throw new Error(`the callback answered ${hop.status} without a next page`);
  const done = await fetch(`${base}${next}`, { redirect: "manual" });
  const text = await done.text();
  log(`completion page: ${done.status} ${/<p>([\s\S]*?)<\/p>/.exec(text)?.[1]?.trim().slice(0, 300) ?? ""}`);
}

async function main(): Promise<number> {
  const auth = {
    type: "oauth",
    ...(context.client_id ? { clientId: context.client_id } : {}),
    ...(context.client_secret ? { clientSecret: context.client_secret } : {}),
  };
  const gw = await startGateway({
    mcpServers: { conf: { url: serverUrl, auth } },
    gateway: { vault: { keys: randomBytes(32).toString("base64") }, http: { publicUrl: CIMD_PUBLIC_URL } },
  });
  const client = new Client({ name: "conformance-driver", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(gw.url)));
  try {
    let r = (await client.callTool({ name: "execute_tool", arguments: { server: "conf", tool: "test-tool", args: {} } })) as CallToolResult;
    for (let round = 0; round < 6; round++) {
      const urls = authorizationUrls(r);
      if (urls.length === 0) break;
      for (const url of urls) await consent(gw, url);
      const task = taskIdOf(r);
      r = (
        task
          ? await client.callTool({ name: "get_task_result", arguments: { task_id: task, timeout_ms: 20_000 } })
          : await client.callTool({ name: "execute_tool", arguments: { server: "conf", tool: "test-tool", args: {} } })
      ) as CallToolResult;
    }
    const text = r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
    log(`result${r.isError ? " (error)" : ""}: ${text.slice(0, 500)}`);
    return r.isError ? 1 : 0;
  } finally {
    await client.close();
    await gw.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
