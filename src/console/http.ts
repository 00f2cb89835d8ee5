/**
 * The console's HTTP replies: HTML with a strict Content-Security-Policy (no
 * inline script or style, nothing from another origin), redirects after a
 * POST, and bounded form bodies.
 */
import type http from "node:http";
import { readBody } from "../http/json-rpc.js";
import { mediaType } from "../mcp/media-type.js";
import type { Html } from "./html.js";

/** Scripts and styles only from the gateway itself; images and audio of results may be data: URLs. */
const CSP =
  "default-src 'self'; img-src 'self' data:; media-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

export const SECURITY_HEADERS = {
  "Content-Security-Policy": CSP,
  "X-Content-Type-Options": "nosniff",
  // Not no-referrer: under it Chrome posts forms with `Origin: null`, and console POSTs need their origin (CSRF check).
  "Referrer-Policy": "same-origin",
  "X-Frame-Options": "DENY",
  "Cache-Control": "no-store",
} as const;

export function sendHtml(res: http.ServerResponse, status: number, body: Html, headers: Record<string, string | string[]> = {}): void {
  res.writeHead(status, { "Content-Type": "text/html; charset=utf-8", ...SECURITY_HEADERS, ...headers });
  res.end(body.value);
}

export function sendText(res: http.ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", ...SECURITY_HEADERS, ...headers });
  res.end(text);
}

/** 303 See Other: after a POST, the browser GETs `location` (a reload does not post again). */
export function redirect(res: http.ServerResponse, location: string, headers: Record<string, string> = {}): void {
  res.writeHead(303, { Location: location, ...SECURITY_HEADERS, ...headers });
  res.end();
}

/** The request's urlencoded form (what a console form posts), at most `maxBytes`. */
export async function readForm(req: http.IncomingMessage, maxBytes: number): Promise<URLSearchParams> {
  const type = mediaType(req.headers["content-type"]);
  if (type !== "application/x-www-form-urlencoded") {
    throw new FormError(`console forms are posted as application/x-www-form-urlencoded (got '${type || "no content type"}'); submit the form in the console`);
  }
  return new URLSearchParams(await readBody(req, maxBytes));
}

/** A console request that cannot be served as asked (400, with what to do). */
export class FormError extends Error {}
