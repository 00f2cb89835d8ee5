/**
 * The Connections page's Connect answer (issue 23): a page that moves the
 * browser on to the authorization server (a refresh and a link), not a 303.
 * The console's CSP has `form-action 'self'`, which browsers apply to a form
 * POST's redirects too: a 303 to another origin was blocked (Chromium:
 * ERR_ABORTED), so Connect never reached the sign-in in a real browser.
 * Also the page's per-user secret forms (secretsBody).
 */
import type http from "node:http";
import type { SecretRow } from "../../upstream/auth/secrets.js";
import { age, escapeHtml, html, type Html } from "../html.js";

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

/**
 * The Connections page's per-user secrets (issue 23): a form per slot of each config-file server with `secrets`.
 * A value is never shown back: the field is always empty (a password field, not autofilled); Save replaces,
 * Remove forgets it.
 */
export function secretsBody(rows: readonly SecretRow[], now: number): Html {
  if (rows.length === 0) return html``;
  const row = (r: SecretRow) =>
    html`<tr data-server="${r.server}" data-slot="${r.slot}">
      <td><code>${r.server}</code></td>
      <td><code>${r.slot}</code>${r.description ? html`<br /><small>${r.description}</small>` : ""}</td>
      <td>${r.target}</td>
      <td class="status">
        ${r.set ? "set" : r.optional ? "not set (optional)" : "not set"}${r.set && r.updatedAt !== undefined ? html` <small>(${age(r.updatedAt, now)} ago)</small>` : ""}
      </td>
      <td>
        <form method="post" action="/console/connections">
          <input type="hidden" name="action" value="secret-save" /><input type="hidden" name="server" value="${r.server}" />
          <input type="hidden" name="slot" value="${r.slot}" />
          <input type="password" name="value" autocomplete="off" aria-label="value for ${r.slot}" required />
          <button type="submit">${r.set ? "Replace" : "Save"}</button>
        </form>
        ${
          r.set
            ? html`<form method="post" action="/console/connections">
                <input type="hidden" name="action" value="secret-remove" /><input type="hidden" name="server" value="${r.server}" />
                <input type="hidden" name="slot" value="${r.slot}" /><button type="submit">Remove</button>
              </form>`
            : ""
        }
      </td>
    </tr>`;
  return html`<h2>Your secrets</h2>
    <p>
      Keys and tokens of your own that these servers are started or called with. A value is sealed in the gateway's vault and never shown again; a process
      started with it serves only you.
    </p>
    <table class="secrets">
      <thead>
        <tr>
          <th>server</th>
          <th>slot</th>
          <th>sent as</th>
          <th>status</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${rows.map(row)}
      </tbody>
    </table>`;
}
