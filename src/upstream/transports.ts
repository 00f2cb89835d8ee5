/**
 * Transport factory: turns one server config into an SDK client transport.
 * Injectable (GatewayDeps.transportFactory) so tests can link in-memory peers.
 */
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { isStdioConfig, remoteTransportOf, type ServerConfig } from "../config/schema.js";

export interface CreatedTransport {
  transport: Transport;
  /** For stdio upstreams: the child's stderr, captured into the session's logs. */
  stderr?: NodeJS.ReadableStream | null;
  /** The upstream's MCP session id (streamable HTTP), read after connect. */
  sessionId?: () => string | undefined;
  /** The child's pid (stdio). */
  pid?: () => number | null;
}

export type TransportFactory = (name: string, config: ServerConfig) => CreatedTransport;

export const defaultTransportFactory: TransportFactory = (_name, config) => {
  if (isStdioConfig(config)) {
    const transport = new StdioClientTransport({
      command: config.command,
      args: config.args,
      env: { ...getDefaultEnvironment(), ...(config.env ?? {}) },
      stderr: "pipe",
      ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
    });
    return { transport, stderr: transport.stderr as NodeJS.ReadableStream | null, pid: () => transport.pid };
  }
  const url = new URL(config.url);
  const requestInit: RequestInit = config.headers ? { headers: config.headers } : {};
  if (remoteTransportOf(config) === "sse") {
    const eventSourceInit = sseInit(config.headers);
    return { transport: new SSEClientTransport(url, { requestInit, ...(eventSourceInit ? { eventSourceInit } : {}) }) };
  }
  const transport = new StreamableHTTPClientTransport(url, { requestInit });
  return { transport, sessionId: () => transport.sessionId };
};

/** EventSource does not take headers directly; pass them through its fetch. */
function sseInit(headers: Record<string, string> | undefined) {
  if (!headers) return undefined;
  return {
    fetch: (input: string | URL | Request, init?: RequestInit) =>
      fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...headers } }),
  };
}
