/**
 * loadConfig() is the only reader of config files and the environment.
 * `${VAR}` and `${VAR:-default}` are interpolated in every string value;
 * a missing variable without a default is an error that names it.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { z } from "zod";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { configFileSchema, type GatewayConfig } from "./schema.js";
import { demoConfig } from "./demo.js";

export interface LoadConfigOptions {
  /** Path to a JSON config file; the embedded demo config when absent. */
  file?: string | undefined;
  /** Values from CLI flags that override the file's `gateway` section. */
  overrides?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
}

export async function loadConfig(options: LoadConfigOptions = {}): Promise<GatewayConfig> {
  const env = options.env ?? process.env;
  let raw: unknown;
  let origin: string;
  if (options.file) {
    origin = path.resolve(options.file);
    let text: string;
    try {
      text = await readFile(origin, "utf8");
    } catch (err) {
      throw new GatewayError(ErrorCodes.CONFIG_INVALID, `cannot read config file ${origin}: ${errorMessage(err)}`);
    }
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new GatewayError(ErrorCodes.CONFIG_INVALID, `config file ${origin} is not valid JSON: ${errorMessage(err)}`);
    }
  } else {
    origin = "the embedded demo config";
    raw = demoConfig();
  }
  const interpolated = interpolateEnv(raw, env, "");
  if (options.overrides && typeof interpolated === "object" && interpolated !== null) {
    const obj = interpolated as Record<string, unknown>;
    const gateway = (obj.gateway ?? {}) as Record<string, unknown>;
    obj.gateway = { ...gateway, ...stripUndefined(options.overrides) };
  }
  return parseConfig(interpolated, origin);
}

export function parseConfig(raw: unknown, origin = "config"): GatewayConfig {
  const parsed = configFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new GatewayError(ErrorCodes.CONFIG_INVALID, `invalid ${origin}:\n${formatZodError(parsed.error)}`);
  }
  return Object.freeze(parsed.data);
}

/** One line per problem, each naming the key path, e.g. `gateway.tasks.maxTtlMs: ...`. */
export function formatZodError(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const where = issue.path.length ? issue.path.map(String).join(".") : "(root)";
      if (issue.code === "unrecognized_keys") {
        return `  - ${where === "(root)" ? "" : where + ": "}unknown key(s) ${issue.keys.map((k) => `'${k}'`).join(", ")}`;
      }
      return `  - ${where}: ${issue.message}`;
    })
    .join("\n");
}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

function interpolateEnv(value: unknown, env: NodeJS.ProcessEnv, where: string): unknown {
  if (typeof value === "string") {
    return value.replace(VAR, (_m, name: string, fallback: string | undefined) => {
      const v = env[name];
      // As in the shell, `${VAR:-default}` also uses the default when VAR is set but empty.
      if (fallback !== undefined) return v === undefined || v === "" ? fallback : v;
      if (v !== undefined) return v;
      throw new GatewayError(
        ErrorCodes.CONFIG_INVALID,
        `${where || "(root)"}: environment variable ${name} is not set (use \${${name}:-default} for a default)`,
      );
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolateEnv(v, env, `${where}[${i}]`));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateEnv(v, env, where ? `${where}.${k}` : k)]));
  }
  return value;
}

function stripUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}
