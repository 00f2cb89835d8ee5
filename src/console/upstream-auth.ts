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
import type { ConnectionRow, UpstreamConnections } from "../upstream/auth/setup.js";
import { escapeHtml, html, type Html } from "./html.js";

export const UPSTREAM_COMPLETE_PATH = "/console/oauth/complete";

/** What completes flows and lists, starts and ends a person's connections (src/upstream/auth/setup.ts). */
export type UpstreamAuthCompleter = UpstreamConnections;

export const CONNECTIONS_PATH = "/console/connections";

/** The Connections page's body: each server with `auth`, whether the person is connected (scopes, expiry), a button to connect or disconnect. */
export function connectionsBody(rows: readonly ConnectionRow[], now: number): Html {
  if (rows.length === 0) return html`<p>No server here asks for your own account (none has <code>auth</code>).</p>`;
  const row = (r: ConnectionRow) =>
    html`<tr>
      <td><code>${r.server}</code></td>
      <td>${r.connected ? "connected" : "not connected"}</td>
      <td>${r.scopes?.join(" ") ?? ""}</td>
      <td>
        ${r.expiresAt === undefined ? "" : r.expiresAt > now ? `token renewed before ${new Date(r.expiresAt).toISOString()}` : "token expired (renewed at next use)"}
      </td>
      <td>
        <form method="post" action="${CONNECTIONS_PATH}">
          <input type="hidden" name="server" value="${r.server}" /><input type="hidden" name="action" value="${r.connected ? "disconnect" : "connect"}" />
          <button type="submit">${r.connected ? "Disconnect" : "Connect"}</button>
        </form>
      </td>
    </tr>`;
  return html`<p>
      Servers that act with your own account. Connecting sends you to the server's sign-in; disconnecting forgets your grant here (the server may keep its own
      record of it).
    </p>
    <table>
      <thead>
        <tr>
          <th>server</th>
          <th>status</th>
          <th>scopes</th>
          <th>token</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${rows.map(row)}
      </tbody>
    </table>`;
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
