/**
 * The `emceepee` commands: argv → config → createGateway(). With main.ts, the
 * only place that prints to the terminal or exits the process (exit paths
 * and reload: lifecycle.ts). `run()` is also what `npm start`
 * (scripts/start.mjs) calls, in its own process, after building dist/.
 * Each command imports what it runs when it runs: --version and --help load
 * commander, this folder's option parsers and observability/build-info.ts
 * (the version and store schema version), not the gateway
 * (docs/adr/0017-lazy-start.md; test/unit/cli-lazy.test.ts).
 */
import path from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { DEFAULT_HOST, DEFAULT_PORT } from "../config/cli-defaults.js";
import type { LoadConfigOptions } from "../config/load.js";
import type { GatewaySettings } from "../config/schema.js";
import type { LogFormat } from "../logging.js";
import { versionLine } from "../observability/build-info.js";
import type { StdioFace } from "../server/gateway.js";
import { accessLogOption, configOption, hostList, logFormatOption, logLevelOption, originList, port, stdioFace, storeOption } from "./options.js";

export interface RunOptions {
  /** See ExitPathOptions.repeatWindowMs (npm start sets it). */
  repeatWindowMs?: number;
}

interface StdioCommandOptions {
  config?: string;
  face: StdioFace;
  logLevel?: string;
  logFormat?: LogFormat;
  accessLog: boolean;
  store?: GatewaySettings["store"];
}

interface ServeOptions {
  config?: string;
  host?: string;
  port?: number;
  token?: string;
  logLevel?: string;
  logFormat?: LogFormat;
  allowedHosts?: string[];
  allowedOrigins?: string[];
  upstreamCheck: boolean;
  /** false with --no-access-log (commander's default true means "the file decides"). */
  accessLog: boolean;
  store?: GatewaySettings["store"];
}

export function buildProgram(options: RunOptions = {}): Command {
  const program = new Command()
    .name("emceepee")
    .description("A task-aware MCP gateway between MCP clients and any number of MCP servers.")
    .version(versionLine(), "-V, --version", "print the version, the store schema version and the Node.js version, and exit")
    .showHelpAfterError();

  program
    .command("serve")
    .description("serve the gateway over Streamable HTTP (meta-tools face at /mcp; SIGHUP reloads the config)")
    .addOption(configOption())
    .option("--host <host>", `interface to bind (default: gateway.host, else ${DEFAULT_HOST}; 0.0.0.0 for every interface)`)
    .option("-p, --port <port>", `port to listen on (default: gateway.port, else ${DEFAULT_PORT}; 0 for any free port)`, port)
    .option("--token <token>", "require Authorization: Bearer <token> on every request except /healthz and /readyz (or set EMCEEPEE_TOKEN)")
    .option("--allowed-hosts <hosts>", "Host header values accepted besides loopback names, comma-separated (replaces gateway.allowedHosts)", hostList)
    .option("--allowed-origins <origins>", "browser Origins accepted besides loopback ones, comma-separated (replaces gateway.allowedOrigins)", originList)
    .option("--no-upstream-check", "do not try each upstream once in the background after start")
    .addOption(accessLogOption())
    .addOption(storeOption("serve"))
    .addOption(logLevelOption())
    .addOption(logFormatOption())
    .action(async (opts: ServeOptions) => {
      const { loadConfig } = await import("../config/load.js");
      const load: LoadConfigOptions = {
        file: opts.config,
        overrides: {
          host: opts.host,
          port: opts.port,
          token: opts.token ?? process.env.EMCEEPEE_TOKEN,
          logLevel: opts.logLevel,
          allowedHosts: opts.allowedHosts,
          allowedOrigins: opts.allowedOrigins,
          accessLog: opts.accessLog ? undefined : false,
          store: opts.store,
        },
        // A served gateway keeps its state across restarts unless the file or --store says otherwise.
        defaults: { store: { kind: "sqlite" } },
      };
      // The config first: a bad one is reported before the gateway's modules load (about 1 s of CPU).
      const config = await loadConfig(load);
      // Then the upstreams' processes, so that their start overlaps the gateway's (docs/adr/0039).
      const early = opts.upstreamCheck ? await (await import("./early.js")).startEarly(config) : undefined;
      const { createLogger, defaultLogFormat } = await import("../logging.js");
      const { createGateway } = await import("../server/gateway.js");
      const { GatewayError } = await import("../errors.js");
      const { banner, exposureWarning, listenFailure } = await import("./banner.js");
      const { installExitPaths, reportConfig } = await import("./lifecycle.js");
      const logger = createLogger(config.gateway.logLevel, undefined, opts.logFormat ?? defaultLogFormat());
      reportConfig(config, logger);
      const exposed = exposureWarning(config.gateway);
      if (exposed) {
        process.stderr.write(`emceepee: ${exposed}\n`);
        logger.warn({ host: config.gateway.host }, "listening_beyond_loopback_without_token");
      }
      const gateway = createGateway(config, { logger, ...(early ? { early: early.early } : {}) });
      installExitPaths(gateway, { reload: () => loadConfig(load), repeatWindowMs: options.repeatWindowMs });
      early?.handOver();
      let url: string;
      try {
        ({ url } = await gateway.listen());
      } catch (err) {
        await gateway.close();
        // The gateway's own start-up errors (EMCP_STORE_UNAVAILABLE: the state store) say what to do already.
        throw err instanceof GatewayError ? err : listenFailure(err, config.gateway.host, config.gateway.port);
      }
      process.stdout.write(banner(url, Object.keys(config.mcpServers), opts.upstreamCheck, config.gateway));
      if (opts.upstreamCheck) void gateway.checkUpstreams();
    });

  program
    .command("stdio")
    .description("serve the gateway over stdin/stdout, for clients that launch MCP servers as processes (SIGHUP reloads the config)")
    .addOption(configOption())
    .addOption(
      new Option(
        "--face <face>",
        "what the client sees: meta (management tools), all (every upstream, prefixed), server:<name> (one upstream as is) or virtual:<name> (a virtual server)",
      )
        .argParser(stdioFace)
        .default({ kind: "meta" } satisfies StdioFace, "meta"),
    )
    .addOption(accessLogOption())
    .addOption(storeOption("stdio"))
    .addOption(logLevelOption())
    .addOption(logFormatOption())
    .action(async (opts: StdioCommandOptions) => {
      const { loadConfig } = await import("../config/load.js");
      const load: LoadConfigOptions = {
        file: opts.config,
        overrides: { logLevel: opts.logLevel, accessLog: opts.accessLog ? undefined : false, store: opts.store },
      };
      // As serve: the config before the gateway's modules.
      const config = await loadConfig(load);
      if (opts.face.kind === "server" && !(opts.face.server in config.mcpServers)) {
        throw new InvalidArgumentError(
          `--face server:${opts.face.server}: no such server in the config (have: ${Object.keys(config.mcpServers).join(", ") || "none"})`,
        );
      }
      const virtualName = opts.face.kind === "virtual" ? opts.face.name : undefined;
      if (virtualName !== undefined && !config.gateway.governance.virtualServers.some((v) => v.name === virtualName)) {
        throw new InvalidArgumentError(
          `--face virtual:${virtualName}: no such virtual server in gateway.governance.virtualServers (have: ${config.gateway.governance.virtualServers.map((v) => v.name).join(", ") || "none"})`,
        );
      }
      const { createLogger, defaultLogFormat } = await import("../logging.js");
      const { createGateway } = await import("../server/gateway.js");
      const { installExitPaths, reportConfig } = await import("./lifecycle.js");
      const logger = createLogger(config.gateway.logLevel, undefined, opts.logFormat ?? defaultLogFormat());
      reportConfig(config, logger);
      const gateway = createGateway(config, { logger });
      const exits = installExitPaths(gateway, { reload: () => loadConfig(load), repeatWindowMs: options.repeatWindowMs });
      process.stdin.once("end", () => void exits.shutdown(0));
      await gateway.serveStdio({ face: opts.face });
    });

  program
    .command("check")
    .description("validate a config without serving: exit 0 if valid, 2 if not (with --connect: 1 if an upstream cannot be reached)")
    .addOption(configOption())
    .option("--connect", "also start/connect to each upstream once, list its tools and report")
    .option("--token <token>", "the token serve would require (or set EMCEEPEE_TOKEN), validated as serve does")
    .addOption(logLevelOption("error"))
    .action(async (opts: { config?: string; connect?: boolean; logLevel?: string; token?: string }) => {
      const { loadConfig } = await import("../config/load.js");
      const { createLogger } = await import("../logging.js");
      const { connectEach, describeConfig } = await import("./check.js");
      const config = await loadConfig({
        file: opts.config,
        overrides: { logLevel: opts.logLevel ?? "error", token: opts.token ?? process.env.EMCEEPEE_TOKEN },
      });
      process.stdout.write(describeConfig(config, opts.config ? path.resolve(opts.config) : "the embedded demo config"));
      if (opts.connect) process.exitCode = await connectEach(config, createLogger(config.gateway.logLevel), (text) => process.stdout.write(text));
    });

  program
    .command("audit")
    .description("governance decision records (docs/adr/0022)")
    .command("export")
    .description("write the decision records of the state store as JSON lines on stdout, oldest first")
    .addOption(configOption())
    .addOption(storeOption("serve"))
    .option("--since <time>", "only records at or after this ISO date-time or epoch ms")
    .option("--limit <n>", "at most this many records", (v) => {
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("a positive integer");
      return n;
    })
    .action(async (opts: { config?: string; store?: GatewaySettings["store"]; since?: string; limit?: number }) => {
      const { loadConfig } = await import("../config/load.js");
      const { exportDecisions, parseSince } = await import("./audit.js");
      const config = await loadConfig({ file: opts.config, overrides: { logLevel: "error", store: opts.store }, defaults: { store: { kind: "sqlite" } } });
      const query = { ...(opts.since !== undefined ? { since: parseSince(opts.since) } : {}), ...(opts.limit !== undefined ? { limit: opts.limit } : {}) };
      await exportDecisions(config.gateway.store, query, (line) => process.stdout.write(line));
    });

  program
    .command("schema")
    .description('print a JSON Schema of the config file (for editors: "$schema": "<the file you saved it to>")')
    .action(async () => {
      const { configJsonSchema } = await import("../config/json-schema.js");
      process.stdout.write(JSON.stringify(configJsonSchema(), null, 2) + "\n");
    });

  return program;
}

/** Parses argv and runs the command; a failure prints `emceepee: <message>` and exits 2. */
export function run(argv: readonly string[], options: RunOptions = {}): Promise<void> {
  return buildProgram(options)
    .parseAsync([...argv])
    .then(
      () => undefined,
      async (err: unknown) => {
        const { GatewayError, errorMessage } = await import("../errors.js");
        process.stderr.write(`emceepee: ${err instanceof GatewayError ? `${err.code}: ${err.message}` : errorMessage(err)}\n`);
        process.exit(2);
      },
    );
}
