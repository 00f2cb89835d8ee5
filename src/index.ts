/**
 * emceepee's public API: what `import … from "emceepee"` gives (package.json
 * `exports` maps nothing else, so no other file in dist/ can be imported).
 *
 * Anything exported here is public API: adding a name is a promise to keep it
 * working across minor versions, so export named symbols only, each on purpose.
 * The internals (sessions, faces, upstream connections, stores) stay behind
 * this facade; `Gateway` below is deliberately narrower than the composition
 * root's own type (no `context`, no injected clock/ids/transports).
 *
 *     const gateway = createGateway(parseConfig({ mcpServers: { … }, gateway: { port: 0 } }));
 *     const { url } = await gateway.listen();
 *     …
 *     await gateway.close();
 */
import { parseConfig } from "./config/load.js";
import type { z } from "zod";
import type { configFileSchema, GatewayConfig } from "./config/schema.js";
import { ErrorCodes, GatewayError } from "./errors.js";
import type { Logger } from "./logging.js";
import { createGateway as createGatewayRoot, type StdioFace } from "./server/gateway.js";

export { loadConfig, parseConfig, type LoadConfigOptions, type LoadedConfig } from "./config/load.js";
export type { GatewayConfig, GatewaySettings } from "./config/schema.js";
export type { ServerConfig, StdioServerConfig, RemoteServerConfig } from "./config/server-entry.js";
export { GatewayError, ErrorCodes, type ErrorCodeName, type GatewayErrorOptions } from "./errors.js";
export { createLogger, type Logger, type LogLevel } from "./logging.js";
export type { StdioFace };

/**
 * A config object as written (the config file's shape: `mcpServers` entries are
 * checked at run time, every `gateway` key with a default is optional).
 */
export type GatewayConfigInput = z.input<typeof configFileSchema>;

export interface GatewayOptions {
  /**
   * Where the gateway logs (a pino logger). `createLogger(config.gateway.logLevel)`
   * gives the CLI's JSON lines on stderr with secrets redacted.
   * @default a silent logger: a library writes nothing unless asked
   */
  logger?: Logger | undefined;
}

export interface StdioOptions {
  /** What the client sees. @default { kind: "meta" } (the meta-tools face) */
  face?: StdioFace | undefined;
  /** @default process.stdin */
  stdin?: NodeJS.ReadableStream | undefined;
  /** @default process.stdout */
  stdout?: NodeJS.WritableStream | undefined;
}

export interface Gateway {
  /**
   * Serves Streamable HTTP on `gateway.host`/`gateway.port` (port 0: any free
   * port) and resolves with the meta face's URL (`…/mcp`) once listening.
   * Calling it again returns the same address; after `close()` it rejects with `EMCP_CLOSED`.
   */
  listen(): Promise<{ url: string; port: number }>;
  /** Serves one session over stdio streams with the chosen face; resolves once the streams are read (the face and its upstreams start at the client's `initialize`, docs/adr/0064). */
  serveStdio(options?: StdioOptions): Promise<void>;
  /**
   * Drains and closes everything: HTTP server, sessions, upstream connections,
   * child processes and timers. Idempotent; the gateway cannot be started again.
   */
  close(): Promise<void>;
  /** Kills every stdio upstream's process group now, synchronously, draining nothing: for a forced exit. */
  destroy(): void;
}

/**
 * Creates a gateway; nothing runs until `listen()` or `serveStdio()`.
 *
 * `config` is validated (again) here, so a plain object of the config file's
 * shape works as well as the result of `parseConfig()`/`loadConfig()`: defaults
 * are filled in and a bad value throws `GatewayError` `EMCP_CONFIG_INVALID`
 * naming the key. Reading files and `${VAR}` interpolation are `loadConfig()`'s.
 */
export function createGateway(config: GatewayConfig | GatewayConfigInput, options: GatewayOptions = {}): Gateway {
  const validated = parseConfig(fileShape(config), "config passed to createGateway()");
  const root = createGatewayRoot(validated, options.logger ? { logger: options.logger } : {});
  let listening: Promise<{ url: string; port: number }> | undefined;
  let closed = false;
  const closedError = (what: string) => new GatewayError(ErrorCodes.CLOSED, `${what}: this gateway is closed; create a new one with createGateway()`);
  return {
    listen() {
      if (closed) return Promise.reject(closedError("listen()"));
      listening ??= root.listen();
      return listening;
    },
    async serveStdio(stdio = {}) {
      if (closed) throw closedError("serveStdio()");
      await root.serveStdio(definedOnly(stdio));
    },
    close() {
      closed = true;
      return root.close();
    },
    destroy() {
      closed = true;
      root.destroy();
    },
  };
}

/** `loadConfig()`'s result also carries `warnings` and `disabledServers`, which the (strict) schema would refuse. */
function fileShape(config: unknown): unknown {
  if (typeof config !== "object" || config === null || Array.isArray(config)) return config;
  const { warnings, disabledServers, ...file } = config as Record<string, unknown>;
  return Array.isArray(warnings) && Array.isArray(disabledServers) ? file : config;
}

function definedOnly({ face, stdin, stdout }: StdioOptions): { face?: StdioFace; stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } {
  return { ...(face && { face }), ...(stdin && { stdin }), ...(stdout && { stdout }) };
}
