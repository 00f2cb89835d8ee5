/** The Activity page: what happened (store kind `activity`), filterable, newest first, a page at a time, linked to sessions and tasks. */
import { age, duration, html, type Html } from "../html.js";
import type { ActivityKind, ActivityRecord } from "../../store/contracts.js";
import { statusTag } from "./layout.js";

export interface ActivityFilter {
  kind?: ActivityKind | undefined;
  server?: string | undefined;
  session?: string | undefined;
  /** Admins only (anyone else sees their own principal's). */
  principal?: string | undefined;
  outcome?: string | undefined;
  /** "1h", "24h", "7d" or "" (any). */
  within?: string | undefined;
}

export const WITHIN: Readonly<Record<string, number>> = { "15m": 15 * 60_000, "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000 };

export interface ActivityView {
  records: ActivityRecord[];
  filter: ActivityFilter;
  kinds: readonly string[];
  servers: string[];
  /** The asker may filter by principal (an admin). */
  admin: boolean;
  /** The query string of the next (older) page, when there may be one. */
  next?: string | undefined;
  /** Whether this is a later page (offer the newest). */
  paged: boolean;
  enabled: boolean;
  /** Records not written (queue full or the store failing), since start. */
  lost: number;
  now: number;
}

export function activityBody(v: ActivityView): Html {
  const { filter } = v;
  const option = (value: string, current: string | undefined, label = value) =>
    html`<option value="${value}" ${value === current ? html` selected` : ""}>${label}</option>`;
  const text = (name: string, label: string, value: string | undefined) =>
    html`<div class="field">
      <label for="filter-${name}">${label}</label><input id="filter-${name}" name="${name}" value="${value ?? ""}" placeholder="any" />
    </div>`;
  const form = html`<form method="get" action="/console/activity" class="filters" role="search" aria-label="Filter activity">
    <div class="field">
      <label for="filter-kind">Kind</label
      ><select id="filter-kind" name="kind">
        <option value="">any</option>
        ${v.kinds.map((k) => option(k, filter.kind))}
      </select>
    </div>
    <div class="field">
      <label for="filter-server">Server</label
      ><select id="filter-server" name="server">
        <option value="">any</option>
        ${v.servers.map((s) => option(s, filter.server))}
      </select>
    </div>
    ${text("session", "Session", filter.session)} ${v.admin ? text("principal", "Principal", filter.principal) : ""}
    ${text("outcome", "Outcome", filter.outcome)}
    <div class="field">
      <label for="filter-within">Within</label
      ><select id="filter-within" name="within">
        <option value="">any time</option>
        ${Object.keys(WITHIN).map((w) => option(w, filter.within, `last ${w}`))}
      </select>
    </div>
    <button type="submit">Filter</button>
  </form>`;
  const filtered = Object.values(filter).some((x) => x);
  const rows = v.records.map(
    (r) =>
      html`<tr>
        <td data-label="When">${age(r.at, v.now)}</td>
        <td data-label="Kind">${r.kind.replace(/_/g, " ")}</td>
        <td data-label="Outcome">${r.outcome ? statusTag(r.outcome) : ""}</td>
        <td data-label="Server">${r.server ?? ""}</td>
        <td data-label="Tool">${r.tool ?? ""}</td>
        <td data-label="Session">
          ${r.sessionHash ? html`<a href="/console/activity?session=${encodeURIComponent(r.sessionHash)}"><code>${r.sessionHash}</code></a>` : ""}
        </td>
        <td data-label="Task">${r.taskId ? html`<a href="/console/tasks/${encodeURIComponent(r.taskId)}"><code>${r.taskId}</code></a>` : ""}</td>
        <td data-label="Duration">${r.durationMs !== undefined ? (r.durationMs < 1000 ? `${r.durationMs} ms` : duration(r.durationMs)) : ""}</td>
        <td data-label="Principal">${r.principalHash ? html`<code>${r.principalHash}</code>` : ""}</td>
        <td data-label="Details">${r.summary ?? ""}</td>
      </tr>`,
  );
  const table = v.records.length
    ? html`<table class="stack">
        <caption>
          ${v.records.length} event(s), newest first
        </caption>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Kind</th>
            <th scope="col">Outcome</th>
            <th scope="col">Server</th>
            <th scope="col">Tool</th>
            <th scope="col">Session</th>
            <th scope="col">Task</th>
            <th scope="col">Duration</th>
            <th scope="col">Principal</th>
            <th scope="col">Details</th>
          </tr>
        </thead>
        <tbody>
          ${rows}
        </tbody>
      </table>`
    : html`<p>
        ${v.enabled ? html`Nothing happened yet${filtered ? " that matches the filter" : ""}.` : html`Activity is not recorded (gateway.activity.enabled is false).`}
      </p>`;
  const pager = html`<nav class="pager" aria-label="Pages">
    ${v.paged ? html`<a href="/console/activity?${pageQuery(filter)}">Newest</a>` : ""}
    ${v.next ? html`<a href="/console/activity?${v.next}" rel="next">Older</a>` : ""}
  </nav>`;
  // Only the first page follows what happens live (a later page stays where the person is).
  return html`${form}
    ${v.lost ? html`<p class="error" role="status">${v.lost} event(s) could not be recorded (the store was failing or too slow); see activity_write_failed in the log.</p>` : ""}
    <section id="activity" ${v.paged ? "" : html`data-live="replace"`} aria-live="polite">${table}</section>
    ${pager}`;
}

/** The filter as a query string (empty fields left out). */
export function pageQuery(filter: ActivityFilter, before?: { at: number; id: string }): string {
  const q = new URLSearchParams(Object.entries(filter).filter((e): e is [string, string] => typeof e[1] === "string" && e[1] !== ""));
  if (before) q.set("before", `${before.at}.${before.id}`);
  return q.toString();
}
