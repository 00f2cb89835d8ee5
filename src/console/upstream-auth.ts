/**
 * The end of a person's authorization at an upstream's OAuth server
 * (issue 23, docs/adr/0027-upstream-identity.md): `/console/oauth/callback` is where the authorization
 * server sends the browser; it stores nothing and only moves the browser,
 * same-site, to `/console/oauth/complete` with the same query, where the
 * console's own login (Strict cookies are sent on a same-site navigation)
 * says who the person is. There the flow is completed for that person only.
 */
import { OPERATOR, type Principal } from "../auth/principal.js";
import { errorMessage } from "../errors.js";
import type http from "node:http";
import { ANONYMOUS } from "../upstream/auth/connect.js";
import { escapeHtml, html, type Html } from "./html.js";

export const UPSTREAM_COMPLETE_PATH = "/console/oauth/complete";

/** What completes a flow (UpstreamOAuth.complete, with the configured servers). */
export interface UpstreamAuthCompleter {
  complete(query: URLSearchParams, person: { issuer: string; subject: string }): Promise<{ upstream: string }>;
}

/** The public callback: a same-site refresh to the completion page with the same query; nothing stored, nothing checked here. */
export function sendCallbackRefresh(req: http.IncomingMessage, res: http.ServerResponse): void {
  const query = new URL(req.url ?? "/", "http://gateway.invalid").search;
  const next = escapeHtml(`${UPSTREAM_COMPLETE_PATH}${query}`);
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer" });
  res.end(`<!doctype html><meta http-equiv="refresh" content="0;url=${next}"><title>Connecting…</title><p><a href="${next}">Continue</a></p>`);
}

/** Whom a console user completes flows for: their principal, or the static token's operator, or (no authentication) the anonymous one. */
export function personOf(principal: Principal | undefined, hasToken: boolean): { issuer: string; subject: string } {
  if (principal) return principal;
  return hasToken ? OPERATOR : ANONYMOUS;
}

/** The completion page's body: connected, or why not (the person starts again). */
export async function completeUpstreamAuth(
  completer: UpstreamAuthCompleter,
  query: URLSearchParams,
  person: { issuer: string; subject: string },
): Promise<{ status: number; title: string; body: Html; server?: string; refused?: string }> {
  try {
    const { upstream } = await completer.complete(query, person);
    return {
      status: 200,
      title: "Connected",
      server: upstream,
      body: html`<p>
        Server <code>${upstream}</code> is connected with your own account. You may close this page: your agent's next call to it goes through.
      </p>`,
    };
  } catch (err) {
    const message = errorMessage(err);
    return { status: 400, title: "Not connected", refused: message, body: html`<p>${message}</p>` };
  }
}
