#!/usr/bin/env node
/**
 * The `emceepee` CLI: argv → config → createGateway(). The only place that
 * prints to the terminal or exits the process, and so the one that makes sure
 * no upstream process outlives it (see the exit paths below).
 */
import { Command, InvalidArgumentError, Option } from "commander";
import { loadConfig } from "../config/load.js";
import { DEFAULT_SETTINGS } from "../config/schema.js";
import { GatewayError, errorMessage } from "../errors.js";
import { createLogger } from "../logging.js";
import { createGateway, type Gateway, type StdioFace } from "../server/gateway.js";

function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n > 65535) throw new InvalidArgumentError("must be an integer from 0 to 65535");
  return n;
}

const logLevel = new Option("--log-level <level>", "log level for the JSON logs on stderr").choices([
  "trace",
  "debug",
  "info",
  "warn",
  "error",
  "fatal",
  "silent",
]);

const program = new Command().name("emceepee").description("A task-aware MCP gateway between MCP clients and any number of MCP servers.").showHelpAfterError();

program
  .command("serve")
  .description("serve the gateway over Streamable HTTP (meta-tools face at /mcp)")
  .option("-c, --config <file>", "mcpServers JSON config file (default: the embedded demo with server-everything)")
  .option("--host <host>", `interface to bind (default ${DEFAULT_SETTINGS.host})`)
  .option("-p, --port <port>", `port to listen on (default ${DEFAULT_SETTINGS.port}, 0 for any free port)`, port)
  .option("--token <token>", "require Authorization: Bearer <token> on every request (or set EMCEEPEE_TOKEN)")
  .addOption(logLevel)
  .action(async (opts: { config?: string; host?: string; port?: number; token?: string; logLevel?: string }) => {
    const config = await loadConfig({
      file: opts.config,
      overrides: { host: opts.host, port: opts.port, token: opts.token ?? process.env.EMCEEPEE_TOKEN, logLevel: opts.logLevel },
    });
    const logger = createLogger(config.gateway.logLevel);
    const gateway = createGateway(config, { logger });
    handleSignals(gateway);
    const { url } = await gateway.listen();
    const servers = Object.keys(config.mcpServers);
    process.stdout.write(`emceepee listening on ${url} (upstreams: ${servers.length ? servers.join(", ") : "none"})\n`);
  });

program
  .command("stdio")
  .description("serve the gateway over stdin/stdout, for clients that launch MCP servers as processes")
  .option("-c, --config <file>", "mcpServers JSON config file (default: the embedded demo with server-everything)")
  .option("--face <face>", "what the client sees: meta (management tools), all (every upstream, prefixed) or server:<name> (one upstream as is)", stdioFace, {
    kind: "meta",
  } as StdioFace)
  .addOption(logLevel)
  .action(async (opts: { config?: string; face: StdioFace; logLevel?: string }) => {
    const config = await loadConfig({ file: opts.config, overrides: { logLevel: opts.logLevel ?? "warn" } });
    if (opts.face.kind === "server" && !(opts.face.server in config.mcpServers)) {
      throw new InvalidArgumentError(
        `--face server:${opts.face.server}: no such server in the config (have: ${Object.keys(config.mcpServers).join(", ") || "none"})`,
      );
    }
    const gateway = createGateway(config, { logger: createLogger(config.gateway.logLevel) });
    handleSignals(gateway);
    process.stdin.once("end", () => void shutdown(gateway, 0));
    await gateway.serveStdio({ face: opts.face });
  });

function stdioFace(value: string): StdioFace {
  if (value === "meta" || value === "all") return { kind: value };
  const m = /^server:(.+)$/.exec(value);
  if (m) return { kind: "server", server: m[1]! };
  throw new InvalidArgumentError("must be meta, all or server:<name>");
}

/*
 * Exit paths. The first SIGINT/SIGTERM (or, for `stdio`, the end of stdin)
 * closes the gateway, which resolves only once every upstream process group
 * is gone, then exits 0. A second signal forces: SIGKILL to every upstream
 * group, synchronously, then exit 1. Any other exit (an uncaught error, a
 * process.exit elsewhere) still SIGKILLs what is left, from the 'exit' event.
 */
let shuttingDown = false;
async function shutdown(gateway: Gateway, code: number): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  await gateway.close().catch((err: unknown) => gateway.context.logger.error({ err: errorMessage(err) }, "shutdown_failed"));
  process.exit(code);
}

function handleSignals(gateway: Gateway): void {
  const { logger } = gateway.context;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (shuttingDown) {
        logger.warn({ signal }, "shutdown_forced");
        gateway.destroy();
        process.exit(1);
      }
      logger.info({ signal }, "shutdown_started");
      void shutdown(gateway, 0);
    });
  }
  process.on("exit", () => gateway.destroy());
}

program.parseAsync().catch((err: unknown) => {
  process.stderr.write(`emceepee: ${err instanceof GatewayError ? `${err.code}: ${err.message}` : errorMessage(err)}\n`);
  process.exit(2);
});
