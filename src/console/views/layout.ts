/** The console's page frame: navigation, the live-update script and styles (served by the gateway, no CDN). */
import { html, type Html } from "../html.js";

export type Section = "overview" | "tasks" | "inbox" | "approvals" | "login" | "activity" | "upstreams" | "pins" | "audit";

export interface PageOptions {
  title: string;
  section: Section;
  /** Pending requests across sessions (the Inbox link's badge). */
  inboxCount?: number;
  /** The page has no navigation (login). */
  bare?: boolean;
  /** Governance is on: link the approvals page (docs/adr/0025). */
  approvals?: boolean;
  /** A token is configured: offer to log out. */
  canLogOut?: boolean;
}

export function page(o: PageOptions, body: Html): Html {
  const link = (section: Section, href: string, label: string, extra?: Html) =>
    html`<a href="${href}" ${o.section === section ? html` aria-current="page"` : ""}>${label}${extra ?? ""}</a>`;
  const badge =
    o.inboxCount !== undefined
      ? html` <span class="badge" id="inbox-count" data-live="replace" aria-label="${o.inboxCount} pending">${o.inboxCount}</span>`
      : undefined;
  const nav = o.bare
    ? ""
    : html`<nav aria-label="Console">
        <span class="brand">emceepee</span>
        ${link("overview", "/console", "Overview")} ${link("tasks", "/console/tasks", "Tasks")} ${link("inbox", "/console/inbox", "Inbox", badge)}
        ${link("upstreams", "/console/upstreams", "Upstreams")} ${link("activity", "/console/activity", "Activity")}
        ${o.approvals ? link("approvals", "/console/approvals", "Approvals") : ""}
        ${o.approvals ? html`${link("pins", "/console/pins", "Pins")} ${link("audit", "/console/audit", "Audit")}` : ""}
        ${o.canLogOut ? html`<form method="post" action="/console/logout" class="logout"><button type="submit">Log out</button></form>` : ""}
      </nav>`;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${o.title} · emceepee console</title>
        <link rel="icon" href="data:," />
        <link rel="stylesheet" href="/console/assets/console.css" />
        <script src="/console/assets/console.js" defer></script>
      </head>
      <body>
        <header>${nav}</header>
        <main>
          <h1>${o.title}</h1>
          ${body}
        </main>
      </body>
    </html> `;
}

/** A status word as a styled tag (the word itself carries the meaning; colour only helps). */
export function statusTag(status: string): Html {
  return html`<span class="status status-${status.replace(/[^a-z_]/g, "")}">${status}</span>`;
}
