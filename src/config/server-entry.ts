/**
 * One `mcpServers` entry: its name, which kind of server it is, whether its
 * keys are valid, and what the keys other MCP clients write mean here.
 *
 * The kind is chosen first by its discriminating key — `command` → stdio,
 * `url` (or Windsurf's `serverUrl`) → remote — and then only that kind is
 * validated, so each message names the key that is wrong, what is wrong with
 * it and what to write instead. (A bare `z.union` answered every problem with
 * one line: "a server needs either command or url".)
 *
 * Keys from other clients (Cline, Roo Code, Windsurf, Cursor, Claude Code) are
 * accepted so that their configs run unchanged: `disabled`, `type`,
 * `transportType` and `serverUrl` are honoured; `timeout`, `autoApprove`,
 * `alwaysAllow`, `disabledTools` and `watchPaths` are accepted and reported as
 * warnings when they would have changed behaviour. docs/config.md has the table.
 */
import { z } from "zod";

// ---------------------------------------------------------------- names

export const SERVER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Why `name` is not a valid server name, ending in what to do; undefined when it is valid. */
export function serverNameProblem(name: string): string | undefined {
  if (SERVER_NAME_PATTERN.test(name)) return undefined;
  const allowed = `server names may only contain letters, digits, "_", "-", "." (1-64 characters, starting with a letter or digit)`;
  const suggestion = name
    .replace(/[^A-Za-z0-9_.-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, 64);
  const rename = suggestion ? `rename it, e.g. ${JSON.stringify(suggestion)}` : "rename it";
  if (name.length === 0) return `${allowed}; this one is empty; ${rename}`;
  if (name.length > 64) return `${allowed}; this one has ${name.length} characters; shorten it`;
  const bad = [...new Set(name.replace(/[A-Za-z0-9_.-]/g, ""))];
  if (bad.length) return `${allowed}; this one has ${bad.map((c) => JSON.stringify(c)).join(", ")}; ${rename}`;
  return `${allowed}; this one starts with ${JSON.stringify(name[0])}; ${rename}`;
}

export const serverNameSchema = z.string().regex(SERVER_NAME_PATTERN, { error: (iss) => serverNameProblem(String(iss.input)) });

// ---------------------------------------------------------------- output types

/** `session`: a connection per downstream session; `shared`: one for all sessions (docs/adr/0010). */
export type SharingMode = "session" | "shared";

export interface StdioServerConfig {
  command: string;
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Per-person values put in the process's env (docs/config.md "Per-user secrets"); a process then serves one person only. */
  secrets?: Record<string, SecretSlot>;
  /** Absent: gateway.upstream.sharing.stdio. */
  sharing?: SharingMode;
}

export interface RemoteServerConfig {
  url: string;
  /** Absent means streamable-http. */
  transport?: "streamable-http" | "sse";
  headers?: Record<string, string>;
  /** Each principal's own OAuth authorization at the upstream (src/upstream/auth/, docs/config.md); absent: none. */
  auth?: UpstreamAuthConfig;
  /** `auth: { type: "passthrough" }`: the caller's own inbound bearer token is forwarded (opt-in, warned at start; docs/adr/0027). */
  passthrough?: true;
  /** `auth: { type: "token_exchange" }`: the caller's inbound token is exchanged at the identity provider (RFC 8693; docs/adr/0027 §16). */
  tokenExchange?: TokenExchangeConfig;
  /** Per-person values sent as headers (docs/config.md "Per-user secrets"). */
  secrets?: Record<string, SecretSlot>;
  /** Absent: gateway.upstream.sharing.remote. */
  sharing?: SharingMode;
}

/** `auth: { type: "oauth" }`: the MCP authorization spec's client side, per principal; a pre-registered client's id and secret, the scopes to ask for. */
export interface UpstreamAuthConfig {
  type: "oauth";
  clientId?: string;
  clientSecret?: string;
  scopes?: string[];
}

/**
 * `auth: { type: "token_exchange" }` (RFC 8693): the gateway, as client `clientId` of the identity provider (found at
 * `issuer` by discovery, or its `tokenEndpoint` named), exchanges each caller's inbound access token for one meant for
 * this upstream (`resource`, default the server's URL, and/or `audience`), with `scopes`, as `requestedTokenType`.
 */
export interface TokenExchangeConfig {
  issuer?: string;
  tokenEndpoint?: string;
  clientId: string;
  /** The gateway's client secret at the identity provider (write `"${ENV_VAR}"`), or `clientSecretFile`, read at first use. */
  clientSecret?: string;
  clientSecretFile?: string;
  /** How the client authenticates at the token endpoint. @default "client_secret_basic" */
  clientAuth?: "client_secret_basic" | "client_secret_post";
  audience?: string;
  resource?: string;
  scopes?: string[];
  /** @default "urn:ietf:params:oauth:token-type:access_token" */
  requestedTokenType?: string;
}

/**
 * One per-user secret slot (issue 23): each person fills its value on the console's Connections page; it is sealed in
 * the vault. stdio: put in env var `env` (default: the slot's name); remote: sent as header `header`, written as
 * `format` with `{value}` replaced (default: the value alone).
 */
export interface SecretSlot {
  description?: string;
  env?: string;
  header?: string;
  format?: string;
  /** A person who has not filled it connects without it (default: required, a call waits for it like OAuth consent). */
  optional?: boolean;
}

export type ServerConfig = StdioServerConfig | RemoteServerConfig;

export function isStdioConfig(c: ServerConfig): c is StdioServerConfig {
  return "command" in c;
}

export function remoteTransportOf(c: RemoteServerConfig): "streamable-http" | "sse" {
  return c.transport ?? "streamable-http";
}

/** A validated entry: the server's config, whether it is switched off, and keys accepted but not applied. */
export interface ParsedServerEntry {
  config: ServerConfig;
  /** `disabled: true` (Cline, Roo Code, Windsurf): the server is skipped. */
  disabled: boolean;
  /** Keys accepted but not applied, each with why and what to do; empty for a disabled server. */
  warnings: { key: string; message: string }[];
}

// ---------------------------------------------------------------- keys

type Kind = "stdio" | "remote";
type Transport = "streamable-http" | "sse";

const OWN_KEYS: Record<Kind, readonly string[]> = {
  stdio: ["command", "args", "env", "cwd", "secrets", "type", "transport", "sharing"],
  remote: ["url", "headers", "auth", "secrets", "type", "transport", "sharing"],
};

/** Keys other clients write, accepted in both kinds (`serverUrl` only in remote entries). */
export const OTHER_CLIENTS_KEYS = ["disabled", "timeout", "autoApprove", "alwaysAllow", "disabledTools", "watchPaths", "transportType", "serverUrl"] as const;

/** `type` (Claude Code, Cline, Roo Code, Cursor), `transport` (emceepee) and `transportType` (older Cline) all name the transport. */
const MARKER_KEYS = ["transport", "type", "transportType"] as const;
const MARKER_VALUES: Record<string, { kind: Kind; transport?: Transport }> = {
  stdio: { kind: "stdio" },
  http: { kind: "remote", transport: "streamable-http" },
  "streamable-http": { kind: "remote", transport: "streamable-http" },
  streamableHttp: { kind: "remote", transport: "streamable-http" },
  sse: { kind: "remote", transport: "sse" },
};

// ---------------------------------------------------------------- messages

/** `the string "a b"`, `the number 3`, `an array`: what a value was, for "got …". */
export function describeValue(v: unknown): string {
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v)}`;
  if (typeof v === "number" || typeof v === "boolean") return `the ${typeof v} ${String(v)}`;
  if (v === null) return "null";
  if (v === undefined) return "nothing";
  return Array.isArray(v) ? "an array" : "an object";
}

function mustBeString(fix: (v: unknown) => string) {
  return { error: (iss: { input?: unknown }) => `must be a string (got ${describeValue(iss.input)}); ${fix(iss.input)}` };
}

const quoteIt = (v: unknown) => (typeof v === "number" || typeof v === "boolean" ? `write "${String(v)}"` : "write it as a string");

function argsProblem(v: unknown): string {
  const got = `must be an array of strings (got ${describeValue(v)})`;
  if (typeof v !== "string") return `${got}; write e.g. ["-y", "some-server"]`;
  const parts = v.trim() ? v.trim().split(/\s+/) : [];
  return `${got}; write [${parts.map((p) => JSON.stringify(p)).join(", ")}]`;
}

const stringRecord = (what: string) =>
  z.record(z.string(), z.string(mustBeString(quoteIt)), {
    error: (iss) => `must be an object of string values, e.g. {${what}} (got ${describeValue(iss.input)}); write it that way`,
  });

const httpUrl = z.url({
  protocol: /^https?$/,
  error: (iss) => `url must be an http(s) URL (got ${describeValue(iss.input)}); write e.g. "https://example.com/mcp"`,
});

const toolNames = z
  .array(z.string(mustBeString(() => "write the tool's name")), {
    error: (iss) => `must be an array of tool names, e.g. ["read_file"] (got ${describeValue(iss.input)}); write it that way or remove the key`,
  })
  .optional();

const markerField = z.unknown().optional(); // validated with the kind, in markerIssues()

export const sharingMode = z.enum(["session", "shared"], {
  error: (iss) =>
    `must be "session" (a connection per client session) or "shared" (one connection for all sessions) (got ${describeValue(iss.input)}); see docs/adr/0010`,
});

const otherClientsFields = {
  disabled: z.boolean({ error: (iss) => `must be true or false (got ${describeValue(iss.input)}); write true to skip this server` }).optional(),
  timeout: z
    .number({ error: (iss) => `must be a number of seconds (got ${describeValue(iss.input)}); write e.g. 60 or remove it` })
    .positive({ error: "must be a positive number of seconds; write e.g. 60 or remove it" })
    .optional(),
  autoApprove: toolNames,
  alwaysAllow: toolNames,
  disabledTools: toolNames,
  watchPaths: z
    .array(z.string(mustBeString(() => "write the path")), {
      error: (iss) => `must be an array of paths (got ${describeValue(iss.input)}); write it that way or remove the key`,
    })
    .optional(),
  transportType: markerField,
};

const SLOT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const slotName = z.string();
/** Slot names checked here rather than by the record's key schema, whose issue would carry the record's message. */
const slotNames = (slots: Record<string, unknown>, ctx: z.RefinementCtx) => {
  for (const name of Object.keys(slots)) {
    if (!SLOT_NAME.test(name)) {
      ctx.addIssue({
        code: "custom",
        path: [name],
        message: "a secret slot's name has letters, digits, _ . - (1-64, starting with a letter or digit); rename it",
      });
    }
  }
};
const slotDescription = z
  .string(mustBeString(() => "write what the person should paste here"))
  .max(500)
  .optional();
const slotOptional = z.boolean({ error: (iss) => `must be true or false (got ${describeValue(iss.input)})` }).optional();

/** stdio: `secrets: { "GITHUB_TOKEN": { "description": "...", "env": "GITHUB_TOKEN" } }` (env defaults to the slot's name). */
const stdioSecrets = z
  .record(
    slotName,
    z.strictObject(
      {
        description: slotDescription,
        env: z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'must be an environment variable name, e.g. "GITHUB_TOKEN"' })
          .optional(),
        optional: slotOptional,
      },
      {
        error: (iss) =>
          `must be an object like {"description": "...", "env": "API_KEY"} (got ${describeValue(iss.input)}); header and format are for remote servers`,
      },
    ),
    { error: (iss) => `must be an object of secret slots, e.g. {"API_KEY": {"env": "API_KEY"}} (got ${describeValue(iss.input)}); write it that way` },
  )
  .superRefine(slotNames)
  .optional();

/** remote: `secrets: { "token": { "header": "Authorization", "format": "Bearer {value}" } }`. */
const remoteSecrets = z
  .record(
    slotName,
    z.strictObject(
      {
        description: slotDescription,
        header: z
          .string({ error: 'a remote server\'s secret slot needs the header to send it in, e.g. "header": "Authorization"' })
          .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: 'must be an HTTP header name, e.g. "X-Api-Key"' }),
        format: z
          .string()
          .refine((f) => f.includes("{value}"), { error: 'must contain {value}, where the person\'s value goes, e.g. "Bearer {value}"' })
          .optional(),
        optional: slotOptional,
      },
      { error: (iss) => `must be an object like {"header": "Authorization", "format": "Bearer {value}"} (got ${describeValue(iss.input)})` },
    ),
    { error: (iss) => `must be an object of secret slots, e.g. {"token": {"header": "X-Api-Key"}} (got ${describeValue(iss.input)}); write it that way` },
  )
  .superRefine(slotNames)
  .optional();

/** The keys only `"type": "token_exchange"` takes (with clientId, clientSecret and scopes, which "oauth" takes too). */
const tokenExchangeFields = {
  issuer: httpUrl.optional(),
  tokenEndpoint: httpUrl.optional(),
  clientSecretFile: z.string().min(1).optional(),
  clientAuth: z
    .enum(["client_secret_basic", "client_secret_post"], { error: 'must be "client_secret_basic" (the default) or "client_secret_post"' })
    .optional(),
  audience: z.string().min(1).optional(),
  resource: z.url({ error: 'must be an absolute URI naming the upstream, e.g. "https://mcp.example.com/mcp"' }).optional(),
  requestedTokenType: z.string().min(1).optional(),
};

function tokenExchangeProblems(
  a: { type: string } & { [K in keyof typeof tokenExchangeFields | "clientId" | "clientSecret"]?: unknown },
  ctx: z.RefinementCtx,
) {
  const own = (Object.keys(tokenExchangeFields) as (keyof typeof tokenExchangeFields)[]).filter((k) => a[k] !== undefined);
  if (a.type !== "token_exchange") {
    if (own.length) {
      ctx.addIssue({
        code: "custom",
        message: `${own.join(", ")} ${own.length > 1 ? "are" : "is"} for "type": "token_exchange"; remove ${own.length > 1 ? "them" : "it"} or use "token_exchange"`,
      });
    }
    return;
  }
  const need = (ok: boolean, message: string) => ok || ctx.addIssue({ code: "custom", message });
  need(a.clientId !== undefined, 'token_exchange needs "clientId": the gateway\'s own client at the identity provider, allowed the token-exchange grant');
  need(
    (a.issuer === undefined) !== (a.tokenEndpoint === undefined),
    'token_exchange needs exactly one of "issuer" (the identity provider, found by discovery) and "tokenEndpoint" (its token endpoint)',
  );
  need(
    (a.clientSecret === undefined) !== (a.clientSecretFile === undefined),
    'token_exchange needs exactly one of "clientSecret" (write "${ENV_VAR}", not the secret itself) and "clientSecretFile" (a file holding it)',
  );
}

const stdioSchema = z.strictObject({
  command: z
    .string(mustBeString(() => `put the program in "command" and its arguments in "args"`))
    .min(1, { error: `must not be empty; write the program to run, e.g. "npx"` }),
  args: z.array(z.string(mustBeString(quoteIt)), { error: (iss) => argsProblem(iss.input) }).default([]),
  env: stringRecord(`"API_KEY": "..."`).optional(),
  cwd: z.string(mustBeString(() => "write the directory's path")).optional(),
  secrets: stdioSecrets,
  sharing: sharingMode.optional(),
  type: markerField,
  transport: markerField,
  ...otherClientsFields,
});

const remoteSchema = z.strictObject({
  url: httpUrl.optional(),
  /** Windsurf's spelling of `url`. */
  serverUrl: httpUrl.optional(),
  headers: stringRecord(`"Authorization": "Bearer \${TOKEN}"`).optional(),
  auth: z
    .strictObject({
      type: z.enum(["oauth", "passthrough", "token_exchange"], {
        error:
          'must be "oauth" (each person\'s own grant), "passthrough" (forward the caller\'s own token) or "token_exchange" (exchange the caller\'s token at the identity provider, RFC 8693), e.g. "auth": { "type": "oauth" }',
      }),
      clientId: z.string().min(1).optional(),
      clientSecret: z.string().min(1).optional(),
      scopes: z.array(z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, "a scope is one token without spaces or quotes")).optional(),
      ...tokenExchangeFields,
    })
    .refine((a) => a.clientSecret === undefined || a.clientId !== undefined, { message: "clientSecret needs clientId (a pre-registered client)" })
    .refine((a) => a.type !== "passthrough" || (a.clientId === undefined && a.clientSecret === undefined && a.scopes === undefined), {
      message:
        'passthrough forwards the caller\'s own token and cannot be combined with OAuth: clientId, clientSecret and scopes are for "type": "oauth"; remove them or use "oauth"',
    })
    .superRefine(tokenExchangeProblems)
    .optional(),
  secrets: remoteSecrets,
  sharing: sharingMode.optional(),
  type: markerField,
  transport: markerField,
  ...otherClientsFields,
});

// ---------------------------------------------------------------- parsing

interface EntryIssue {
  path: PropertyKey[];
  message: string;
}

type EntryResult = { ok: true; entry: ParsedServerEntry } | { ok: false; issues: EntryIssue[] };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const q = (s: string) => JSON.stringify(s);

/** Validates one entry: kind first, then that kind's keys only. */
export function parseServerEntry(input: unknown): EntryResult {
  if (!isPlainObject(input)) {
    const message = `must be an object: {"command": "...", "args": [...]} for a stdio server or {"url": "https://..."} for a remote one (got ${describeValue(input)}); write it that way`;
    return { ok: false, issues: [{ path: [], message }] };
  }
  const hasCommand = input.command !== undefined;
  const urlKeys = (["url", "serverUrl"] as const).filter((k) => input[k] !== undefined);
  if (urlKeys.length === 2) {
    return { ok: false, issues: [{ path: [], message: `has both "url" and "serverUrl" (Windsurf's name for url); keep one of them` }] };
  }
  if (hasCommand && urlKeys.length) {
    const message = `has both "command" and ${q(urlKeys[0]!)}; a server is either stdio (command) or remote (url); remove one of them`;
    return { ok: false, issues: [{ path: [], message }] };
  }
  if (!hasCommand && !urlKeys.length) {
    const found = Object.keys(input);
    const message =
      "a server needs either `command` (stdio) or `url` (streamable-http / sse), and this one has neither" +
      ` (its keys: ${found.length ? found.join(", ") : "none"}); add one of them`;
    return { ok: false, issues: [{ path: [], message }] };
  }
  const kind: Kind = hasCommand ? "stdio" : "remote";
  const markers = markerIssues(input, kind);
  // Without zod's JIT, as schema.ts's CONFIG_PARSE (which this module cannot import: schema.ts imports it).
  const parsed = (kind === "stdio" ? stdioSchema : remoteSchema).safeParse(input, { jitless: true });
  const issues = [...markers.issues];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === "unrecognized_keys" && issue.path[0] === "secrets") {
        for (const key of issue.keys) issues.push({ path: [...issue.path], message: unknownSlotKeyMessage(key, kind) });
      } else if (issue.code === "unrecognized_keys") {
        for (const key of issue.keys) issues.push({ path: [...issue.path], message: unknownKeyMessage(key, kind) });
      } else {
        issues.push({ path: [...issue.path], message: issue.message });
      }
    }
  }
  if (issues.length || !parsed.success) return { ok: false, issues };

  const data = parsed.data;
  const disabled = data.disabled === true;
  let config: ServerConfig;
  if ("command" in data) {
    config = { command: data.command, args: data.args };
    if (data.env) config.env = data.env;
    if (data.cwd !== undefined) config.cwd = data.cwd;
    if (data.secrets) config.secrets = slotsOf(data.secrets);
  } else {
    if (data.auth?.type === "passthrough" && data.secrets) {
      const message = `auth "passthrough" forwards the caller's own token and cannot be combined with per-user secrets on the same server; remove "secrets" or the passthrough`;
      return { ok: false, issues: [{ path: ["auth"], message }] };
    }
    if (data.auth?.type === "token_exchange") {
      const authorization = Object.keys(data.headers ?? {}).find((h) => h.toLowerCase() === "authorization");
      const clash = data.secrets ? `per-user secrets ("secrets")` : authorization ? `a static ${q(authorization)} header` : undefined;
      if (clash) {
        const message = `auth "token_exchange" sends each caller's exchanged token as Authorization and cannot be combined with ${clash} on the same server; remove one of them`;
        return { ok: false, issues: [{ path: ["auth"], message }] };
      }
    }
    config = { url: (data.url ?? data.serverUrl)! };
    if (markers.transport) config.transport = markers.transport;
    if (data.headers) config.headers = data.headers;
    if (data.auth?.type === "passthrough") config.passthrough = true;
    else if (data.auth?.type === "token_exchange") config.tokenExchange = tokenExchangeOf(data.auth);
    else if (data.auth)
      config.auth = stripUndefined({ type: "oauth", clientId: data.auth.clientId, clientSecret: data.auth.clientSecret, scopes: data.auth.scopes });
    if (data.secrets) config.secrets = slotsOf(data.secrets);
  }
  if (data.sharing !== undefined) config.sharing = data.sharing;
  return { ok: true, entry: { config, disabled, warnings: disabled ? [] : otherClientsWarnings(data) } };
}

/** `type` / `transport` / `transportType`: known values, agreeing with each other and with the entry's kind. */
function markerIssues(input: Record<string, unknown>, kind: Kind): { issues: EntryIssue[]; transport?: Transport } {
  const issues: EntryIssue[] = [];
  const seen: { key: string; value: string; transport?: Transport }[] = [];
  const allowed = kind === "stdio" ? `write "stdio" or remove it` : `use "streamable-http" (or "http") or "sse"`;
  for (const key of MARKER_KEYS) {
    if (!(key in input)) continue;
    const value = input[key];
    if (typeof value !== "string") {
      issues.push({ path: [key], message: `must be a string (got ${describeValue(value)}); ${allowed}` });
      continue;
    }
    const meaning = MARKER_VALUES[value];
    if (!meaning) {
      issues.push({ path: [key], message: `${q(value)} is not supported; ${allowed}` });
    } else if (meaning.kind !== kind) {
      issues.push({
        path: [key],
        message:
          kind === "stdio"
            ? `${q(value)} is a remote transport, but this server has "command" (stdio); write "stdio" or remove ${q(key)}, or replace "command" with "url"`
            : `"stdio" needs "command", but this server has a url (remote); write "http" or "sse" or remove ${q(key)}, or replace the url with "command"`,
      });
    } else {
      seen.push({ key, value, ...(meaning.transport ? { transport: meaning.transport } : {}) });
    }
  }
  const [first, ...rest] = seen;
  const disagreeing = rest.find((s) => s.transport !== first?.transport);
  if (first && disagreeing) {
    issues.push({
      path: [],
      message: `${q(first.key)} says ${q(first.value)} but ${q(disagreeing.key)} says ${q(disagreeing.value)}; keep one of them`,
    });
  }
  return first?.transport ? { issues, transport: first.transport } : { issues };
}

function unknownKeyMessage(key: string, kind: Kind): string {
  const other: Kind = kind === "stdio" ? "remote" : "stdio";
  if (OWN_KEYS[other].includes(key) || (key === "serverUrl" && kind === "stdio")) {
    return kind === "stdio"
      ? `'${key}' is for remote (url) servers, and this one is stdio (it has "command"); remove '${key}'`
      : `'${key}' is for stdio (command) servers, and this one is remote (it has a url); remove '${key}'`;
  }
  const accepted = [...OWN_KEYS[kind], ...OTHER_CLIENTS_KEYS.filter((k) => kind === "remote" || k !== "serverUrl")];
  const guess = closest(key, accepted);
  return (
    `unknown key '${key}'${guess ? ` (did you mean '${guess}'?)` : ""}; a ${kind} server accepts ${accepted.join(", ")}` +
    (kind === "stdio" && key === "envFile" ? " (envFile is read only from config files)" : "") +
    `; fix or remove '${key}'`
  );
}

/** An unknown key in a secret slot: what the kind's slots accept (stdio: env; remote: header and format). */
function unknownSlotKeyMessage(key: string, kind: Kind): string {
  const accepted = kind === "stdio" ? ["description", "env", "optional"] : ["description", "header", "format", "optional"];
  const other =
    kind === "stdio" && (key === "header" || key === "format") ? ` ('${key}' is for remote servers' slots; a stdio server's value goes into env)` : "";
  return `unknown key '${key}' in a secret slot${other}; a ${kind} server's slot accepts ${accepted.join(", ")}; fix or remove '${key}'`;
}

/** The candidate within edit distance 2 (or equal ignoring case), if any. */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: { c: string; d: number } | undefined;
  for (const c of candidates) {
    const d = c.toLowerCase() === word.toLowerCase() ? 0 : editDistance(word, c);
    if (d <= 2 && (!best || d < best.d)) best = { c, d };
  }
  return best?.c;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** Keys from other clients that are accepted but change nothing here, when their value asks for something. */
function otherClientsWarnings(data: z.infer<typeof stdioSchema> | z.infer<typeof remoteSchema>): ParsedServerEntry["warnings"] {
  const warnings: ParsedServerEntry["warnings"] = [];
  if (data.timeout !== undefined) {
    warnings.push({
      key: "timeout",
      message:
        "ignored: emceepee has one timeout for all upstream requests, gateway.upstream.requestTimeoutMs (in milliseconds); set that instead, or remove 'timeout' to silence this warning",
    });
  }
  for (const key of ["autoApprove", "alwaysAllow"] as const) {
    if (data[key]?.length) {
      warnings.push({
        key,
        message: `ignored: emceepee asks for no approvals, the MCP client in front of it does; set up auto-approval there, or remove '${key}' to silence this warning`,
      });
    }
  }
  if (data.disabledTools?.length) {
    warnings.push({
      key: "disabledTools",
      message: `not applied: the tools listed (${data.disabledTools.join(", ")}) stay visible and callable through emceepee; hide them in your MCP client, or remove 'disabledTools' to silence this warning`,
    });
  }
  if (data.watchPaths?.length) {
    warnings.push({
      key: "watchPaths",
      message: "ignored: emceepee does not restart servers when files change; restart emceepee instead, or remove 'watchPaths' to silence this warning",
    });
  }
  return warnings;
}

// ---------------------------------------------------------------- schemas

/** One entry, as it appears in a config file (keys from other clients included). */
export const serverEntrySchema = z.unknown().transform((input, ctx): ParsedServerEntry => {
  const result = parseServerEntry(input);
  if (result.ok) return result.entry;
  for (const issue of result.issues) ctx.addIssue({ code: "custom", message: issue.message, path: issue.path, input });
  return z.NEVER;
});

/** One server's connection config (add_server): the entry without what concerns only config files. */
export const serverConfigSchema = serverEntrySchema.transform((entry) => entry.config);

export const mcpServersSchema = z.record(serverNameSchema, serverEntrySchema, {
  error: (iss) =>
    `must be an object mapping server names to servers, e.g. {"fs": {"command": "npx", "args": [...]}} (got ${describeValue(iss.input)}); write it that way`,
});

/** The two kinds' key schemas, for `emceepee schema` (json-schema.ts); parsing goes through serverEntrySchema. */
export const serverEntryShapes = { stdio: stdioSchema, remote: remoteSchema } as const;

function slotsOf(slots: Record<string, Record<string, unknown>>): Record<string, SecretSlot> {
  return Object.fromEntries(Object.entries(slots).map(([k, v]) => [k, Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined)) as SecretSlot]));
}

/** The token_exchange block in a fixed key order (sameServerConfig compares its JSON), without absent keys. */
function tokenExchangeOf(a: { [K in keyof TokenExchangeConfig]?: TokenExchangeConfig[K] | undefined }): TokenExchangeConfig {
  const keys = [
    "issuer",
    "tokenEndpoint",
    "clientId",
    "clientSecret",
    "clientSecretFile",
    "clientAuth",
    "audience",
    "resource",
    "scopes",
    "requestedTokenType",
  ] as const;
  return Object.fromEntries(keys.flatMap((k) => (a[k] === undefined ? [] : [[k, a[k]]]))) as unknown as TokenExchangeConfig;
}

function stripUndefined(a: {
  type: "oauth";
  clientId?: string | undefined;
  clientSecret?: string | undefined;
  scopes?: string[] | undefined;
}): UpstreamAuthConfig {
  return Object.fromEntries(Object.entries(a).filter(([, v]) => v !== undefined)) as unknown as UpstreamAuthConfig;
}
