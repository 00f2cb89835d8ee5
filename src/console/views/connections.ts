/**
 * The Connections page's Connect answer (issue 23): a page that moves the
 * browser on to the authorization server (a refresh and a link), not a 303.
 * The console's CSP has `form-action 'self'`, which browsers apply to a form
 * POST's redirects too: a 303 to another origin was blocked (Chromium:
 * ERR_ABORTED), so Connect never reached the sign-in in a real browser.
 */
import type http from "node:http";
import { escapeHtml } from "../html.js";

/** Sends the page that continues to `url` (the authorization URL the gateway made for this person and server). */
export function sendConnectContinue(res: http.ServerResponse, server: string, url: string): void {
  const to = escapeHtml(url);
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer" });
  res.end(
    `<!doctype html><meta http-equiv="refresh" content="0;url=${to}"><title>Connecting ${escapeHtml(server)}…</title>` +
      `<p>Continue to <a id="continue" href="${to}">the sign-in of server ${escapeHtml(server)}</a>.</p>`,
  );
}

/** The authorization URL in a Connect answer (for tests and scripts that do not follow refreshes). */
export function continueUrlOf(page: string): string | undefined {
  const m = /<a id="continue" href="([^"]+)"/.exec(page);
  return m
    ? m[1]!
        .replace(/&amp;/g, "&")
        .replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'")
        .replace(/&lt;/g, "<")
        .replace(/&gt;/g, ">")
    : undefined;
}
