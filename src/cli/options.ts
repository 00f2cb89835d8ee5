/**
 * Parsers and shared options of the CLI's flags. Each parser rejects a bad
 * value with what was wrong and what to write (commander prints it with the
 * flag's name); defaults shown in --help are the config schema's
 * (config/cli-defaults.ts: --help loads neither zod nor the gateway).
 */
import path from "node:path";
import { InvalidArgumentError, Option } from "commander";
import { DEFAULT_LOG_LEVEL } from "../config/cli-defaults.js";
import type { StdioFace } from "../server/gateway.js";
import { defaultStorePath } from "../store/default-path.js";
import type { StoreConfig } from "../store/open.js";

export function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n > 65535) throw new InvalidArgumentError("must be an integer from 0 to 65535");
  return n;
}

/** `--allowed-hosts a.example,b.example:8808`: Host header values (name, or name:port), comma-separated. */
export function hostList(value: string): string[] {
  const hosts = commaList(value, "--allowed-hosts gateway.internal,gateway.internal:8808");
  for (const h of hosts) {
    if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(h)) {
      throw new InvalidArgumentError(`'${h}' is not a Host header value; write a host name or address, optionally with :port (e.g. gateway.internal:8808)`);
    }
  }
  return hosts;
}

/** `--allowed-origins https://app.example.com,http://localhost:3000`: browser origins, comma-separated. */
export function originList(value: string): string[] {
  const origins = commaList(value, "--allowed-origins https://app.example.com");
  for (const o of origins) {
    let origin: string | undefined;
    try {
      const u = new URL(o);
      origin = u.protocol === "http:" || u.protocol === "https:" ? u.origin : undefined;
    } catch {
      origin = undefined;
    }
    if (origin !== o) {
      throw new InvalidArgumentError(`'${o}' is not an origin; write scheme://host[:port] without a path or a trailing slash (e.g. https://app.example.com)`);
    }
  }
  return origins;
}

function commaList(value: string, example: string): string[] {
  const items = value
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "");
  if (!items.length) throw new InvalidArgumentError(`must name at least one; e.g. ${example}`);
  return items;
}

export function stdioFace(value: string): StdioFace {
  if (value === "meta" || value === "all") return { kind: value };
  const m = /^server:(.+)$/.exec(value);
  if (m) return { kind: "server", server: m[1]! };
  const v = /^virtual:(.+)$/.exec(value);
  if (v) return { kind: "virtual", name: v[1]! };
  throw new InvalidArgumentError("must be meta, all, server:<name> or virtual:<name>");
}

/**
 * `--store sqlite:<file>` (a relative file starts at the working directory, as
 * any command-line path), `--store sqlite` (the per-user file), `--store
 * redis://host:port` (or rediss://; replicas share it) or `--store memory`.
 */
export function store(value: string): StoreConfig {
  const v = value.trim();
  if (v === "memory") return { kind: "memory" };
  if (v === "sqlite") return { kind: "sqlite" };
  if (/^rediss?:\/\//i.test(v)) return { kind: "redis", url: v };
  const m = /^sqlite:(.+)$/.exec(v);
  if (m) return { kind: "sqlite", path: path.resolve(m[1]!) };
  throw new InvalidArgumentError(
    `must be sqlite:<file>, sqlite (the per-user file ${defaultStorePath()}), redis://host:port (or rediss://) or memory (nothing survives a restart)`,
  );
}

/**
 * `--store`. `serve` keeps state in SQLite unless told otherwise; `stdio` is
 * one process per client (its state ends with it), so memory.
 */
export function storeOption(command: "serve" | "stdio"): Option {
  const fallback = command === "serve" ? `sqlite at ${defaultStorePath()}` : "memory (one gateway process per client)";
  return new Option(
    "--store <store>",
    `where tasks, results, events and runtime-added servers are kept: sqlite:<file>, sqlite (${defaultStorePath()}), redis://host:port or memory (default: gateway.store, else ${fallback})`,
  ).argParser(store);
}

export function configOption(): Option {
  return new Option("-c, --config <file>", "mcpServers JSON config file (default: the embedded demo with server-everything)");
}

/** --no-access-log: no tool_call line per tool call (absent, the config file decides). */
export function accessLogOption(): Option {
  return new Option("--no-access-log", "no tool_call line per tool call (sets gateway.accessLog: false)");
}

/** --log-format json|pretty (absent: pretty on a terminal, else JSON lines). */
export function logFormatOption(): Option {
  return new Option(
    "--log-format <format>",
    "log lines on stderr: json (one object per line) or pretty (for people) (default: pretty on a terminal, else json)",
  ).choices(["json", "pretty"]);
}

export function logLevelOption(fallback = `gateway.logLevel, else ${DEFAULT_LOG_LEVEL}`): Option {
  return new Option("--log-level <level>", `log level of the JSON logs on stderr (default: ${fallback})`).choices([
    "trace",
    "debug",
    "info",
    "warn",
    "error",
    "fatal",
    "silent",
  ]);
}
