/**
 * Fuzzing the HTTP edge: well over 1,000 malformed or hostile JSON-RPC
 * messages, generated deterministically (seeded PRNG), sent as raw HTTP to an
 * in-process gateway with server-everything upstream — both without a session
 * and inside an initialized session (Mcp-Session-Id). After every batch the
 * gateway must still answer a normal tools/list; every reply body must be
 * valid JSON-RPC; no reply may be a 5xx; nothing may leak (sessions, child
 * processes, Object.prototype, memory).
 *
 * Cases named "(regression)" are bugs this fuzzing found, since fixed.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { DEFAULT_SETTINGS } from "../../src/config/schema.js";
import { META_TOOLS } from "../../src/faces/meta/server.js";
import { ROOT, connectClient, startGateway, waitConnected, type TestGateway } from "../helpers/gateway.js";
import { initializeBody, processAlive, startCliServe, stopChild } from "../helpers/core-extra.js";

// ---------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------

/** mulberry32: a tiny seeded PRNG, so every run sends the same messages. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number): number => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
    bytes: (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256))),
    word: (n: number): string => Array.from({ length: n }, () => String.fromCharCode(97 + Math.floor(next() * 26))).join(""),
  };
}
type Rng = ReturnType<typeof prng>;

// ---------------------------------------------------------------------------
// Cases and how replies are judged
// ---------------------------------------------------------------------------

/**
 * What a correct gateway answers, inside a session:
 * - malformed:    4xx; a body, if any, is a JSON-RPC error
 * - rejected:     4xx, or 202 with no body (the SDK ignores some invalid messages, e.g. a bad id read as a notification)
 * - notification: 202 with no body (or 4xx)
 * - request:      200 with a JSON-RPC response for `id`
 * - rpc-error:    200 with a JSON-RPC *error* response for `id`
 * - tool-error:   200 with a JSON-RPC error, or a result with isError: true, for `id`
 * - any:          anything but a 5xx; bodies still valid JSON-RPC
 * Without a session every case is `malformed` (only initialize may start a session).
 */
type Expect = "malformed" | "rejected" | "notification" | "request" | "rpc-error" | "tool-error" | "any";

interface FuzzCase {
  label: string;
  body?: string | Buffer;
  expect: Expect;
  /** The request id whose response must be in the reply (request / rpc-error / tool-error). */
  id?: string | number;
  /** Further ids that must be answered too (batches). */
  moreIds?: Array<string | number>;
  /** HTTP method (default POST). */
  method?: string;
  /** Path (default /mcp). */
  path?: string;
  /** Header overrides; null removes a default header. */
  headers?: Record<string, string | null>;
  /** Only meaningful inside a session (e.g. a valid initialize, which would start one). */
  sessionOnly?: boolean;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const REQUEST_TIMEOUT_MS = 60_000;
const MAX_BODY = 4 * 1024 * 1024; // gateway.http.maxBodyBytes default
const PADDING = "p".repeat(MAX_BODY);
const MAX_JSON_DEPTH = DEFAULT_SETTINGS.http.maxJsonDepth; // a deeper body is refused at the edge (400)
const PROTOCOL = "2025-06-18";

/** One raw HTTP request; fails if the whole reply has not arrived within `deadlineMs` (SSE keep-alives do not count). */
function send(baseUrl: string, c: FuzzCase, defaults: Record<string, string>, deadlineMs = REQUEST_TIMEOUT_MS): Promise<Reply> {
  const u = new URL(baseUrl);
  const headers: Record<string, string> = { ...defaults };
  for (const [k, v] of Object.entries(c.headers ?? {})) {
    if (v === null) delete headers[k];
    else headers[k] = v;
  }
  const body = c.body === undefined ? undefined : Buffer.isBuffer(c.body) ? c.body : Buffer.from(c.body, "utf8");
  if (body !== undefined) headers["Content-Length"] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname: u.hostname, port: u.port, path: c.path ?? "/mcp", method: c.method ?? "POST", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    const timer = setTimeout(() => req.destroy(new Error(`no complete reply within ${deadlineMs}ms (hang)`)), deadlineMs);
    req.on("close", () => clearTimeout(timer));
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** The JSON-RPC messages of a reply (plain JSON, or the data lines of an SSE stream). Throws on invalid JSON. */
function messagesOf(r: Reply): unknown[] {
  if (r.body.length === 0) return [];
  const text = r.body.toString("utf8");
  if (String(r.headers["content-type"] ?? "").includes("text/event-stream")) {
    const out: unknown[] = [];
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data.trim().length > 0) out.push(JSON.parse(data));
    }
    return out;
  }
  const parsed: unknown = JSON.parse(text);
  return Array.isArray(parsed) ? parsed : [parsed];
}

type Rec = Record<string, unknown>;
const isObj = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** Why `m` is not a valid JSON-RPC 2.0 message, or undefined. */
function jsonRpcProblem(m: unknown): string | undefined {
  if (!isObj(m)) return `not an object: ${short(m)}`;
  if (m.jsonrpc !== "2.0") return `jsonrpc is ${short(m.jsonrpc)}`;
  if ("method" in m) return typeof m.method === "string" ? undefined : "method is not a string"; // a server notification/request
  if (!("id" in m)) return "response without id";
  if (!(typeof m.id === "string" || typeof m.id === "number" || m.id === null)) return `bad response id ${short(m.id)}`;
  if ("result" in m === "error" in m) return "response needs exactly one of result / error";
  if ("error" in m) {
    const e = m.error;
    if (!isObj(e)) return "error is not an object";
    if (!Number.isInteger(e.code)) return `error.code is not an integer: ${short(e.code)}`;
    if (typeof e.message !== "string") return "error.message is not a string";
    return undefined;
  }
  return isObj(m.result) ? undefined : "result is not an object";
}

function short(v: unknown, n = 160): string {
  let s: string;
  try {
    s = typeof v === "string" ? v : (JSON.stringify(v) ?? String(v));
  } catch {
    s = String(v);
  }
  return s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s;
}

const isToolError = (m: Rec): boolean => "error" in m || (isObj(m.result) && m.result.isError === true);

/** Every way the reply to `c` breaks the contract ([] if none). */
function judge(c: FuzzCase, r: Reply): string[] {
  const problems: string[] = [];
  if (r.status >= 500) problems.push(`HTTP ${r.status}`);
  let messages: unknown[] = [];
  try {
    messages = messagesOf(r);
  } catch (err) {
    problems.push(`body is not JSON (${String(err)}): ${short(r.body.toString("utf8"))}`);
  }
  for (const m of messages) {
    const p = jsonRpcProblem(m);
    if (p) problems.push(`invalid JSON-RPC: ${p}`);
  }
  const is4xx = r.status >= 400 && r.status < 500;
  if (is4xx && messages.some((m) => !isObj(m) || !("error" in m))) problems.push(`HTTP ${r.status} with a non-error body`);
  const empty202 = r.status === 202 && r.body.length === 0;
  switch (c.expect) {
    case "malformed":
      if (!is4xx) problems.push(`expected 4xx, got ${r.status}`);
      break;
    case "rejected":
    case "notification":
      if (!is4xx && !empty202) problems.push(`expected 4xx or an empty 202, got ${r.status} ${short(r.body.toString("utf8"))}`);
      break;
    case "any":
      if (!(r.status === 200 || r.status === 202 || is4xx)) problems.push(`unexpected status ${r.status}`);
      break;
    default: {
      if (r.status !== 200) {
        problems.push(`expected 200, got ${r.status} ${short(r.body.toString("utf8"))}`);
        break;
      }
      const responses = messages.filter((m): m is Rec => isObj(m) && !("method" in m));
      for (const id of [c.id, ...(c.moreIds ?? [])]) {
        const reply = responses.find((m) => m.id === id);
        if (!reply) {
          problems.push(
            `no response for id ${short(id, 40)} (got ids ${short(
              responses.map((m) => m.id),
              80,
            )})`,
          );
          continue;
        }
        if (c.expect === "rpc-error" && !("error" in reply)) problems.push(`expected a JSON-RPC error, got ${short(reply)}`);
        if (c.expect === "tool-error" && !isToolError(reply)) problems.push(`expected an error or isError result, got ${short(reply)}`);
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------
// Generators: one per family of hostile input. Each returns the case as it is
// sent inside a session; without a session the same bytes must be refused.
// ---------------------------------------------------------------------------

let idCounter = 0;
const nextId = (): number => ++idCounter;
const rpc = (o: Rec): string => JSON.stringify({ jsonrpc: "2.0", ...o });
/** JSON text with own `__proto__` / `constructor` keys (a JS literal would set the prototype instead). */
const raw = (text: string): unknown => JSON.parse(text) as unknown;

const POLLUTERS: readonly string[] = [
  '{"__proto__":{"polluted":"yes"}}',
  '{"constructor":{"prototype":{"polluted":"yes"}}}',
  '{"__proto__":{"toString":"x","valueOf":1}}',
  '{"prototype":{"polluted":"yes"},"__defineGetter__":"x"}',
  '{"hasOwnProperty":"x","__proto__":null}',
];

function hostileValue(rng: Rng): unknown {
  switch (rng.int(0, 17)) {
    case 0:
      return 1e308;
    case 1:
      return -1e308;
    case 2:
      return Number.MAX_SAFE_INTEGER + 2;
    case 3:
      return 5e-324;
    case 4:
      return -0;
    case 5:
      return null;
    case 6:
      return rng.pick([true, false]);
    case 7:
      return [];
    case 8:
      return {};
    case 9:
      return raw(rng.pick(POLLUTERS));
    case 10:
      return "x".repeat(rng.int(10_000, 200_000));
    case 11:
      return "\u0000\ud800\udfff\u202e<script>";
    case 12:
      return rng.pick(["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "prototype"]);
    case 13:
      return rng.pick(["../../../../etc/passwd", "${HOME}", "%s%n%x", "' OR 1=1 --", "file:///etc/shadow"]);
    case 14:
      return nest(rng.int(100, 2000), rng.pick(["[", "{"]));
    case 15:
      return [1, "two", { three: [3] }, null];
    case 16:
      return rng.int(-2_147_483_648, 2_147_483_647);
    default:
      return rng.word(rng.int(0, 12));
  }
}

/** A value nested `depth` levels deep. */
function nest(depth: number, kind: "[" | "{"): unknown {
  return raw(kind === "[" ? "[".repeat(depth) + "]".repeat(depth) : '{"a":'.repeat(depth) + "1" + "}".repeat(depth));
}

/** Meta-tool fields and values that are certainly wrong for them (so no call blocks or changes shared state). */
const FIELDS = [
  "server",
  "tool",
  "args",
  "timeout_ms",
  "task_ttl_ms",
  "name",
  "command",
  "env",
  "cwd",
  "url",
  "headers",
  "transport",
  "uri",
  "arguments",
  "request_id",
  "action",
  "content",
  "text",
  "error",
  "task_id",
  "status",
  "include_completed",
];

function hostileToolArgs(rng: Rng, tool: string): { args: unknown; mustFail: boolean } {
  const roll = rng.int(0, 9);
  if (roll === 0) return { args: rng.pick([[], "args", 42, null, true]), mustFail: true };
  if (roll === 1) return { args: raw(rng.pick(POLLUTERS)), mustFail: true };
  const args: Rec = {};
  for (let i = rng.int(1, 4); i > 0; i--) args[rng.pick(FIELDS)] = hostileValue(rng);
  // A strict schema refuses unknown keys: one that no tool has guarantees an error for tools that could otherwise block or act.
  // (`__proto__` does not: the SDK's request schema already drops it from `arguments`, so it never reaches the tool.)
  const withProto = rng.next() < 0.3 ? (raw(`{"__proto__":${JSON.stringify(hostileValue(rng))}}`) as Rec) : {};
  if (
    [
      "await_activity",
      "get_task_result",
      "remove_server",
      "add_server",
      "execute_tool",
      "cancel_task",
      "respond_to_elicitation",
      "respond_to_sampling",
    ].includes(tool) ||
    rng.next() < 0.5
  ) {
    args[rng.pick(["constructor", "zz_unknown", "prototype", "hasOwnProperty"])] = hostileValue(rng);
    return { args: { ...withProto, ...args }, mustFail: true };
  }
  return { args: { ...withProto, ...args }, mustFail: false };
}

type Gen = (rng: Rng) => FuzzCase;

const GENERATORS: Record<string, Gen> = {
  badIdType(rng) {
    const id = rng.pick(["{}", "[]", "true", "false", "null", '{"a":1}', "[1,2]", "1.5", "1e308", "-1e308", "1e309", "-1e400", '"a"', "9007199254740993"]);
    const body = `{"jsonrpc":"2.0","id":${id},"method":"${rng.pick(["ping", "tools/list", "tools/call"])}"}`;
    // "a" is a fine id; the rest are not integers/strings. The SDK may read an invalid id as a notification (202).
    return id === '"a"' ? { label: `id ${id}`, body: body.replace('"a"', `"a${nextId()}"`), expect: "any" } : { label: `id ${id}`, body, expect: "rejected" };
  },
  badMethodType(rng) {
    const method = rng.pick(["1", "null", "{}", "[]", "true", "1e308", '["ping"]', '{"name":"ping"}']);
    return { label: `method ${method}`, body: `{"jsonrpc":"2.0","id":${nextId()},"method":${method}}`, expect: "malformed" };
  },
  badParamsType(rng) {
    const params = rng.pick(['"string"', "1", "[]", "[1,2]", "true", "null", '"{}"']);
    const method = rng.pick(["ping", "tools/list", "tools/call", "resources/read", "initialize"]);
    return { label: `params ${params} for ${method}`, body: `{"jsonrpc":"2.0","id":${nextId()},"method":"${method}","params":${params}}`, expect: "malformed" };
  },
  badEnvelope(rng) {
    const id = nextId();
    const variants = [
      `{"id":${id},"method":"ping"}`,
      `{"jsonrpc":"1.0","id":${id},"method":"ping"}`,
      `{"jsonrpc":2.0,"id":${id},"method":"ping"}`,
      `{"jsonrpc":"2.0","id":${id}}`,
      `{"jsonrpc":"2.0","id":${id},"result":{},"error":{"code":1,"message":"x"}}`,
      `{"jsonrpc":"2.0","id":${id},"error":{"code":"x","message":1}}`,
      `{"jsonrpc":"2.0","id":${id},"method":"ping","jsonrpc":"3.0"}`,
    ];
    return { label: "bad envelope", body: rng.pick(variants), expect: "rejected" };
  },
  hugeId(rng) {
    const kind = rng.int(0, 5);
    let id: string | number;
    if (kind === 0) id = `${nextId()}-${"i".repeat(rng.pick([1_000, 10_000, 100_000, 1_000_000]))}`;
    else if (kind === 1) id = `${nextId()}-\u0000\u2028\ud83d\ude00"\\`;
    else if (kind === 2) id = -(nextId() + 2 ** 52);
    else if (kind === 3) id = Number.MAX_SAFE_INTEGER - nextId();
    else if (kind === 4) id = -nextId();
    else id = `${nextId()}`.padStart(rng.int(1, 500), "0");
    return { label: `huge id ${short(id, 30)}`, body: rpc({ id, method: "ping" }), expect: "request", id };
  },
  unsafeNumberId(rng) {
    const text = rng.pick(["9007199254740993", "-9007199254740993", "1e308", "-1e308", "123456789012345678901234567890"]);
    return { label: `unsafe id ${text}`, body: `{"jsonrpc":"2.0","id":${text},"method":"ping"}`, expect: "rejected" };
  },
  unknownMethod(rng) {
    const id = nextId();
    const method = rng.pick([
      rng.word(rng.int(1, 20)),
      `${rng.word(5)}/${rng.word(5)}`,
      "__proto__",
      "constructor",
      "toString",
      "hasOwnProperty",
      "valueOf",
      "tools/call2",
      "",
      " ping",
      "PING",
      "rpc.discover",
      "notifications/initialized/..",
      "m".repeat(100_000),
      "\u0000",
      "tools/list\n",
    ]);
    return { label: `unknown method ${short(method, 30)}`, body: rpc({ id, method, params: { x: hostileValue(rng) } }), expect: "rpc-error", id };
  },
  knownMethodBadParams(rng) {
    const id = nextId();
    const [method, params, expect] = rng.pick<[string, unknown, Expect]>([
      ["tools/call", {}, "tool-error"],
      ["tools/call", { name: 1 }, "tool-error"],
      ["tools/call", { name: "no_such_tool" }, "tool-error"],
      ["tools/call", { name: "__proto__" }, "tool-error"],
      ["tools/call", { name: "constructor", arguments: {} }, "tool-error"],
      ["tools/call", { name: "execute_tool", arguments: "server=everything" }, "tool-error"],
      ["tools/call", { name: "list_servers", arguments: [] }, "tool-error"],
      ["tools/list", { cursor: 12 }, "any"],
      ["tools/list", { cursor: "not-a-cursor" }, "any"],
      ["resources/read", { uri: 5 }, "rpc-error"],
      ["resources/read", { uri: "emceepee://nope" }, "rpc-error"],
      ["resources/read", { uri: "file:///etc/passwd" }, "rpc-error"],
      ["resources/templates/list", { cursor: null }, "any"],
      ["prompts/list", {}, "rpc-error"],
      ["prompts/get", { name: "__proto__" }, "rpc-error"],
      ["logging/setLevel", { level: "nope" }, "rpc-error"],
      ["completion/complete", {}, "rpc-error"],
      ["resources/subscribe", { uri: "x" }, "rpc-error"],
      ["tasks/get", { taskId: 7 }, "rpc-error"],
      ["tasks/list", { cursor: {} }, "rpc-error"],
      ["initialize", { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "again", version: "1" } }, "malformed"],
      ["ping", { _meta: { progressToken: { a: 1 } } }, "any"],
      ["ping", { _meta: raw(POLLUTERS[0]!) }, "any"],
    ]);
    return { label: `${method} ${short(params, 60)}`, body: rpc({ id, method, params }), expect, id, sessionOnly: method === "initialize" };
  },
  invalidUtf8(rng) {
    const bad = rng.pick([
      Buffer.from([0xff, 0xfe]),
      Buffer.from([0xc0, 0x80]),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from([0xf4, 0x90, 0x80, 0x80]),
      Buffer.from([0xe2, 0x82]),
      Buffer.from(rng.bytes(rng.int(1, 64)).map((b) => b | 0x80)),
    ]);
    const id = nextId();
    switch (rng.int(0, 3)) {
      case 0: // inside the method name: still JSON after U+FFFD replacement, an unknown method
        return {
          label: "invalid UTF-8 in method",
          body: Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":"ping`), bad, Buffer.from('"}')]),
          expect: "any",
        };
      case 1: // inside a tool argument
        return {
          label: "invalid UTF-8 in tool args",
          body: Buffer.concat([
            Buffer.from(
              `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"execute_tool","arguments":{"server":"everything","tool":"echo","args":{"message":"`,
            ),
            bad,
            Buffer.from('"}}}}'),
          ]),
          expect: "request",
          id,
        };
      case 2: // in structural position
        return {
          label: "invalid UTF-8 between tokens",
          body: Buffer.concat([Buffer.from(`{"jsonrpc":"2.0",`), bad, Buffer.from(`"id":${id},"method":"ping"}`)]),
          expect: "malformed",
        };
      default: // pure noise
        return { label: "random bytes", body: Buffer.concat([Buffer.from([0xff]), rng.bytes(rng.int(1, 4096))]), expect: "malformed" };
    }
  },
  deepNesting(rng) {
    const depth = rng.pick([1_000, 10_000, 50_000, 100_000]);
    const id = nextId();
    switch (rng.int(0, 3)) {
      case 0:
        return { label: `${depth} nested arrays as the body`, body: "[".repeat(depth) + "]".repeat(depth), expect: "malformed" };
      case 1:
        return { label: `${depth} nested objects as the body`, body: '{"a":'.repeat(depth) + "1" + "}".repeat(depth), expect: "malformed" };
      case 2:
        return {
          label: `${depth} nested arrays in ping params`,
          body: `{"jsonrpc":"2.0","id":${id},"method":"ping","params":{"deep":${"[".repeat(depth)}${"]".repeat(depth)}}}`,
          // Deeper than gateway.http.maxJsonDepth: refused at the edge (400, EMCP_BAD_ARGUMENTS -32602).
          expect: depth + 3 > MAX_JSON_DEPTH ? "malformed" : "any",
        };
      default:
        return {
          label: `${depth} nested arrays in execute_tool args`,
          body: `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"execute_tool","arguments":{"server":"everything","tool":"echo","args":{"deep":${"[".repeat(depth)}${"]".repeat(depth)}}}}}`,
          ...(depth + 5 > MAX_JSON_DEPTH ? { expect: "malformed" as const } : { expect: "tool-error" as const, id }),
        };
    }
  },
  emptyish(rng) {
    const body = rng.pick(["", " ", "\n\r\t", "null", "0", "-1", "true", '"ping"', "{}", "[[]]", "[{}]", "[null]", '{"jsonrpc":"2.0"}', "\ufeff", "\u0000"]);
    return { label: `body ${JSON.stringify(body)}`, body, expect: "malformed" };
  },
  emptyBatch() {
    return { label: "empty batch []", body: "[]", expect: "rejected" };
  },
  truncated(rng) {
    const full = rng.pick([
      rpc({ id: nextId(), method: "ping" }),
      rpc({ id: nextId(), method: "tools/call", params: { name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: "hi" } } } }),
      rpc({ id: nextId(), method: "tools/list", params: {} }),
      `[${rpc({ id: nextId(), method: "ping" })},${rpc({ id: nextId(), method: "ping" })}]`,
      rpc({ method: "notifications/initialized" }),
    ]);
    const cut = rng.int(1, full.length - 1);
    return { label: `truncated at ${cut}/${full.length}`, body: full.slice(0, cut), expect: "malformed" };
  },
  batch(rng) {
    const a = nextId();
    const b = nextId();
    switch (rng.int(0, 6)) {
      case 0:
        return {
          label: "batch of two pings",
          body: `[${rpc({ id: a, method: "ping" })},${rpc({ id: b, method: "ping" })}]`,
          expect: "request",
          id: a,
          moreIds: [b],
        };
      case 1:
        return {
          label: "batch: request + notification",
          body: `[${rpc({ id: a, method: "tools/list" })},${rpc({ method: "notifications/whatever" })}]`,
          expect: "request",
          id: a,
        };
      case 2:
        return {
          label: "batch: request + garbage",
          body: `[${rpc({ id: a, method: "ping" })},${rng.pick(["1", '"x"', "null", "[]", "{}"])}]`,
          expect: "malformed",
        };
      case 3: {
        const ids = Array.from({ length: 100 }, () => nextId());
        return {
          label: "batch of 100 mixed requests",
          body: `[${ids.map((id, i) => rpc({ id, method: i % 3 ? "ping" : "no/such" })).join(",")}]`,
          expect: "request",
          id: ids[0]!,
          moreIds: ids.slice(1),
        };
      }
      case 4:
        return {
          label: "batch of 101 (over the SDK limit)",
          body: `[${Array.from({ length: 101 }, () => rpc({ id: nextId(), method: "ping" })).join(",")}]`,
          expect: "malformed",
        };
      case 5:
        return {
          label: "batch: notifications and stray responses only",
          body: `[${rpc({ method: "notifications/x" })},${rpc({ id: a, result: {} })}]`,
          expect: "notification",
        };
      default:
        return {
          label: "batch: initialize inside a batch",
          body: `[${initializeBody(a)},${rpc({ id: b, method: "ping" })}]`,
          expect: "malformed",
        };
    }
  },
  wrongContentType(rng) {
    const ct = rng.pick([
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/jsonp",
      "application/json-patch+json",
      "text/json",
      "application",
      "*/*",
      "",
    ]);
    return { label: `content-type ${JSON.stringify(ct)}`, body: rpc({ id: nextId(), method: "ping" }), expect: "malformed", headers: { "Content-Type": ct } };
  },
  missingContentType() {
    return { label: "no content-type", body: rpc({ id: nextId(), method: "ping" }), expect: "malformed", headers: { "Content-Type": null } };
  },
  wrongAccept(rng) {
    const accept = rng.pick(["application/json", "text/event-stream", "*/*", "text/html", "", "application/xml, text/plain"]);
    return { label: `accept ${JSON.stringify(accept)}`, body: rpc({ id: nextId(), method: "ping" }), expect: "malformed", headers: { Accept: accept } };
  },
  contentTypeVariants(rng) {
    const id = nextId();
    const ct = rng.pick(["application/json; charset=utf-8", "APPLICATION/JSON", "application/json ; charset=UTF-8", "application/json;charset=latin1"]);
    return { label: `content-type ${ct}`, body: rpc({ id, method: "ping" }), expect: "any", headers: { "Content-Type": ct } };
  },
  hugeString(rng) {
    const id = nextId();
    const size = rng.pick([512 * 1024, 1024 * 1024, 3 * 1024 * 1024]); // echo may refuse the larger ones (a gateway argument-size limit): still a valid reply
    if (rng.next() < 0.5) {
      const message = rng.word(16).repeat(size / 16);
      return {
        label: `echo of ${size} chars`,
        body: rpc({ id, method: "tools/call", params: { name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message } } } }),
        expect: "request",
        id,
      };
    }
    return {
      label: `unknown method with ${size} chars of params`,
      body: rpc({ id, method: "no/such", params: { blob: "b".repeat(size) } }),
      expect: "rpc-error",
      id,
    };
  },
  overLimit(rng) {
    const extra = rng.int(1, 1024);
    // The same bytes as rpc() with a MAX_BODY pad, cut at MAX_BODY + extra; the padding is made once, not per case.
    const head = rpc({ id: nextId(), method: "ping", params: { pad: "" } }).replace(/""\}\}$/, '"');
    const body = `${head}${PADDING}"}}`.slice(0, MAX_BODY + extra);
    return { label: `body of ${body.length} bytes (over the ${MAX_BODY} limit)`, body, expect: "malformed" };
  },
  hostileToolCall(rng) {
    const id = nextId();
    const tool = rng.pick(META_TOOLS.map((t) => t.name));
    const { args, mustFail } = hostileToolArgs(rng, tool);
    return {
      label: `tools/call ${tool} ${short(args, 80)}`,
      body: rpc({ id, method: "tools/call", params: { name: tool, arguments: args } }),
      expect: mustFail ? "tool-error" : "request",
      id,
    };
  },
  hostileUpstreamArgs(rng) {
    // Valid meta-tool arguments carrying hostile upstream arguments: passed on as is.
    const id = nextId();
    const tool = rng.pick(["echo", "get-sum", "get-tiny-image", "__proto__", "constructor", "toString", ""]);
    const args = rng.next() < 0.5 ? raw(rng.pick(POLLUTERS)) : { message: hostileValue(rng), a: hostileValue(rng), b: hostileValue(rng) };
    const timeout = rng.pick([undefined, 0, 1, 10_000]);
    return {
      label: `execute_tool ${tool} ${short(args, 60)}`,
      body: rpc({
        id,
        method: "tools/call",
        params: { name: "execute_tool", arguments: { server: "everything", tool, args, ...(timeout === undefined ? {} : { timeout_ms: timeout }) } },
      }),
      expect: "request",
      id,
    };
  },
  notification(rng) {
    const method = rng.pick([
      "notifications/initialized",
      "notifications/cancelled",
      "notifications/progress",
      "notifications/roots/list_changed",
      "notifications/message",
      "notifications/__proto__",
      "tools/call",
      "ping",
      "initialize",
      rng.word(8),
    ]);
    const params = rng.pick<unknown>([
      undefined,
      {},
      { requestId: hostileValue(rng), reason: hostileValue(rng) },
      { progressToken: hostileValue(rng), progress: 1e308 },
      raw(rng.pick(POLLUTERS)),
    ]);
    return { label: `notification ${method}`, body: rpc(params === undefined ? { method } : { method, params }), expect: "notification" };
  },
  strayResponse(rng) {
    const id = rng.pick<string | number>([nextId(), "never-sent", 0, -1, Number.MAX_SAFE_INTEGER]);
    const body =
      rng.next() < 0.5
        ? rpc({ id, result: { hostile: hostileValue(rng) } })
        : rpc({ id, error: { code: rng.int(-40000, 40000), message: "client says no", data: hostileValue(rng) } });
    return { label: `stray response id ${short(id, 20)}`, body, expect: "notification" };
  },
  badProtocolHeader(rng) {
    const v = rng.pick(["1999-01-01", "garbage", "2025-06-18, 2025-03-26", "9".repeat(2000), "latest", "2025-13-45"]);
    return {
      label: `mcp-protocol-version ${short(v, 20)}`,
      body: rpc({ id: nextId(), method: "ping" }),
      expect: "malformed",
      headers: { "mcp-protocol-version": v },
    };
  },
  badSessionHeader(rng) {
    const v = rng.pick(["nope", "00000000-0000-0000-0000-000000000000", "x".repeat(8000), "__proto__", "constructor", "../../mcp", " "]);
    return { label: `mcp-session-id ${short(v, 20)}`, body: rpc({ id: nextId(), method: "ping" }), expect: "malformed", headers: { "mcp-session-id": v } };
  },
  httpMethod(rng) {
    const method = rng.pick(["PUT", "PATCH", "GET", "OPTIONS", "TRACE", "PROPFIND"]);
    // GET needs Accept: text/event-stream for the standalone stream; with the POST Accept it must be refused, not held open.
    const c: FuzzCase = { label: `HTTP ${method}`, method, expect: "malformed", headers: method === "GET" ? { Accept: "application/json" } : {} };
    if (method !== "GET" && method !== "TRACE") c.body = rpc({ id: nextId(), method: "ping" });
    return c;
  },
  hostilePath(rng) {
    const p = rng.pick([
      "/mcp/",
      "/MCP",
      "/mcp/..",
      "//mcp",
      "/servers/__proto__/mcp",
      "/servers/constructor/mcp",
      "/servers/toString/mcp",
      "/servers/%2e%2e/mcp",
      "/servers/everything%2Fmcp/mcp",
      "/servers/everything/mcp",
      "/servers//mcp",
      "/all/mcp",
      "/__proto__",
      "/constructor",
      "/healthz",
      "/servers/" + "e".repeat(4000) + "/mcp",
    ]);
    // Our session id is only valid on /mcp, so every other endpoint must say 404 (or 400 for paths that are no endpoint).
    return { label: `path ${short(p, 40)}`, path: p, body: rpc({ id: nextId(), method: "ping" }), expect: "malformed" };
  },
};

/** Cases are made lazily, in order (so the PRNG sequence is fixed), and dropped once sent: big bodies never pile up. */
function* generate(seed: number, count: number, inSession: boolean): Generator<FuzzCase> {
  const rng = prng(seed);
  const names = Object.keys(GENERATORS);
  for (let i = 0; i < count; i++) {
    // Round-robin for coverage, with a random extra pick every other slot.
    const name = i % 2 === 0 ? names[(i / 2) % names.length]! : rng.pick(names);
    let c = GENERATORS[name]!(rng);
    while (!inSession && c.sessionOnly) c = GENERATORS[name]!(rng);
    c.label = `${inSession ? "session" : "no-session"} #${i} ${name}: ${c.label}`;
    if (!inSession) {
      // Without a session nothing but an initialize is accepted (none of these is a valid one).
      c.expect = "malformed";
    }
    yield c;
  }
}

// ---------------------------------------------------------------------------
// Memory and process accounting
// ---------------------------------------------------------------------------

/** global.gc without --expose-gc (the test command cannot pass node flags). */
const gc: () => void = (() => {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (existing) return existing;
  try {
    v8.setFlagsFromString("--expose-gc");
    return vm.runInNewContext("gc") as () => void;
  } catch {
    return () => undefined;
  }
})();

async function settledRss(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
  }
  return process.memoryUsage().rss;
}

/** Pids of this process's direct children (the upstream server-everything processes). */
function childPids(): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

async function eventually(probe: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

const SEED = 0x5eed_f00d;
const PER_TARGET = 640; // 2 × 640 = 1,280 generated messages, plus the dedicated cases below
const CHUNK = 80;
const CONCURRENCY = 8;
const SLOW = { timeout: 120_000 };

describe("fuzz: hostile JSON-RPC over HTTP", () => {
  let gw!: TestGateway;
  let health!: Client;
  let sessionId = "";
  let base = "";
  let baselineRss = 0;
  let baselineHeap = 0;
  let baselineExternal = 0;
  let baselineChildren = 0;
  let baselineSessions = 0;
  let sent = 0;
  /** HTTP status → count, over everything `run` sent. */
  const statuses = new Map<number, number>();
  const protoKeys = Object.getOwnPropertyNames(Object.prototype).sort();

  const sessionHeaders = (): Record<string, string> => ({
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "mcp-session-id": sessionId,
    "mcp-protocol-version": PROTOCOL,
  });
  const noSessionHeaders = (): Record<string, string> => ({ "Content-Type": "application/json", Accept: "application/json, text/event-stream" });

  /** The gateway still works: a normal tools/list on another session, and /healthz. */
  async function assertAlive(after: string): Promise<void> {
    const { tools } = await health.listTools(undefined, { timeout: 15_000 });
    assert.equal(tools.length, META_TOOLS.length, `tools/list after ${after}`);
    const hz = await send(base, { label: "healthz", method: "GET", path: "/healthz", expect: "any" }, {});
    assert.equal(hz.status, 200, `/healthz after ${after}`);
  }

  /** Sends `cases` CONCURRENCY at a time; after every CHUNK of them the gateway must still answer tools/list. */
  async function run(cases: Iterable<FuzzCase>, headers: () => Record<string, string>): Promise<string[]> {
    const failures: string[] = [];
    const source = cases[Symbol.iterator]();
    let exhausted = false;
    for (let start = 0; !exhausted; start += CHUNK) {
      let taken = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (taken < CHUNK) {
            const item = source.next();
            if (item.done) {
              exhausted = true;
              return;
            }
            taken++;
            sent++;
            const c = item.value;
            try {
              const reply = await send(base, c, headers());
              statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
              const problems = judge(c, reply);
              if (problems.length) failures.push(`${c.label}\n    ${problems.join("\n    ")}`);
            } catch (err) {
              failures.push(`${c.label}\n    transport error: ${String(err)}`);
            }
          }
        }),
      );
      if (taken > 0) await assertAlive(`messages ${start}-${start + taken - 1}`);
    }
    return failures;
  }

  before(async () => {
    // No warm spare: the child-process counts below are the sessions' own processes. With the pool (warmPool 1) a
    // spare whose refill was held while the warm-up's sessions opened (QUIET_MS) could start after the baseline
    // was taken, and read as a leak (2 → 3 on a quiet machine, 28 Nov).
    gw = await startGateway({ gateway: { upstream: { warmPool: 0 } } });
    base = new URL(gw.url).origin;
    health = await connectClient(gw.url, { name: "fuzz-health" });
    await waitConnected(health, "everything");
    const init = await send(base, { label: "init", body: initializeBody("init"), expect: "request" }, noSessionHeaders());
    assert.equal(init.status, 200, init.body.toString());
    sessionId = String(init.headers["mcp-session-id"]);
    const initialized = await send(
      base,
      { label: "initialized", body: rpc({ method: "notifications/initialized" }), expect: "notification" },
      sessionHeaders(),
    );
    assert.equal(initialized.status, 202);
    // Use the raw session's own upstream (upstreams connect on first use) until it is connected, so its spawn is in the baseline.
    const connected = async (): Promise<boolean> => {
      await send(
        base,
        {
          label: "list_tools",
          body: rpc({ id: "lt", method: "tools/call", params: { name: "list_tools", arguments: { server: "everything", limit: 1 } } }),
          expect: "request",
          id: "lt",
        },
        sessionHeaders(),
      );
      const r = await send(
        base,
        { label: "list_servers", body: rpc({ id: "ls", method: "tools/call", params: { name: "list_servers", arguments: {} } }), expect: "request", id: "ls" },
        sessionHeaders(),
      );
      return /\\"status\\":\\"connected\\"/.test(r.body.toString());
    };
    for (let i = 0; !(await connected()); i++) {
      if (i > 300) throw new Error("raw session never connected to everything");
      await new Promise((r) => setTimeout(r, 100));
    }
    await assertAlive("setup");
    // Warm-up: one chunk of each kind (another seed), so the RSS baseline already includes the allocator's
    // working set for this traffic (glibc keeps freed native memory; the heap check below is the exact one).
    await run(generate(SEED - 1, CHUNK, false), noSessionHeaders);
    await run(generate(SEED - 2, CHUNK, true), sessionHeaders);
    baselineSessions = gw.gateway.context.sessions.size;
    baselineChildren = childPids().length;
    baselineRss = await settledRss();
    baselineHeap = process.memoryUsage().heapUsed;
    baselineExternal = process.memoryUsage().external;
  });

  after(async () => {
    await health?.close().catch(() => undefined);
    await gw?.close();
  });

  test(`${PER_TARGET} generated hostile messages without a session are all refused with 4xx JSON-RPC errors`, SLOW, async () => {
    const failures = await run(generate(SEED, PER_TARGET, false), noSessionHeaders);
    assert.deepEqual(failures, [], `${failures.length} bad replies:\n${failures.slice(0, 15).join("\n")}`);
    assert.equal(gw.gateway.context.sessions.size, baselineSessions, "no session may be created by a refused message");
  });

  test(`${PER_TARGET} generated hostile messages inside an initialized session get valid JSON-RPC replies`, SLOW, async () => {
    const failures = await run(generate(SEED + 1, PER_TARGET, true), sessionHeaders);
    assert.deepEqual(failures, [], `${failures.length} bad replies:\n${failures.slice(0, 15).join("\n")}`);
  });

  test("hostile tools/call arguments for every meta-tool (wrong types, __proto__/constructor keys, enormous numbers)", SLOW, async () => {
    const rng = prng(SEED + 2);
    const cases: FuzzCase[] = [];
    for (const tool of META_TOOLS) {
      const values: unknown[] = [
        1e308,
        -1e308,
        Number.MAX_SAFE_INTEGER + 2,
        -0,
        5e-324,
        null,
        true,
        [],
        "",
        "x".repeat(100_000),
        raw(POLLUTERS[0]!),
        raw(POLLUTERS[1]!),
      ];
      for (const field of Object.keys(tool.input)) {
        for (const value of values) {
          // `field: value` plus an unknown key: always refused, whatever value does (nothing may block or act).
          const args = raw(`{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},${JSON.stringify(field)}:${JSON.stringify(value)}}`);
          const id = nextId();
          cases.push({
            label: `${tool.name}.${field} = ${short(value, 30)} + __proto__/constructor`,
            body: rpc({ id, method: "tools/call", params: { name: tool.name, arguments: args } }),
            expect: "tool-error",
            id,
          });
        }
      }
      for (let i = 0; i < 4; i++) {
        const { args } = hostileToolArgs(rng, tool.name);
        const id = nextId();
        cases.push({
          label: `${tool.name} ${short(args, 60)}`,
          body: rpc({ id, method: "tools/call", params: { name: tool.name, arguments: args } }),
          expect: "any",
          id,
        });
      }
    }
    // Enormous numbers that pass a field's type check, on tools that answer at once.
    for (const [tool, args, expectation] of [
      ["get_task_result", { task_id: "nope", timeout_ms: 1e308 }],
      ["get_task_result", { task_id: "__proto__", timeout_ms: 3_600_000 }],
      ["get_task", { task_id: "constructor" }],
      ["cancel_task", { task_id: "hasOwnProperty" }],
      ["execute_tool", { server: "everything", tool: "echo", args: { message: "big ttl" }, task_ttl_ms: 1e308 }],
      ["execute_tool", { server: "everything", tool: "echo", args: { message: "huge timeout" }, timeout_ms: 1e308 }],
      ["execute_tool", { server: "__proto__", tool: "echo" }],
      ["execute_tool", { server: "constructor", tool: "constructor" }],
      ["list_tools", { server: "toString" }],
      ["read_resource", { server: "hasOwnProperty", uri: "x://y" }],
      ["get_prompt", { server: "everything", name: "__proto__", arguments: raw('{"__proto__":"x","constructor":"y"}') }],
      ["respond_to_elicitation", { request_id: "__proto__", action: "accept", content: raw('{"__proto__":"x"}') }],
      ["respond_to_sampling", { request_id: "constructor", text: "x" }],
      ["remove_server", { name: "__proto__" }],
      ["remove_server", { name: "constructor" }],
      ["add_server", { name: "constructor", command: "/nonexistent/emceepee-fuzz-binary" }],
      ["add_server", { name: "toString", url: "http://127.0.0.1:1/mcp" }],
      ["add_server", { name: "valueOf", url: "http://127.0.0.1:1/sse", transport: "sse" }],
      ["add_server", { name: "x", command: "/nonexistent", url: "http://127.0.0.1:1/mcp" }],
      ["add_server", { name: "hasOwnProperty", command: "/nonexistent", env: raw('{"__proto__":"x","NODE_OPTIONS":"--inspect"}') }],
      // Filters by server name: a hostile name matches nothing (a plain result).
      ["get_notifications", { server: "__proto__" }, "request"],
      ["get_logs", { server: "constructor" }, "request"],
      ["list_tasks", { server: "__proto__", status: "working" }, "request"],
      ["get_elicitations", { server: "hasOwnProperty" }, "request"],
      ["await_activity", { timeout_ms: 1e308 }],
      ["await_activity", { timeout_ms: -1 }],
    ] as Array<[string, Rec, Expect?]>) {
      const id = nextId();
      const expect: Expect = expectation ?? (tool === "execute_tool" && args.server === "everything" ? "request" : "tool-error");
      cases.push({ label: `${tool} ${short(args, 80)}`, body: rpc({ id, method: "tools/call", params: { name: tool, arguments: args } }), expect, id });
    }
    const failures = await run(cases, sessionHeaders);
    assert.deepEqual(failures, [], `${failures.length} bad replies:\n${failures.slice(0, 15).join("\n")}`);
    assert.ok(cases.length > 200, `only ${cases.length} cases`);
    const servers = gw.gateway.context.registry.names();
    assert.deepEqual(servers, ["everything"], "no hostile add_server/remove_server may change the registry");
  });

  test("hostile initialize requests: refused ones keep nothing; accepted ones are ordinary sessions", SLOW, async () => {
    const before = gw.gateway.context.sessions.size;
    const refused: FuzzCase[] = [
      { label: "initialize as text/plain", body: initializeBody(1), expect: "malformed", headers: { "Content-Type": "text/plain" } },
      { label: "initialize without text/event-stream in Accept", body: initializeBody(2), expect: "malformed", headers: { Accept: "application/json" } },
      {
        label: "initialize with protocolVersion 7",
        body: rpc({ id: 3, method: "initialize", params: { protocolVersion: 7, capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
        expect: "malformed",
      },
      {
        label: "initialize without clientInfo",
        body: rpc({ id: 4, method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: {} } }),
        expect: "malformed",
      },
      {
        label: "initialize with capabilities as string",
        body: rpc({ id: 5, method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: "all", clientInfo: { name: "x", version: "1" } } }),
        expect: "malformed",
      },
      { label: "attach to an unknown session", path: "/mcp?session=__proto__", body: initializeBody(6), expect: "malformed" },
      { label: "attach to a session with a huge id", path: `/mcp?session=${"s".repeat(4000)}`, body: initializeBody(7), expect: "malformed" },
      { label: "initialize on /servers/__proto__/mcp", path: "/servers/__proto__/mcp", body: initializeBody(8), expect: "malformed" },
    ];
    const failures = await run(refused, noSessionHeaders);
    assert.deepEqual(failures, [], failures.join("\n"));
    await eventually(() => gw.gateway.context.sessions.size === before, "refused initializes to leave no session");

    const accepted: FuzzCase[] = [
      {
        label: "1 MB client name",
        body: rpc({
          id: "big",
          method: "initialize",
          params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "n".repeat(1_000_000), version: "1" } },
        }),
        expect: "request",
        id: "big",
      },
      {
        label: "__proto__ in capabilities",
        body: rpc({
          id: "proto",
          method: "initialize",
          params: {
            protocolVersion: PROTOCOL,
            capabilities: raw('{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"elicitation":{}}'),
            clientInfo: { name: "x", version: "1" },
          },
        }),
        expect: "request",
        id: "proto",
      },
      {
        label: "unknown future protocolVersion",
        body: rpc({ id: "future", method: "initialize", params: { protocolVersion: "2999-01-01", capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
        expect: "request",
        id: "future",
      },
    ];
    for (const c of accepted) {
      const r = await send(base, c, noSessionHeaders());
      sent++;
      assert.deepEqual(judge(c, r), [], c.label);
      const id = r.headers["mcp-session-id"];
      assert.equal(typeof id, "string", `${c.label}: no session id`);
      const del = await send(base, { label: "delete", method: "DELETE", expect: "any" }, { "mcp-session-id": String(id), "mcp-protocol-version": PROTOCOL });
      assert.equal(del.status, 200, `${c.label}: DELETE answered ${del.status}`);
    }
    await eventually(() => gw.gateway.context.sessions.size === before, "deleted sessions to be gone");
    await assertAlive("hostile initializes");
  });

  test(
    "an initialize without an id (a notification) and without a session is refused and keeps nothing (regression)",
    {
      ...SLOW,
    },
    async () => {
      const known = new Set(gw.gateway.context.sessions.list().map((s) => s.id));
      const c: FuzzCase = {
        label: "initialize as notification",
        body: rpc({ method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
        expect: "malformed",
      };
      try {
        const r = await send(base, c, noSessionHeaders());
        sent++;
        assert.deepEqual(judge(c, r), [], c.label);
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.equal(gw.gateway.context.sessions.size, known.size, "an orphaned session was created (nobody got its id)");
      } finally {
        // Clean up what the bug leaves behind, so the leak checks below measure the rest of the run.
        for (const s of gw.gateway.context.sessions.list()) if (!known.has(s.id)) await gw.gateway.context.sessions.destroy(s.id, "fuzz cleanup");
      }
    },
  );

  test(
    "memory a session retains for SSE resumption is bounded in bytes, not only in replies (regression)",
    {
      ...SLOW,
    },
    async () => {
      const res = await send(base, { label: "init", body: initializeBody("mem"), expect: "request", id: "mem" }, noSessionHeaders());
      const id = String(res.headers["mcp-session-id"]);
      const headers = { ...noSessionHeaders(), "mcp-session-id": id, "mcp-protocol-version": PROTOCOL };
      try {
        const message = "m".repeat(900_000); // a reply of ~0.9 MB (arguments stay under any 1 MB argument limit)
        const call = (n: number): FuzzCase => ({
          label: `echo ${n}`,
          body: rpc({ id: n, method: "tools/call", params: { name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message } } } }),
          expect: "request",
          id: n,
        });
        await send(base, call(0), headers); // upstream connected, buffers warm
        gc();
        const before = process.memoryUsage().heapUsed;
        for (let n = 1; n <= 32; n++) {
          const r = await send(base, call(n), headers);
          sent++;
          assert.deepEqual(judge(call(n), r), []);
        }
        gc();
        const retained = process.memoryUsage().heapUsed - before;
        assert.ok(retained < 8 * 1048576, `32 replies of 0.9 MB left ${(retained / 1048576).toFixed(1)} MB of heap retained by the session`);
      } finally {
        await send(base, { label: "delete", method: "DELETE", expect: "any" }, { "mcp-session-id": id, "mcp-protocol-version": PROTOCOL });
        await eventually(() => gw.gateway.context.sessions.size === baselineSessions, "the memory-probe session to end");
      }
    },
  );

  test(
    "a request id reused while the first request with that id is still running: the second is refused, the first still answered (regression)",
    {
      ...SLOW,
    },
    async () => {
      const slow: FuzzCase = {
        label: "await_activity id dup",
        body: rpc({ id: "dup", method: "tools/call", params: { name: "await_activity", arguments: { timeout_ms: 5_000 } } }),
        expect: "request",
        id: "dup",
      };
      const fast: FuzzCase = { label: "ping id dup", body: rpc({ id: "dup", method: "ping" }), expect: "malformed" };
      const first = send(base, slow, sessionHeaders(), 60_000).then(
        (r) => judge(slow, r),
        (err: unknown) => [String(err)],
      );
      // The first request is in flight: its await_activity waits.
      await eventually(() => (gw.gateway.context.sessions.get(sessionId)?.events.waiterCount ?? 0) > 0, "the first request's await_activity to wait", 30_000);
      const second = judge(fast, await send(base, fast, sessionHeaders(), 30_000));
      sent += 2;
      assert.deepEqual(second, [], "the second request gets a JSON-RPC error (its id is taken)");
      assert.deepEqual(await first, [], "the first request (await_activity, 5 s)");
    },
  );

  test("afterwards: at least 1,000 messages sent, nothing leaked (sessions, child processes, Object.prototype, memory)", SLOW, async (t) => {
    assert.ok(sent >= 1_000, `only ${sent} messages were sent`);
    await assertAlive("the whole run");
    assert.equal(({} as Rec).polluted, undefined, "Object.prototype was polluted");
    assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), protoKeys, "Object.prototype gained keys");
    assert.equal(gw.gateway.context.sessions.size, baselineSessions, "sessions leaked");
    await eventually(() => childPids().length <= baselineChildren, `child processes to return to ${baselineChildren} (now ${childPids().length})`);
    // The raw session still works after everything it was sent.
    const echo = await send(
      base,
      {
        label: "echo",
        body: rpc({
          id: "final",
          method: "tools/call",
          params: { name: "execute_tool", arguments: { server: "everything", tool: "echo", args: { message: "still here" } } },
        }),
        expect: "request",
        id: "final",
      },
      sessionHeaders(),
    );
    assert.match(echo.body.toString(), /Echo: still here/);
    const mb = (n: number): string => (n / 1048576).toFixed(1);
    const withSession = await settledRss();
    // The session's SSE event store holds its last replies (bounded in count and bytes): end it, then memory must come back.
    const del = await send(base, { label: "delete", method: "DELETE", expect: "any" }, { "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL });
    assert.equal(del.status, 200);
    await eventually(() => gw.gateway.context.sessions.size === baselineSessions - 1, "the fuzz session to end");
    await eventually(() => childPids().length <= baselineChildren - 1, "the fuzz session's upstream process to exit");
    const rss = await settledRss();
    const growth = rss - baselineRss;
    const heapGrowth = process.memoryUsage().heapUsed - baselineHeap;
    const mu = process.memoryUsage();
    t.diagnostic(`heapUsed ${mb(mu.heapUsed)} MB (baseline ${mb(baselineHeap)} MB), heapTotal ${mb(mu.heapTotal)} MB, external ${mb(mu.external)} MB`);
    t.diagnostic(
      `HTTP statuses: ${[...statuses]
        .sort(([a], [b]) => a - b)
        .map(([k, v]) => `${k}×${v}`)
        .join(", ")}`,
    );
    t.diagnostic(
      `${sent} messages; test-process RSS (in-process gateway): baseline ${mb(baselineRss)} MB, with the fuzz session still open ${mb(withSession)} MB, after ending it ${mb(rss)} MB (${growth >= 0 ? "+" : ""}${mb(growth)} MB)`,
    );
    // Measured after the session ended, Node 20: +3.2 MB. Until the health client got the bounded schema validator
    // (test/helpers/gateway.ts) it was +16 MB, nearly all the *client's* Ajv recompiling the meta tools' output schemas on
    // each tools/list; with nine more output schemas that reached +27 MB. Modules loaded after the baseline and the health
    // session's SSE replay (bounded by replayMaxBytes, kept as bytes outside the heap) are in it: 12 MB.
    assert.ok(heapGrowth < 12 * 1048576, `the JS heap kept ${mb(heapGrowth)} MB more than at the start (a leak)`);
    // Native memory the process keeps for buffers and sockets (external): what a native leak would grow. RSS is only
    // reported: it also holds what the allocator and V8 keep reserved after a grown heap, which differs by Node version
    // (+83 MB on Node 20, +112 to +193 MB on Node 24 with the same heap growth).
    const externalGrowth = mu.external - baselineExternal;
    assert.ok(externalGrowth < 32 * 1048576, `external (native) memory grew by ${mb(externalGrowth)} MB`);
  });
});

describe("fuzz: malformed percent-encoding in the request path (gateway in a child process)", () => {
  test(
    "a bad %-escape in /servers/<name>/mcp is refused with 4xx and the gateway keeps running (regression)",
    {
      timeout: 60_000,
    },
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "emceepee-fuzz-"));
      const config = path.join(dir, "config.json");
      fs.writeFileSync(config, JSON.stringify({ mcpServers: {} }));
      const cli = await startCliServe(ROOT, ["--config", config, "--port", "0", "--log-level", "silent"]);
      try {
        const origin = new URL(cli.url).origin;
        for (const p of ["/servers/%E0%A4%A/mcp", "/servers/%/mcp", "/servers/%ZZ/mcp", "/servers/%C0%80/mcp"]) {
          const r = await send(
            origin,
            { label: p, path: p, body: initializeBody(1), expect: "malformed" },
            { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
          ).catch((err: unknown) => new Error(String(err)));
          if (r instanceof Error) {
            await new Promise((resolve) => setTimeout(resolve, 200));
            const exited = cli.child.exitCode !== null || cli.child.signalCode !== null || !processAlive(cli.child.pid!);
            assert.fail(
              `${p}: no reply (${String(r)}); gateway process ${exited ? `exited (code ${cli.child.exitCode})` : "still running"}\n${cli.stderr().slice(0, 800)}`,
            );
          }
          assert.deepEqual(judge({ label: p, expect: "malformed" }, r), [], p);
        }
        const hz = await send(origin, { label: "healthz", method: "GET", path: "/healthz", expect: "any" }, {});
        assert.equal(hz.status, 200);
      } finally {
        await stopChild(cli.child);
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
