/**
 * The console's only static assets, hand-written and served by the gateway
 * (no CDN, no bundler): a small stylesheet and a script that makes the pages
 * live. The script listens to /console/events (SSE); on each change it
 * re-reads the page and swaps the regions marked data-live: "replace" regions
 * whole, "keyed" lists child by child (data-key), so a request someone is
 * answering keeps its form, focus and typing while others come and go. Each
 * stream's hello re-reads the page too (a change between the page's render and
 * its stream's start, or during a reconnection, is not missed). It also keeps the ages (time[data-since]) current. Without it the pages are
 * plain HTML.
 */
export const CONSOLE_JS = `"use strict";
(() => {
  const swap = (doc) => {
    for (const fresh of doc.querySelectorAll("[data-live]")) {
      const current = document.getElementById(fresh.id);
      if (!current) continue;
      if (fresh.dataset.live !== "keyed") {
        current.replaceWith(document.importNode(fresh, true));
        continue;
      }
      const keys = new Set([...fresh.children].map((c) => c.dataset.key));
      for (const child of [...current.children]) if (!keys.has(child.dataset.key)) child.remove();
      const have = new Set([...current.children].map((c) => c.dataset.key));
      for (const child of fresh.children) if (!have.has(child.dataset.key)) current.append(document.importNode(child, true));
    }
    document.documentElement.dataset.version = String(Number(document.documentElement.dataset.version || 0) + 1);
  };
  let running = false;
  let again = false;
  const refresh = async () => {
    if (running) { again = true; return; }
    running = true;
    try {
      const res = await fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (res.ok) swap(new DOMParser().parseFromString(await res.text(), "text/html"));
    } catch { /* the next change tries again */ }
    running = false;
    if (again) { again = false; void refresh(); }
  };
  const tick = () => {
    const now = Date.now();
    for (const t of document.querySelectorAll("time[data-since]")) {
      const s = Math.max(0, Math.floor((now - Number(t.dataset.since)) / 1000));
      t.textContent = s < 60 ? s + "s" : s < 3600 ? Math.floor(s / 60) + "m " + (s % 60) + "s" : Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    }
  };
  if (document.querySelector("[data-live]")) {
    const events = new EventSource("/console/events");
    events.addEventListener("change", () => void refresh());
    // hello starts every stream, the first and each reconnection: re-read the page, for what changed while no stream was open.
    events.addEventListener("hello", () => { document.documentElement.dataset.live = "on"; void refresh(); });
    setInterval(tick, 1000);
  }
})();
`;

export const CONSOLE_CSS = `:root { color-scheme: light dark; --fg: #1d1f24; --bg: #fafafa; --muted: #5c6370; --line: #d6d9de; --accent: #1f5fbf; --bad: #b3261e; --ok: #1e7a34; --warn: #8a5a00; --card: #fff; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e6e6; --bg: #16181c; --muted: #a0a7b4; --line: #353a42; --accent: #7fb0ff; --bad: #ff8a80; --ok: #7bd88f; --warn: #f0c060; --card: #1e2126; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header nav { display: flex; gap: 1.2rem; align-items: center; padding: .7rem 1.5rem; border-bottom: 1px solid var(--line); background: var(--card); }
nav .brand { font-weight: 700; margin-right: 1rem; }
nav a { color: var(--accent); text-decoration: none; padding: .2rem .1rem; }
nav a[aria-current="page"] { font-weight: 700; border-bottom: 2px solid var(--accent); }
nav .logout { margin-left: auto; }
main { padding: 1rem 1.5rem 3rem; max-width: 78rem; }
h1 { font-size: 1.5rem; margin: .5rem 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; background: var(--card); margin-bottom: 1rem; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; color: var(--muted); }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { font-size: .85rem; color: var(--muted); }
code { font-family: ui-monospace, monospace; font-size: .88em; }
pre { background: var(--card); border: 1px solid var(--line); padding: .6rem; overflow: auto; max-height: 48rem; white-space: pre-wrap; word-break: break-word; }
a { color: var(--accent); }
.badge { display: inline-block; min-width: 1.4em; padding: 0 .35em; border-radius: 1em; background: var(--accent); color: var(--bg); text-align: center; font-size: .8rem; }
.status { font-weight: 600; }
.status-completed, .status-connected { color: var(--ok); }
.status-failed, .status-error, .status-expired, .status-disconnected { color: var(--bad); }
.status-working, .status-connecting, .status-input_required { color: var(--warn); }
.status-cancelled, .status-closed, .status-idle { color: var(--muted); }
.error { color: var(--bad); font-weight: 600; }
.notice { border-left: 4px solid var(--ok); padding: .4rem .8rem; background: var(--card); }
.hint, .meta, .help { color: var(--muted); font-size: .88rem; }
.help { display: block; }
.request { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .8rem 1.1rem; margin: 0 0 1.2rem; }
.request h2 { margin-top: .2rem; }
.field { margin: .7rem 0; }
.field > label, legend { font-weight: 600; }
.field > .help, .field > input:not([type="checkbox"]), .field > select, .field > textarea { display: block; }
.field.check > label { display: inline; }
fieldset { border: 1px solid var(--line); border-radius: 4px; }
.choice { display: inline-block; margin-right: 1rem; font-weight: 400; }
input:not([type=checkbox]), select, textarea { font: inherit; padding: .35rem .45rem; min-width: 18rem; max-width: 100%; border: 1px solid var(--line); border-radius: 4px; background: var(--bg); color: var(--fg); }
textarea { width: 100%; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
button { font: inherit; padding: .4rem .9rem; border-radius: 4px; border: 1px solid var(--line); background: var(--bg); color: var(--fg); cursor: pointer; }
.actions button:first-child { background: var(--accent); color: var(--bg); border-color: var(--accent); }
button.danger { background: var(--bad) !important; color: var(--bg) !important; border-color: var(--bad) !important; }
.actions { display: flex; gap: .6rem; margin-top: .8rem; }
.filters { display: flex; gap: 1rem; align-items: flex-end; flex-wrap: wrap; }
.filters input, .filters select { min-width: 10rem; }
.req { color: var(--bad); }
.msg { margin: .4rem 0; }
.role { font-weight: 600; text-transform: uppercase; font-size: .78rem; color: var(--muted); }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; }
.facts dt { font-weight: 600; color: var(--muted); }
.facts dd { margin: 0; }
.media { max-width: 100%; border: 1px solid var(--line); }
.login { max-width: 26rem; margin: 2rem auto; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1.2rem 1.5rem; box-shadow: 0 1px 3px rgb(0 0 0 / .08); }
.login input:not([type=checkbox]) { width: 100%; min-width: 0; }
.login .actions button { width: 100%; }
body:has(form.login) main { max-width: none; }
body:has(form.login) h1 { text-align: center; margin-top: 3rem; }
.pager { display: flex; gap: 1rem; margin: .5rem 0 1rem; }
.chart { fill: var(--accent); vertical-align: middle; }
.chart .light { fill: var(--line); }
.upstream h2 .meta { font-weight: 400; margin-left: .5rem; }
.status-ok, .status-answered, .status-reconnected { color: var(--ok); }
.progress { width: 8rem; vertical-align: middle; }
/* Phones: tables become one card per row, each cell labelled by its column (data-label). */
@media (max-width: 40rem) {
  header nav { flex-wrap: wrap; gap: .6rem 1rem; padding: .6rem .8rem; }
  main { padding: .8rem .8rem 2rem; }
  input:not([type=checkbox]), select, textarea { min-width: 0; width: 100%; }
  .filters .field, .filters input, .filters select { width: 100%; min-width: 0; }
  table, thead, tbody, tr, th, td, caption { display: block; }
  table { background: none; }
  thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  tr { background: var(--card); border: 1px solid var(--line); border-radius: 6px; margin: 0 0 .6rem; padding: .3rem .6rem; }
  th, td { border: 0; padding: .15rem 0; overflow-wrap: anywhere; }
  td[data-label]::before, th[data-label]::before { content: attr(data-label) ": "; font-weight: 600; color: var(--muted); }
  td:empty { display: none; }
  .facts { grid-template-columns: 1fr; }
}
`;
