/**
 * Test harness: an in-process gateway on an ephemeral port with real
 * upstreams, and SDK clients connected to it.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseConfig } from "../../src/config/load.js";
import { BoundedSchemaValidator } from "../../src/mcp/json-schema-validator.js";
import { everythingServerEntry } from "../../src/config/demo.js";
import { createGateway, type Gateway, type GatewayDeps } from "../../src/server/gateway.js";
import { fixtureNodeArgs } from "./cli-build.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const FIXTURES = path.join(ROOT, "test/fixtures");

/** Node arguments that run the fixture server test/fixtures/<name>.ts (compiled once, see cli-build.ts). */
export const fixtureArgs = fixtureNodeArgs;

/** server-everything over stdio, as the demo config has it. */
export function everythingStdio() {
  return { command: process.execPath, args: [everythingServerEntry(), "stdio"] };
}

/** The slow-server fixture over stdio. */
export function slowServerStdio() {
  return { command: process.execPath, args: fixtureArgs("slow-server"), cwd: ROOT };
}

/**
 * The sharing mode the suites run in: `EMCEEPEE_TEST_SHARING=shared` runs
 * them with every upstream shared (npm test runs the transparent, meta,
 * tasks and reliability suites once per mode; docs/adr/0010).
 */
export const TEST_SHARING: "session" | "shared" = process.env.EMCEEPEE_TEST_SHARING === "shared" ? "shared" : "session";

export interface TestGateway {
  gateway: Gateway;
  url: string;
  close(): Promise<void>;
}

export async function startGateway(
  raw: { mcpServers?: Record<string, unknown>; gateway?: Record<string, unknown> } = {},
  deps: GatewayDeps = {},
): Promise<TestGateway> {
  const config = parseConfig({
    mcpServers: raw.mcpServers ?? { everything: everythingStdio() },
    gateway: withFastPath(withSharing({ port: 0, logLevel: "silent", ...(raw.gateway ?? {}) })),
  });
  const gateway = createGateway(config, deps);
  const { url } = await gateway.listen();
  return { gateway, url, close: () => gateway.close() };
}

/** The suite's sharing mode as the default for every upstream (a test's own `upstream.sharing` wins). */
function withSharing(gateway: Record<string, unknown>): Record<string, unknown> {
  if (TEST_SHARING === "session") return gateway;
  const upstream = (gateway.upstream ?? {}) as Record<string, unknown>;
  return { ...gateway, upstream: { sharing: { stdio: "shared", remote: "shared" }, ...upstream } };
}

/**
 * `EMCEEPEE_TEST_FAST_PATH=1` runs the suites with the relay fast path in use: plain requests answered
 * with JSON (`http.plainJsonResponses`) and without the SDK's HTTP transport (docs/adr/0037). A test's own settings win.
 */
export const TEST_FAST_PATH = process.env.EMCEEPEE_TEST_FAST_PATH === "1";

function withFastPath(gateway: Record<string, unknown>): Record<string, unknown> {
  if (!TEST_FAST_PATH) return gateway;
  const http = (gateway.http ?? {}) as Record<string, unknown>;
  return { ...gateway, http: { plainJsonResponses: true, ...http } };
}

export interface ClientOptions {
  name?: string;
}

export async function connectClient(url: string, options: ClientOptions = {}): Promise<Client> {
  // The SDK client's own Ajv compiles every tool's outputSchema again on each tools/list (Ajv caches by schema object) and
  // keeps it: a test client that lists tools in a loop grew the test process's heap (the fuzz test's leak check measured
  // the client). The gateway's bounded validator caches by the schema's text.
  const client = new Client({ name: options.name ?? "test-client", version: "1.0.0" }, { jsonSchemaValidator: new BoundedSchemaValidator() });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** Calls a meta-tool and returns the raw result. */
export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
}

/** Text blocks of a result parsed as JSON where possible. */
export function blocks(result: CallToolResult): unknown[] {
  return result.content.map((c) => {
    if (c.type !== "text") return c;
    try {
      return JSON.parse(c.text);
    } catch {
      return c.text;
    }
  });
}

/** The first JSON object block that has `key`. */
export function block<T = any>(result: CallToolResult, key: string): T | undefined {
  for (const b of blocks(result)) {
    if (b && typeof b === "object" && key in b) return (b as Record<string, T>)[key];
  }
  return undefined;
}

/** Drains events (any tool response delivers them) so later results are bare. */
export async function drainEvents(client: Client): Promise<void> {
  await call(client, "list_servers");
}

/** Uses `server` in this session (upstreams connect on first use) until it is connected (a spawn: generous bound for a loaded machine). */
export async function waitConnected(client: Client, server: string, timeoutMs = 90_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    await call(client, "list_tools", { server });
    const servers = block<Array<{ name: string; status: string }>>(await call(client, "list_servers"), "servers") ?? [];
    if (servers.find((s) => s.name === server)?.status === "connected") return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server ${server} did not connect within ${timeoutMs}ms`);
}
