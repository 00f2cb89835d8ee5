/**
 * The console's cookies, in one place: the session cookie (a hash of the
 * gateway's token, never the token, or a person's console session id; read
 * by the HTTP guards through loginCookieMatches) with HttpOnly,
 * SameSite=Strict, Path=/console, and the login-binding cookie of an OpenID
 * Connect login (HttpOnly, SameSite=Lax: the provider's redirect back is a
 * cross-site top-level GET; Path=/console/callback). Every one is Secure
 * when the console is served over https, and its path is under the public
 * URL's path (cookieOptions: gateway.http.publicUrl).
 */
import { createHash, randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { secretEquals } from "../auth/secret.js";
import { CONSOLE_CALLBACK_PATH } from "../http/guards.js";

export const CONSOLE_COOKIE = "emceepee_console";
/** Binds a started OpenID Connect login to the browser that started it (login CSRF). */
export const LOGIN_BINDING_COOKIE = "emceepee_login";

/** How cookies are set: `secure` when the console's external URL is https. */
export interface CookieOptions {
  secure: boolean;
  /** The public URL's path (behind a proxy that serves the gateway under one, e.g. "/gateway"); "" at the root. @default "" */
  prefix?: string;
}

/** The cookies' options for `gateway.http.publicUrl`: Secure when it is https, paths under its path. */
export function cookieOptions(publicUrl: string | undefined): CookieOptions {
  if (publicUrl === undefined) return { secure: false };
  const url = new URL(publicUrl);
  return { secure: url.protocol === "https:", prefix: url.pathname.replace(/\/+$/, "") };
}

const attributes = (o: CookieOptions): string => `HttpOnly; SameSite=Strict; Path=${o.prefix ?? ""}/console${o.secure ? "; Secure" : ""}`;
const bindingAttributes = (o: CookieOptions): string => `HttpOnly; SameSite=Lax; Path=${o.prefix ?? ""}${CONSOLE_CALLBACK_PATH}${o.secure ? "; Secure" : ""}`;

/** The console cookie's value for `token`: a hash, so the cookie never holds the token itself. */
export function consoleCookieValue(token: string): string {
  return createHash("sha256").update(`emceepee-console\0${token}`).digest("hex");
}

/** The value of cookie `name` in a Cookie header, if sent. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  return (header ?? "")
    .split(";")
    .map((part) => part.trim())
    .find((part) => part.startsWith(`${name}=`))
    ?.slice(name.length + 1);
}

/** Whether the request carries the login cookie of `token` (compared in constant time). */
export function loginCookieMatches(req: IncomingMessage, token: string): boolean {
  const value = readCookie(req.headers.cookie, CONSOLE_COOKIE);
  return value !== undefined && secretEquals(value, consoleCookieValue(token));
}

/** The Set-Cookie header of a successful log-in. */
export function loginCookie(token: string, o: CookieOptions): string {
  return `${CONSOLE_COOKIE}=${consoleCookieValue(token)}; ${attributes(o)}`;
}

/** The Set-Cookie header that logs out (the browser drops the cookie). */
export function logoutCookie(o: CookieOptions): string {
  return `${CONSOLE_COOKIE}=; ${attributes(o)}; Max-Age=0`;
}

/** The Set-Cookie header of an OpenID Connect login: a new random console session id (rotated at every login), for `maxAgeMs`. */
export function sessionCookie(sessionId: string, maxAgeMs: number, o: CookieOptions): string {
  return `${CONSOLE_COOKIE}=${sessionId}; ${attributes(o)}; Max-Age=${Math.floor(maxAgeMs / 1000)}`;
}

/** A new random login-binding value (256 bits); the store keeps only its hash (bindingHash). */
export function newLoginBinding(): string {
  return randomBytes(32).toString("base64url");
}

/** What the store keeps of a login-binding value. */
export function bindingHash(binding: string): string {
  return createHash("sha256").update(`emceepee-login-binding\0${binding}`).digest("hex");
}

/** The Set-Cookie header that binds a started login to this browser, for `maxAgeMs` (the login's lifetime). */
export function bindingCookie(binding: string, maxAgeMs: number, o: CookieOptions): string {
  return `${LOGIN_BINDING_COOKIE}=${binding}; ${bindingAttributes(o)}; Max-Age=${Math.max(1, Math.floor(maxAgeMs / 1000))}`;
}

/** The Set-Cookie header that drops the login-binding cookie (after the callback, whatever its outcome). */
export function clearBindingCookie(o: CookieOptions): string {
  return `${LOGIN_BINDING_COOKIE}=; ${bindingAttributes(o)}; Max-Age=0`;
}
