/**
 * The console's one cookie, in one place: its name, its value (a hash of the
 * gateway's token, never the token), how a request's is read and checked (the
 * HTTP guards ask loginCookieMatches through GuardOptions.consoleCredential),
 * and the Set-Cookie headers of log-in and log-out (HttpOnly,
 * SameSite=Strict, Path=/console: a browser sends it to the console only).
 */
import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { secretEquals } from "../auth/secret.js";

export const CONSOLE_COOKIE = "emceepee_console";

const ATTRIBUTES = "HttpOnly; SameSite=Strict; Path=/console";

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
export function loginCookie(token: string): string {
  return `${CONSOLE_COOKIE}=${consoleCookieValue(token)}; ${ATTRIBUTES}`;
}

/** The Set-Cookie header that logs out (the browser drops the cookie). */
export function logoutCookie(): string {
  return `${CONSOLE_COOKIE}=; ${ATTRIBUTES}; Max-Age=0`;
}

/** The Set-Cookie header of an OpenID Connect login: a new random console session id (rotated at every login), for `maxAgeMs`. */
export function sessionCookie(sessionId: string, maxAgeMs: number): string {
  return `${CONSOLE_COOKIE}=${sessionId}; ${ATTRIBUTES}; Max-Age=${Math.floor(maxAgeMs / 1000)}`;
}
