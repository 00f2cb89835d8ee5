/**
 * The audit page: governance decision records (Store.decisions, ADR 0022),
 * newest first, filtered by principal hash, server, tool, outcome and a time
 * range (a plain GET form: works without JavaScript). The store runs the
 * filter (DecisionStore.query); a page ends in an "Older" link carrying the
 * last record's (at, id) as the cursor `before`.
 */
import type { DecisionOutcome, DecisionQuery, DecisionRecord } from "../../store/contracts.js";
import { html, type Html } from "../html.js";
import { statusTag } from "./layout.js";

export const OUTCOMES: readonly DecisionOutcome[] = [
  "allow",
  "deny",
  "approval_required",
  "error",
  "would_deny",
  "would_require_approval",
  "approval_approved",
  "approval_rejected",
  "approval_expired",
  "approval_cancelled",
];

export interface AuditFilter {
  principal?: string | undefined;
  server?: string | undefined;
  tool?: string | undefined;
  outcome?: DecisionOutcome | undefined;
  /** Epoch ms, inclusive. */
  from?: number | undefined;
  /** Epoch ms, exclusive. */
  to?: number | undefined;
}

/** The filter from the page's query; a field that does not parse is left out (and said so in `problems`). */
export function auditFilter(query: URLSearchParams): { filter: AuditFilter; before: DecisionQuery["before"]; problems: string[] } {
  const problems: string[] = [];
  const text = (name: string) => {
    const v = query.get(name)?.trim();
    return v ? v.slice(0, 200) : undefined;
  };
  const time = (name: string) => {
    const v = text(name);
    if (v === undefined) return undefined;
    // datetime-local has no zone: read as UTC, as the page shows times.
    const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(v) ? v : `${v}Z`);
    if (Number.isNaN(ms)) problems.push(`'${name}' is not a date and time (write e.g. 2026-11-26T18:00)`);
    return Number.isNaN(ms) ? undefined : ms;
  };
  const outcome = text("outcome");
  if (outcome !== undefined && !OUTCOMES.includes(outcome as DecisionOutcome)) problems.push(`'outcome' must be one of ${OUTCOMES.join(", ")}`);
  const cursor = /^(\d{1,16})\.([0-9A-Za-z]{1,64})$/.exec(query.get("before") ?? "");
  if (query.get("before") && !cursor) problems.push("'before' is not a page cursor (follow the page's Older link, or leave it out)");
  return {
    filter: {
      principal: text("principal"),
      server: text("server"),
      tool: text("tool"),
      outcome: OUTCOMES.includes(outcome as DecisionOutcome) ? (outcome as DecisionOutcome) : undefined,
      from: time("from"),
      to: time("to"),
    },
    before: cursor ? { at: Number(cursor[1]), id: cursor[2]! } : undefined,
    problems,
  };
}

/** The store query for a page of `limit` records. */
export function auditQuery(f: AuditFilter, before: DecisionQuery["before"], limit: number): DecisionQuery {
  return { principalHash: f.principal, server: f.server, tool: f.tool, outcome: f.outcome, since: f.from, until: f.to, before, limit };
}

export interface AuditView {
  filter: AuditFilter;
  query: URLSearchParams;
  records: DecisionRecord[];
  /** Whether this is a later page (reached through a cursor). */
  later: boolean;
  /** Whether older matches follow the last record shown. */
  more: boolean;
  problems: string[];
}

const iso = (ms: number | undefined) => (ms === undefined ? "" : new Date(ms).toISOString().slice(0, 16));

function pageLink(query: URLSearchParams, before: DecisionRecord | undefined): string {
  const q = new URLSearchParams(query);
  if (before) q.set("before", `${before.at}.${before.id}`);
  else q.delete("before");
  return `/console/audit?${q.toString()}`;
}

export function auditBody(v: AuditView): Html {
  const f = v.filter;
  const input = (name: string, label: string, value: string | undefined, type = "text") =>
    html`<label>${label} <input type="${type}" name="${name}" value="${value ?? ""}" /></label> `;
  return html`<form method="get" action="/console/audit" class="filters" aria-label="Filter decisions">
      ${input("principal", "Principal hash", f.principal)} ${input("server", "Server", f.server)} ${input("tool", "Tool", f.tool)}
      <label
        >Outcome
        <select name="outcome">
          <option value="">any</option>
          ${OUTCOMES.map((o) => html`<option value="${o}" ${f.outcome === o ? html`selected` : ""}>${o}</option>`)}
        </select></label
      >
      ${input("from", "From (UTC)", iso(f.from), "datetime-local")} ${input("to", "To (UTC)", iso(f.to), "datetime-local")}
      <button type="submit">Filter</button>
    </form>
    ${v.problems.map((p) => html`<p class="error" role="alert">${p}</p>`)}
    <p class="hint" id="audit-count">
      ${v.records.length} matching decision${v.records.length === 1 ? "" : "s"} shown, newest first${v.later ? " (an older page)" : ""}.
    </p>
    ${
      v.records.length
        ? html`<table id="audit">
            <thead>
              <tr>
                <th scope="col">When (UTC)</th>
                <th scope="col">Outcome</th>
                <th scope="col">Call</th>
                <th scope="col">Principal</th>
                <th scope="col">Face</th>
                <th scope="col">Decided by</th>
                <th scope="col">Arguments</th>
              </tr>
            </thead>
            <tbody>
              ${v.records.map(
                (r) =>
                  html`<tr id="d-${r.id}">
                    <td><time datetime="${new Date(r.at).toISOString()}">${new Date(r.at).toISOString().replace("T", " ").slice(0, 19)}</time></td>
                    <td>${statusTag(r.outcome)}</td>
                    <td><code>${r.server}</code> / <code>${r.tool}</code></td>
                    <td>${r.principalHash !== undefined ? html`<code>${r.principalHash}</code>` : html`<span class="hint">none</span>`}</td>
                    <td>${r.face}</td>
                    <td>
                      ${r.decidedBy}${r.ruleId !== undefined ? html` <code>${r.ruleId}</code>` : ""}${
                        r.policyIds?.length ? html` (${r.policyIds.join(", ")})` : ""
                      }${r.approval ? html` · ${r.approval.by}${r.approval.reason ? html`: ${r.approval.reason}` : ""}` : ""}${
                        r.error !== undefined ? html` · error: ${r.error}` : ""
                      }
                    </td>
                    <td><code title="${r.argumentsDigest}">${r.argumentsDigest.slice(0, 12)}</code></td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : html`<p class="hint">No decision matches.</p>`
    }
    <nav aria-label="Pages" class="pages">
      ${v.later ? html`<a href="${pageLink(v.query, undefined)}" rel="first">Newest</a>` : ""}
      ${v.more ? html`<a href="${pageLink(v.query, v.records.at(-1))}" rel="next">Older</a>` : ""}
    </nav>`;
}
