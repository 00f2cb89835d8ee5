/**
 * HTTP guards applied before any MCP handling: Host and Origin validation
 * (DNS-rebinding protection) and the optional bearer token, compared in
 * constant time. isLoopbackHost() tells the CLI when a bind address reaches
 * beyond this machine.
 *
 * The web console (/console, src/console/, docs/adr/0012-console.md) is for
 * browsers, which cannot send a bearer header on a link or a form: under
 * /console the token is also accepted as the console's login cookie (its own
 * check, src/console/cookies.ts, passed in as `consoleCredential`), and the
 * login page itself needs none. A browser GET without it is sent to the login
 * page (303); anything else gets the usual 401. Every console POST must carry
 * an Origin of this very host (CSRF: a page elsewhere cannot post a form here,
 * even one the Origin allow-list accepts for MCP clients).
 */
import type { IncomingMessage } from "node:http";
import { accepts } from "../mcp/media-type.js";
import { secretEquals } from "../auth/secret.js";

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

export interface GuardOptions {
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
  token?: string | undefined;
  /**
   * OAuth is on (gateway.auth.oauth): bearer tokens outside /console are
   * checked by src/auth's Authenticator after these guards, not here; the
   * console takes the static token, or its own OIDC login (`consoleLogin`);
   * with neither it is closed.
   */
  oauth?: boolean | undefined;
  /** The console checks its own logins (gateway.console.oidc, src/console/oidc.ts): here only the same-origin POST check. */
  consoleLogin?: boolean | undefined;
  /** Under /console: whether the request carries the console's own credential for `token` (its login cookie). */
  consoleCredential?: ((req: IncomingMessage, token: string) => boolean) | undefined;
}

export type GuardFailure = { status: 303 | 401 | 403; message: string; headers?: Record<string, string> };

/** The console's paths: everything under CONSOLE_PATH; the login page (GET and POST) needs no token. */
export const CONSOLE_PATH = "/console";
export const CONSOLE_LOGIN_PATH = "/console/login";
/** Where the OpenID provider sends a person back (gateway.console.oidc); like the login page, it needs no token. */
export const CONSOLE_CALLBACK_PATH = "/console/callback";
/** Where an upstream's OAuth server sends a person back (issue 23): it stores nothing, only moves the browser on same-site; no token. */
export const UPSTREAM_CALLBACK_PATH = "/console/oauth/callback";
/** The console's stylesheet: public (the login page is styled before anyone logs in; it holds nothing secret). */
export const CONSOLE_CSS_PATH = "/console/assets/console.css";
/** Whether `path` is the console's (CONSOLE_PATH or below it). */
export function isConsolePath(path: string): boolean {
  return path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`);
}

export function checkRequest(req: IncomingMessage, o: GuardOptions): GuardFailure | undefined {
  const host = req.headers.host;
  if (!host || !hostAllowed(host, o.allowedHosts)) {
    return { status: 403, message: `Host '${host ?? ""}' is not allowed; add it to gateway.allowedHosts (or --allowed-hosts) to accept it` };
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !originAllowed(origin, o.allowedOrigins)) {
    return { status: 403, message: `Origin '${origin}' is not allowed; add it to gateway.allowedOrigins (or --allowed-origins) to accept it` };
  }
  const path = (req.url ?? "/").split("?")[0] ?? "/";
  if (isConsolePath(path)) {
    if (o.consoleLogin === true) return checkConsole(req, path, undefined, undefined);
    if (o.oauth === true && o.token === undefined) {
      return { status: 403, message: "the console needs a login: set gateway.console.oidc (people log in at the OAuth issuer) or gateway.token" };
    }
    return checkConsole(req, path, o.token, o.consoleCredential);
  }
  if (o.oauth !== true && o.token !== undefined && !tokenMatches(req.headers.authorization, o.token)) {
    return {
      status: 401,
      message: "missing or wrong bearer token (send Authorization: Bearer <token>)",
      headers: { "WWW-Authenticate": 'Bearer realm="emceepee"' },
    };
  }
  return undefined;
}

/** The console's checks, after Host and Origin passed: same-origin POSTs, then the token (bearer or cookie). */
function checkConsole(req: IncomingMessage, path: string, token: string | undefined, credential: GuardOptions["consoleCredential"]): GuardFailure | undefined {
  if (req.method !== "GET" && req.method !== "HEAD" && !sameOrigin(req)) {
    return {
      status: 403,
      message: `console ${req.method ?? ""} requests must come from the console's own pages (an Origin header of http://${req.headers.host ?? ""}); reload the console and submit the form there`,
    };
  }
  if (token === undefined || path === CONSOLE_LOGIN_PATH || path === CONSOLE_CALLBACK_PATH || path === UPSTREAM_CALLBACK_PATH || path === CONSOLE_CSS_PATH)
    return undefined;
  if (tokenMatches(req.headers.authorization, token) || credential?.(req, token) === true) return undefined;
  // A browser's navigation names text/html; curl's */* gets the 401 (wildcards off).
  if ((req.method === "GET" || req.method === "HEAD") && accepts(req.headers.accept, "text/html", { wildcards: false })) {
    return {
      status: 303,
      message: "the console needs the gateway's token: log in at /console/login",
      headers: { Location: `${CONSOLE_LOGIN_PATH}?next=${encodeURIComponent(req.url ?? CONSOLE_PATH)}`, "Cache-Control": "no-store" },
    };
  }
  return {
    status: 401,
    message: `the console needs the gateway's token: log in at ${CONSOLE_LOGIN_PATH} (a cookie) or send Authorization: Bearer <token>`,
    headers: { "WWW-Authenticate": 'Bearer realm="emceepee"' },
  };
}

/** An Origin header naming this very host (http or https), as browsers send with every POST. */
function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  const host = req.headers.host;
  if (origin === undefined || host === undefined) return false;
  try {
    const u = new URL(origin);
    return (u.protocol === "http:" || u.protocol === "https:") && u.host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}

/** Whether binding `host` keeps the gateway on this machine (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h) || /^::ffff:127(\.\d{1,3}){3}$/.test(h);
}

function hostname(hostHeader: string): string {
  if (hostHeader.startsWith("[")) return hostHeader.slice(0, hostHeader.indexOf("]") + 1).toLowerCase();
  return (hostHeader.split(":")[0] ?? "").toLowerCase();
}

/** The Host guard's rule: a loopback name, or one of `gateway.allowedHosts` (a name, or name:port). */
export function hostAllowed(hostHeader: string, allowed: readonly string[]): boolean {
  const name = hostname(hostHeader);
  return LOOPBACK_HOSTS.has(name) || allowed.some((a) => a.toLowerCase() === name || a.toLowerCase() === hostHeader.toLowerCase());
}

function originAllowed(origin: string, allowed: readonly string[]): boolean {
  if (allowed.includes(origin)) return true;
  try {
    const u = new URL(origin);
    return (u.protocol === "http:" || u.protocol === "https:") && LOOPBACK_HOSTS.has(u.hostname.toLowerCase());
  } catch {
    return false;
  }
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? "");
  return m !== null && secretEquals(m[1]!.trim(), token);
}
