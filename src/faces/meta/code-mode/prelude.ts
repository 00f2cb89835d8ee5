/**
 * The guest side of run_code: the JavaScript that runs in the sandbox before
 * the script. It captures the two host functions (and deletes them from
 * globalThis), and builds `mcp` and `console` on them; every value crosses
 * as a JSON string, so the host never holds a guest object and the guest
 * never holds a host one. The script is the body of an async function; its
 * return value (or what it threw) is turned into JSON here.
 */

/** The mcp functions and the host operation each calls (sandbox.ts HostOps). */
export const GUEST_FUNCTIONS = {
  call: "(server, tool, args) => invoke('call', [server, tool, args === undefined ? {} : args])",
  readResource: "(server, uri) => invoke('readResource', [server, uri])",
  getPrompt: "(server, name, args) => invoke('getPrompt', [server, name, args === undefined ? {} : args])",
  listTools: "(server) => invoke('listTools', [server])",
  search: "(query, options) => invoke('search', [query, options === undefined ? {} : options])",
} as const;

export type GuestFunction = keyof typeof GUEST_FUNCTIONS;

/** The prelude for a run whose host offers `ops`. */
export function prelude(ops: readonly GuestFunction[]): string {
  const mcp = ops
    .map((op) => `${op}: ${GUEST_FUNCTIONS[op]}`)
    .map((f) => `${f},\n    `)
    .join("");
  return `(function () {
  "use strict";
  const g = globalThis;
  const call = g.__emceepee_call, log = g.__emceepee_log;
  delete g.__emceepee_call;
  delete g.__emceepee_log;
  const stringify = JSON.stringify, parse = JSON.parse, E = Error, freeze = Object.freeze, S = String;
  const text = (v) => {
    if (typeof v === "string") return v;
    try { const s = stringify(v); return s === undefined ? S(v) : s; } catch (e) {
      try { return S(v); } catch (e2) { return "[a value that cannot be printed]"; }
    }
  };
  const line = (level) => (...args) => { log(level, args.map(text).join(" ")); };
  const invoke = async (op, args) => {
    const reply = parse(await call(op, stringify(args)));
    if (reply.error) {
      const err = new E(reply.error.code + ": " + reply.error.message);
      err.code = reply.error.code;
      throw err;
    }
    return reply.value;
  };
  const describe = (e) => {
    try {
      if (e instanceof E) {
        const at = typeof e.stack === "string" ? e.stack.split("\\n").map((l) => l.trim()).find((l) => l.startsWith("at ")) : undefined;
        return S(e.name) + ": " + S(e.message) + (at ? " (" + at + ")" : "");
      }
      if (typeof e === "string") return "the string " + stringify(e) + " (throw new Error(...) to get a line number)";
      return "a value that is not an Error: " + text(e);
    } catch (x) {
      return "a value that cannot be described";
    }
  };
  g.__emceepee_finish = (ok, v) => {
    if (!ok) return stringify({ ok: false, error: "threw " + describe(v) });
    try {
      const s = stringify({ ok: true, value: v === undefined ? null : v });
      if (typeof s === "string") return s;
    } catch (e) {
      return stringify({ ok: false, error: "returned a result that is not JSON (" + describe(e) + "); return plain data: objects, arrays, strings, numbers, booleans, null" });
    }
    return stringify({ ok: false, error: "returned a result that is not JSON; return plain data" });
  };
  g.console = freeze({ log: line("log"), info: line("log"), debug: line("log"), warn: line("error"), error: line("error") });
  const texts = (r) => (r && Array.isArray(r.content) ? r.content.filter((c) => c && c.type === "text").map((c) => c.text) : []);
  g.mcp = freeze({
    ${mcp}
    text: (r) => texts(r).join("\\n"),
    json: (r) => (r && r.structuredContent !== undefined ? r.structuredContent : parse(texts(r)[0])),
  });
})();
`;
}

/**
 * The script as the body of `async function main()`, on the wrapper's first
 * line so the script's line numbers are its own. The finisher is taken (and
 * removed from globalThis) before the script runs.
 */
export function wrapScript(code: string): string {
  return `((finish) => (delete globalThis.__emceepee_finish, (async function main() {${code}
})()).then((v) => finish(true, v), (e) => finish(false, e)))(globalThis.__emceepee_finish)`;
}
