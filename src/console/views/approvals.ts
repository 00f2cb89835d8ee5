/**
 * The approvals page (docs/adr/0025-approvals.md): each pending approval —
 * who asks, from which session and client, server, tool, the exact
 * arguments, the rule and policy version that asked, when it expires — with
 * a reason box and Approve / Deny buttons (a plain form: works without
 * JavaScript; the console's same-origin guard covers its POST); then the
 * latest decided ones.
 */
import type { ApprovalRecord } from "../../store/contracts.js";
import { age, html, type Html } from "../html.js";
import { statusTag } from "./layout.js";

export interface ApprovalsView {
  pending: ApprovalRecord[];
  decided: ApprovalRecord[];
  /** May decide (an admin). */
  canDecide: boolean;
  notice?: string | undefined;
  /** A refused decision, shown at its approval. */
  error?: { id: string; message: string } | undefined;
}

export function approvalsBody(v: ApprovalsView, now: number): Html {
  return html`${v.notice ? html`<p class="notice" role="status">${v.notice}</p>` : ""}
    ${v.canDecide ? "" : html`<p class="hint">Only console admins decide approvals; you see them read-only.</p>`}
    <h2>Pending</h2>
    <p id="approvals-empty" data-live="replace" class="hint">${v.pending.length ? "" : "No call is waiting for approval."}</p>
    <div id="approvals" data-live="keyed">${v.pending.map((r) => pending(r, now, v.canDecide, v.error?.id === r.id ? v.error.message : undefined))}</div>
    <h2>Decided</h2>
    <div id="approvals-decided" data-live="replace">
      ${
        v.decided.length
          ? html`<table>
              <thead>
                <tr>
                  <th scope="col">Approval</th>
                  <th scope="col">State</th>
                  <th scope="col">Call</th>
                  <th scope="col">Requester</th>
                  <th scope="col">Decided by</th>
                  <th scope="col">Reason</th>
                </tr>
              </thead>
              <tbody>
                ${v.decided.map(
                  (r) =>
                    html`<tr id="ap-${r.id}">
                      <td><code>${r.id}</code></td>
                      <td>${statusTag(r.state)}</td>
                      <td><code>${r.server}</code> / <code>${r.tool}</code></td>
                      <td>${requester(r)}</td>
                      <td>${r.decidedBy ?? ""}${r.decidedAt !== undefined ? html` (${age(r.decidedAt, now)} ago)` : ""}</td>
                      <td>${r.reason ?? ""}</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
          : html`<p class="hint">None yet.</p>`
      }
    </div>`;
}

function requester(r: ApprovalRecord): Html {
  return r.requester
    ? html`<span title="${r.requester.issuer}">${r.requester.subject}</span>`
    : html`<span class="hint">no identity (authentication off)</span>`;
}

function pending(r: ApprovalRecord, now: number, canDecide: boolean, error: string | undefined): Html {
  const id = r.id;
  const args = r.arguments === undefined ? "(not kept)" : JSON.stringify(r.arguments, null, 2);
  return html`<article class="request approval" id="ap-${id}" data-key="${id}" aria-labelledby="h-${id}">
    <h2 id="h-${id}"><code>${r.tool}</code> on <span class="server">${r.server}</span></h2>
    <dl class="meta">
      <dt>Requested by</dt>
      <dd>${requester(r)}</dd>
      <dt>Session / client</dt>
      <dd><code>${r.sessionId.slice(0, 8)}</code> on the ${r.face} face${r.client ? html` · ${r.client}` : ""}</dd>
      <dt>Asked by</dt>
      <dd>rule <code>${r.ruleId}</code> · policy version <code>${r.policyVersion}</code></dd>
      <dt>Asked</dt>
      <dd>${age(r.createdAt, now)} ago · expires ${new Date(r.expiresAt).toISOString()} · approval <code>${id}</code> · task <code>${r.taskId}</code></dd>
      <dt>Arguments (SHA-256 <code>${r.argumentsDigest.slice(0, 16)}…</code>)</dt>
      <dd><pre class="arguments">${args}</pre></dd>
    </dl>
    ${error ? html`<p class="error" role="alert" id="err-${id}">${error}</p>` : ""}
    ${
      canDecide
        ? html`<form method="post" action="/console/approvals/${encodeURIComponent(id)}" class="answer">
            <label for="reason-${id}">Reason (shown to the agent when denied, kept in the audit trail)</label>
            <input type="text" id="reason-${id}" name="reason" maxlength="500" />
            <div class="actions">
              <button type="submit" name="action" value="approve">Approve</button>
              <button type="submit" name="action" value="deny">Deny</button>
            </div>
          </form>`
        : ""
    }
  </article>`;
}
