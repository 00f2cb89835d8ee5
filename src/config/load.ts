/**
 * loadConfig() is the only reader of config files and the environment:
 * interpolation, envFile, relative paths, CLI overrides, disabled servers.
 * See docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ErrorCodes, GatewayError, errorMessage } from "../error-codes.js";
import { inputVariable, normalizeFormat } from "./formats.js";
import { CONFIG_PARSE, configFileSchema, type GatewayConfig } from "./schema.js";
import { governanceWarnings } from "./governance.js";
import { isStdioConfig, type ServerConfig } from "./server-entry.js";
import { closest, describeValue } from "./server-entry.js";
import { demoConfig } from "./demo.js";

export interface LoadConfigOptions {
  /** Path to a JSON config file; the embedded demo config when absent. */
  file?: string | undefined;
  /** Values from CLI flags (`host`, `port`, `token`, `logLevel`, `allowedHosts`, `allowedOrigins`, `store`) that override the file's `gateway` section; undefined values are ignored. */
  overrides?: Record<string, unknown>;
  /** `gateway` values a command uses when the file does not set that key (serve: `store` → sqlite); undefined values are ignored. */
  defaults?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
}

/** A validated config, and what the caller should tell the operator about it. */
export interface ParsedConfig {
  config: GatewayConfig;
  /** One line per key accepted but not applied, e.g. `mcpServers.fs.timeout: ignored: …; …`. Log each at warn. */
  warnings: string[];
  /** Servers skipped because their entry says `disabled: true`. Log each at info. */
  disabledServers: string[];
}

/** What loadConfig() returns: the config itself, carrying `warnings` and `disabledServers` (see ParsedConfig). */
export type LoadedConfig = GatewayConfig & { readonly warnings: readonly string[]; readonly disabledServers: readonly string[] };

export async function loadConfig(options: LoadConfigOptions = {}): Promise<LoadedConfig> {
  const env = options.env ?? process.env;
  let raw: unknown;
  let origin: string;
  let baseDir: string;
  if (options.file) {
    origin = path.resolve(options.file);
    baseDir = path.dirname(origin);
    let text: string;
    try {
      text = await readFile(origin, "utf8");
    } catch (err) {
      throw new GatewayError(ErrorCodes.CONFIG_INVALID, `cannot read config file ${origin}: ${errorMessage(err)}; check the --config path`, { cause: err });
    }
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new GatewayError(ErrorCodes.CONFIG_INVALID, `config file ${origin} is not valid JSON: ${errorMessage(err)}; fix the JSON syntax`, { cause: err });
    }
    origin = `config file ${origin}`;
  } else {
    origin = "the embedded demo config";
    baseDir = PACKAGE_DIR;
    raw = demoConfig();
  }
  const format = isObject(raw) ? normalizeFormat(raw, origin) : undefined;
  const interpolated = interpolateEnv(format?.raw ?? raw, env, [], format?.inputs ?? new Map());
  await readEnvFiles(interpolated, baseDir);
  let parsed = parseConfigDetailed(interpolated, origin);
  const fileGateway = isObject(interpolated) && isObject(interpolated.gateway) ? interpolated.gateway : {};
  const defaults = Object.fromEntries(Object.entries(options.defaults ?? {}).filter(([k, v]) => v !== undefined && !Object.hasOwn(fileGateway, k)));
  const overrides = Object.fromEntries(Object.entries(options.overrides ?? {}).filter(([, v]) => v !== undefined));
  if (Object.keys(overrides).length || Object.keys(defaults).length) {
    parsed = applyOverrides(interpolated as Record<string, unknown>, { ...defaults, ...overrides }, env);
  }
  const mcpServers = Object.fromEntries(Object.entries(parsed.config.mcpServers).map(([name, c]) => [name, resolveRelativePaths(c, baseDir)]));
  const { store } = parsed.config.gateway;
  const withStore =
    store.path === undefined ? parsed.config.gateway : { ...parsed.config.gateway, store: { ...store, path: path.resolve(baseDir, store.path) } };
  const gateway = withVaultKeys(withStore, env, baseDir);
  return Object.freeze({
    ...parsed.config,
    mcpServers,
    gateway,
    warnings: Object.freeze([...(format?.warnings ?? []), ...parsed.warnings]),
    disabledServers: Object.freeze(parsed.disabledServers),
  });
}

/** gateway.vault's keys: EMCEEPEE_VAULT_KEY when the file names none; a relative keyFile against `baseDir`. */
function withVaultKeys(gateway: GatewayConfig["gateway"], env: NodeJS.ProcessEnv, baseDir: string): GatewayConfig["gateway"] {
  const { vault } = gateway;
  if (vault.keyFile !== undefined) return { ...gateway, vault: { ...vault, keyFile: path.resolve(baseDir, vault.keyFile) } };
  const fromEnv = env.EMCEEPEE_VAULT_KEY;
  return vault.keys === undefined && fromEnv !== undefined && fromEnv.trim() !== "" ? { ...gateway, vault: { ...vault, keys: fromEnv } } : gateway;
}

/** The package folder (this file is src/config/load.ts or dist/config/load.js). */
const PACKAGE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** A stdio server's relative `cwd` against `baseDir`, a relative `command` path against that cwd (else `baseDir`); see the header. */
export function resolveRelativePaths(config: ServerConfig, baseDir: string): ServerConfig {
  if (!isStdioConfig(config)) return config;
  const cwd = config.cwd === undefined ? undefined : path.resolve(baseDir, config.cwd);
  const isPath = config.command.includes("/") || (process.platform === "win32" && config.command.includes("\\"));
  const command = isPath && !path.isAbsolute(config.command) ? path.resolve(cwd ?? baseDir, config.command) : config.command;
  return { ...config, command, ...(cwd !== undefined ? { cwd } : {}) };
}

/** Validates a config object (no files, no environment): enabled servers only, frozen. */
export function parseConfig(raw: unknown, origin = "config"): GatewayConfig {
  return parseConfigDetailed(raw, origin).config;
}

/** parseConfig() with the warnings and disabled servers it found. */
export function parseConfigDetailed(raw: unknown, origin = "config"): ParsedConfig {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new GatewayError(
      ErrorCodes.CONFIG_INVALID,
      `invalid ${origin}: must be a JSON object like {"mcpServers": {...}} (got ${describeValue(raw)}); write it that way`,
    );
  }
  const format = normalizeFormat(raw as Record<string, unknown>, origin);
  const parsed = configFileSchema.safeParse(format.raw, { ...CONFIG_PARSE, reportInput: true });
  if (!parsed.success) {
    throw new GatewayError(ErrorCodes.CONFIG_INVALID, `invalid ${origin}:\n${formatZodError(parsed.error, configFileSchema)}`, { cause: parsed.error });
  }
  return build(parsed.data, format.warnings);
}

function build(data: z.infer<typeof configFileSchema>, topLevelWarnings: readonly string[] = []): ParsedConfig {
  const mcpServers: Record<string, ServerConfig> = {};
  const warnings: string[] = [...topLevelWarnings];
  const disabledServers: string[] = [];
  for (const [name, entry] of Object.entries(data.mcpServers)) {
    if (entry.disabled) {
      disabledServers.push(name);
      continue;
    }
    mcpServers[name] = entry.config;
    for (const w of entry.warnings) warnings.push(`${formatPath(["mcpServers", name, w.key])}: ${w.message}`);
  }
  warnings.push(...governanceWarnings(data.gateway.governance, Object.keys(data.mcpServers)));
  return { config: Object.freeze({ mcpServers, gateway: data.gateway }), warnings, disabledServers };
}

// ---------------------------------------------------------------- CLI overrides

const FLAG_OF: Record<string, string> = {
  host: "--host",
  port: "--port",
  token: "--token",
  logLevel: "--log-level",
  allowedHosts: "--allowed-hosts",
  allowedOrigins: "--allowed-origins",
  store: "--store",
};

/** The file already passed on its own, so every problem left is an override's: report it as that flag's. */
function applyOverrides(file: Record<string, unknown>, overrides: Record<string, unknown>, env: NodeJS.ProcessEnv): ParsedConfig {
  const gateway = (file.gateway ?? {}) as Record<string, unknown>;
  const parsed = configFileSchema.safeParse({ ...file, gateway: { ...gateway, ...overrides } }, CONFIG_PARSE);
  if (parsed.success) return build(parsed.data);
  const label = (key: string) =>
    key === "token" && env.EMCEEPEE_TOKEN !== undefined && env.EMCEEPEE_TOKEN === overrides.token ? "EMCEEPEE_TOKEN" : (FLAG_OF[key] ?? `the ${key} override`);
  const lines = parsed.error.issues.map((issue) => {
    const [top, key] = issue.path;
    if (top === "gateway" && typeof key === "string" && key in overrides) {
      const value = overrides[key];
      // Never echo a token.
      const got = key === "token" && typeof value === "string" ? `a ${value.length}-character string` : describeValue(value);
      return `  - ${label(key)}: ${issue.message} (got ${got}); change the value of ${label(key)}`;
    }
    if (top === "gateway" && issue.path.length === 1 && issue.code === "unrecognized_keys") {
      return `  - ${issue.keys.map((k) => label(k)).join(", ")}: not a gateway setting; remove it (settings: ${Object.keys(FLAG_OF).join(", ")})`;
    }
    return `  - ${formatIssue(issue, configFileSchema)}`;
  });
  const s = lines.length === 1 ? "" : "s";
  throw new GatewayError(ErrorCodes.CONFIG_INVALID, `invalid command-line option${s}:\n${lines.join("\n")}`, { cause: parsed.error });
}

// ---------------------------------------------------------------- messages

/** One line per problem, each naming the key path, e.g. `  - gateway.tasks.maxTtlMs: ...`. */
export function formatZodError(error: z.ZodError, root?: z.ZodType): string {
  return error.issues.map((issue) => `  - ${formatIssue(issue, root)}`).join("\n");
}

function formatIssue(issue: z.core.$ZodIssue, root: z.ZodType | undefined): string {
  const where = issue.path.length ? `${formatPath(issue.path)}: ` : "";
  if (issue.code === "unrecognized_keys") {
    const accepted = root ? keysAt(root, issue.path) : undefined;
    const keys = issue.keys.map((k) => {
      const guess = accepted && closest(k, accepted);
      return `'${k}'${guess ? ` (did you mean '${guess}'?)` : ""}`;
    });
    const them = issue.keys.length === 1 ? "it" : "them";
    return `${where}unknown key${issue.keys.length === 1 ? "" : "s"} ${keys.join(", ")}${accepted ? `; accepted keys: ${accepted.join(", ")}` : ""}; fix or remove ${them}`;
  }
  if (issue.code === "invalid_key") return `${where}${issue.issues.map((i) => i.message).join("; ")}`;
  // Messages written here (server entries) already say what to do; zod's own ones (gateway settings) get the value and a pointer.
  if (issue.message.includes("; ")) return `${where}${issue.message}`;
  const secret = issue.path.some((seg) => seg === "token" || seg === "headers" || seg === "env");
  const got = "input" in issue && !secret ? ` (got ${describeValue(issue.input)})` : "";
  return `${where}${issue.message}${got}; see docs/config.md for what is allowed`;
}

/** The keys the object schema at `at` accepts (through defaults/optionals), if it is an object. */
function keysAt(root: z.ZodType, at: readonly PropertyKey[]): string[] | undefined {
  const unwrap = (s: z.core.$ZodType): z.core.$ZodType => {
    while ("innerType" in s._zod.def) s = s._zod.def.innerType as z.core.$ZodType;
    return s;
  };
  let schema = unwrap(root);
  for (const seg of at) {
    if (!(schema instanceof z.ZodObject) || typeof seg !== "string") return undefined;
    const next = (schema.shape as Record<string, z.core.$ZodType | undefined>)[seg];
    if (!next) return undefined;
    schema = unwrap(next);
  }
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : undefined;
}

/** `mcpServers.fs.args[0]`, `mcpServers["my server"]`: a key path as it would be written. */
export function formatPath(at: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of at) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (typeof seg === "string" && /^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out || "(root)";
}

// ---------------------------------------------------------------- environment

/** VS Code's `${input:<id>}` (formats.ts). */
/** One pass over both kinds, so a value substituted is never scanned again (a secret may contain `${`). */
const PLACEHOLDER = /\$\{input:([^}]+)\}|\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;
/** Cursor's placeholders that are not environment variables and that emceepee cannot know. */
const CURSOR_ONLY = new Set(["workspaceFolder", "workspaceFolderBasename"]);

function interpolateEnv(value: unknown, env: NodeJS.ProcessEnv, at: PropertyKey[], inputs: ReadonlyMap<string, string>): unknown {
  if (typeof value === "string") {
    return value.replace(PLACEHOLDER, (_m, id: string | undefined, envPrefix: string | undefined, name: string, fallback: string | undefined) => {
      if (id !== undefined) return inputValue(id, env, inputs, at);
      const v = env[name];
      // As in the shell, `${VAR:-default}` also uses the default when VAR is set but empty.
      if (fallback !== undefined) return v === undefined || v === "" ? fallback : v;
      if (v !== undefined) return v;
      if (!envPrefix && name === "userHome") return env.HOME ?? env.USERPROFILE ?? os.homedir();
      const where = formatPath(at);
      if (!envPrefix && CURSOR_ONLY.has(name)) {
        throw new GatewayError(
          ErrorCodes.CONFIG_INVALID,
          `${where}: \${${name}} is Cursor's project folder, which emceepee cannot know; write the path instead`,
        );
      }
      throw new GatewayError(
        ErrorCodes.CONFIG_INVALID,
        `${where}: environment variable ${name} is not set; set it, or write \${${name}:-default} to give a default`,
      );
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolateEnv(v, env, [...at, i], inputs));
  if (value && typeof value === "object") {
    // A disabled server is not run, so what it would need from the environment is not required.
    if (at.length === 2 && at[0] === "mcpServers" && (value as { disabled?: unknown }).disabled === true) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateEnv(v, env, [...at, k], inputs)]));
  }
  return value;
}

/** `${input:<id>}`: the environment variable inputVariable(id) names; an error that says which to set. */
function inputValue(id: string, env: NodeJS.ProcessEnv, inputs: ReadonlyMap<string, string>, at: PropertyKey[]): string {
  const name = inputVariable(id);
  const v = env[name];
  if (v !== undefined) return v;
  const description = inputs.get(id);
  const what = description ? ` ("${description}")` : inputs.has(id) ? "" : " (not declared in inputs)";
  throw new GatewayError(
    ErrorCodes.CONFIG_INVALID,
    `${formatPath(at)}: \${input:${id}}${what} is prompted for by VS Code, and a gateway cannot prompt; set environment variable ${name} to its value`,
  );
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Cursor's `envFile` (stdio servers): read it and merge its variables under `env` (`env` wins). Mutates the interpolated copy. */
async function readEnvFiles(raw: unknown, baseDir: string): Promise<void> {
  if (!isObject(raw) || !isObject(raw.mcpServers)) return;
  for (const [name, entry] of Object.entries(raw.mcpServers)) {
    // Remote or malformed entries keep their envFile: the schema reports it with the entry's other problems.
    if (!isObject(entry) || !("envFile" in entry) || entry.command === undefined || entry.url !== undefined) continue;
    const where = formatPath(["mcpServers", name, "envFile"]);
    const file = entry.envFile;
    if (typeof file !== "string" || !file) {
      throw new GatewayError(ErrorCodes.CONFIG_INVALID, `${where}: must be the path of a KEY=VALUE file (got ${describeValue(file)}); write e.g. ".env"`);
    }
    const resolved = path.resolve(baseDir, file);
    let text: string;
    try {
      text = await readFile(resolved, "utf8");
    } catch (err) {
      throw new GatewayError(
        ErrorCodes.CONFIG_INVALID,
        `${where}: cannot read ${resolved}: ${errorMessage(err)}; fix the path (relative paths start at the config file's folder) or remove envFile`,
        { cause: err },
      );
    }
    const vars = parseEnvFile(text, `${where} (${resolved})`);
    if (entry.env === undefined || isObject(entry.env)) entry.env = { ...vars, ...(entry.env ?? {}) };
    delete entry.envFile;
  }
}

/** `KEY=VALUE` lines, optionally `export KEY=VALUE`; `#` comments; values may be quoted ('…' literal, "…" with \n). */
function parseEnvFile(text: string, where: string): Record<string, string> {
  const vars: Record<string, string> = {};
  text.split(/\r?\n/).forEach((line, i) => {
    const t = line.trim();
    if (!t || t.startsWith("#")) return;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*)$/.exec(t);
    if (!m) throw new GatewayError(ErrorCodes.CONFIG_INVALID, `${where} line ${i + 1}: expected KEY=VALUE; fix or comment out the line`);
    const value = m[2]!;
    const quoted = /^(["'])(.*)\1$/.exec(value);
    if (quoted) vars[m[1]!] = quoted[1] === '"' ? quoted[2]!.replace(/\\n/g, "\n") : quoted[2]!;
    else vars[m[1]!] = value.replace(/\s+#.*$/, "");
  });
  return vars;
}
