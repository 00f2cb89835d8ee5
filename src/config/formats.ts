/**
 * Other clients' config files, read as they are written (design UP-1):
 *
 * - Claude Desktop, Cursor, Cline…: `{"mcpServers": …}` plus keys of their own
 *   at the top (`globalShortcut`, …): ignored with a warning each, unless the
 *   key looks like a typo of ours (`mcpServer`), which stays an error.
 * - Editors: `$schema` is accepted silently (`emceepee schema` prints ours).
 * - VS Code's `mcp.json`: `{"servers": …, "inputs": [...]}`. `servers` is read
 *   as `mcpServers`; `${input:<id>}` placeholders, which VS Code fills by
 *   prompting, are read from the environment variable named after the id
 *   (`github-token` → `GITHUB_TOKEN`), since a gateway cannot prompt.
 */
import { ErrorCodes, GatewayError } from "../error-codes.js";
import { closest, describeValue } from "./server-entry.js";

/** The top-level keys emceepee's own format has. */
export const TOP_LEVEL_KEYS = ["mcpServers", "gateway"] as const;

/** VS Code's per-server keys that mean nothing to a gateway (dropped with a warning). */
const VSCODE_ONLY_SERVER_KEYS = ["dev", "gallery", "version"];

export interface NormalizedFormat {
  /** A copy in emceepee's own format (only `mcpServers` and `gateway` at the top). */
  raw: Record<string, unknown>;
  /** One line per key ignored, for the operator. */
  warnings: string[];
  /** VS Code's `inputs` by id (their description, for messages). */
  inputs: ReadonlyMap<string, string>;
}

/** Reads `raw` (a JSON object) in any of the formats above; throws EMCP_CONFIG_INVALID for what cannot be meant. */
export function normalizeFormat(raw: Record<string, unknown>, origin: string): NormalizedFormat {
  const warnings: string[] = [];
  const inputs = new Map<string, string>();
  const out: Record<string, unknown> = {};
  const hasVsCodeServers = Object.hasOwn(raw, "servers");
  if (hasVsCodeServers && Object.hasOwn(raw, "mcpServers")) {
    throw new GatewayError(
      ErrorCodes.CONFIG_INVALID,
      `invalid ${origin}: it has both "mcpServers" and VS Code's "servers"; keep one of them (emceepee reads either)`,
    );
  }
  for (const [key, value] of Object.entries(raw)) {
    if (key === "mcpServers" || key === "gateway") out[key] = value;
    else if (key === "$schema") continue;
    else if (key === "servers") out.mcpServers = vsCodeServers(value, warnings);
    else if (key === "inputs" && hasVsCodeServers) readInputs(value, inputs, origin);
    else {
      const guess = closest(key, TOP_LEVEL_KEYS);
      if (guess) {
        throw new GatewayError(
          ErrorCodes.CONFIG_INVALID,
          `invalid ${origin}:\n  - unknown key '${key}' (did you mean '${guess}'?); accepted keys: ${TOP_LEVEL_KEYS.join(", ")}; fix or remove it`,
        );
      }
      warnings.push(`${key}: ignored: not an emceepee setting (another client's key?); emceepee reads only ${TOP_LEVEL_KEYS.join(" and ")}`);
    }
  }
  return { raw: out, warnings, inputs };
}

function vsCodeServers(value: unknown, warnings: string[]): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
  return Object.fromEntries(
    Object.entries(value).map(([name, entry]) => {
      if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return [name, entry];
      const copy = { ...(entry as Record<string, unknown>) };
      for (const key of VSCODE_ONLY_SERVER_KEYS) {
        if (!(key in copy)) continue;
        delete copy[key];
        warnings.push(`servers.${name}.${key}: ignored: a VS Code editor setting, not used by a gateway`);
      }
      return [name, copy];
    }),
  );
}

function readInputs(value: unknown, inputs: Map<string, string>, origin: string): void {
  if (!Array.isArray(value)) {
    throw new GatewayError(
      ErrorCodes.CONFIG_INVALID,
      `invalid ${origin}: inputs must be VS Code's array of {"id", "type", "description"} (got ${describeValue(value)})`,
    );
  }
  for (const [i, input] of value.entries()) {
    const id = typeof input === "object" && input !== null ? (input as { id?: unknown }).id : undefined;
    if (typeof id !== "string" || !id) {
      throw new GatewayError(ErrorCodes.CONFIG_INVALID, `invalid ${origin}: inputs[${i}] needs a string "id" (got ${describeValue(id)})`);
    }
    const description = (input as { description?: unknown }).description;
    inputs.set(id, typeof description === "string" ? description : "");
  }
}

/** The environment variable that gives VS Code's `${input:<id>}`: the id upper-cased, other characters as `_` (`github-token` → `GITHUB_TOKEN`). */
export function inputVariable(id: string): string {
  const name = id.toUpperCase().replace(/[^A-Z0-9_]/g, "_");
  return /^[0-9]/.test(name) ? `_${name}` : name;
}
